using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Threading;

namespace Spindle.Queues;

/// <summary>
/// The pool's queue for work queued from outside its workers: lock-free, many producers, many consumers, unbounded,
/// consumed in batches, allocation-free once warm (segments are recycled, up to a bound), and closable so that shutdown
/// knows exactly which items were accepted.
/// </summary>
/// <remarks>
/// <para>Layout: a linked list of segments, each a bounded ring of <see cref="SegmentSize"/> slots in the style of
/// Vyukov's bounded MPMC queue (the runtime's <c>ConcurrentQueueSegment</c> is the same idea). Each slot carries a
/// sequence number; <c>Head</c> and <c>Tail</c> are 64-bit positions on their own cache lines.</para>
/// <list type="bullet">
/// <item>Slot <c>p &amp; mask</c> is free for the producer of position <c>p</c> when its sequence is <c>p</c>, and holds
/// the item of position <c>p</c> when its sequence is <c>p + 1</c>. A producer claims position <c>p</c> with a CAS of
/// <c>Tail</c> from <c>p</c> to <c>p + 1</c>, writes the item, then publishes it with a release store of the sequence
/// (<c>p + 1</c>). A consumer frees a slot after reading it with a release store of <c>p + SegmentSize</c>, which is
/// what makes the ring reusable lap after lap without allocating.</item>
/// <item>A consumer checks that the next <c>n</c> slots are published (sequence <c>h + i + 1</c>), then claims them
/// all with one CAS of <c>Head</c> from <c>h</c> to <c>h + n</c>: one contended atomic per batch. A published slot can
/// only change after a consumer has claimed it through <c>Head</c>, so the check stays true up to the CAS.</item>
/// <item>When a producer finds the tail segment full it takes <c>_segmentLock</c> (rare), freezes the segment (adds
/// <see cref="FreezeOffset"/> to its <c>Tail</c>, so every later or in-flight enqueue attempt on it fails), links a
/// successor and makes it the tail. Without the freeze, consumers freeing slots could let a late producer put an item
/// into a segment they have already left. A consumer that finds the head segment frozen and every position below its
/// frozen tail claimed takes the lock and moves the head to the successor.</item>
/// <item>Closing: <see cref="Close"/> sets <c>_closed</c> and fences. A producer re-reads <c>_closed</c> after its claim
/// (the CAS is a full fence). If it sees the queue closed it publishes an empty entry, which consumers skip, and reports
/// rejection; otherwise its claim is ordered before the close, so every consumer that later observes the close also
/// observes the claimed position (through <c>Tail</c>) and waits for it. Hence after a consumer has seen the queue closed
/// and empty, no accepted item can appear in it.</item>
/// <item>Consumers clear each slot they take, so the queue never keeps a dequeued item's state alive.</item>
/// </list>
/// <para>Recycling. A segment the head has left is <em>retired</em>: it goes onto a free list (at most
/// <see cref="DefaultMaxRetiredSegments"/>; beyond that it is left to the collector), and a later grow takes it from
/// there instead of allocating. After each full collection the owner trims the list (<see cref="TrimRetired"/>) once it
/// has not been used for a while. A segment's life from its start (or restart) to its retirement is an
/// <em>incarnation</em>. Who writes what: producers CAS <c>Tail</c> and write the slots they claimed; consumers CAS
/// <c>Head</c> and free the slots they claimed; everything else (freezing and unfreezing <c>Tail</c>, <c>Next</c>,
/// <c>Frozen</c>, <c>_headSegment</c>, <c>_tailSegment</c>, the free list, and a reused segment's <c>Head</c> and
/// sequences) is written under the lock. The fast paths are unchanged by reuse (one CAS per enqueue, one per batch, and
/// one more plain read of <c>_headSegment</c> per batch). Reuse has to be safe against three things.</para>
/// <list type="number">
/// <item>Items still inside. A segment is retired only when it is frozen and its <c>Head</c> has reached its frozen
/// tail <c>t</c>: every claimed position was taken by a consumer, and no position at or above <c>t</c> can be claimed.
/// </item>
/// <item>Consumers still copying. Passing <c>Head</c> is not the end of a consumer's work: it still copies its batch out
/// and frees the slots. A retired segment is reused only once every slot shows the sequence of a freed slot
/// (<c>t + ((i - t) &amp; mask)</c>, the position at or above <c>t</c> that maps to slot <c>i</c>); the free is a
/// release store after the consumer's last access to the slot, so nothing of theirs is still pending. A segment that
/// is not yet quiet stays in the list; the grow looks at a few candidates and allocates if none is quiet.</item>
/// <item>Threads holding a stale reference. A producer or consumer may have read the segment (from <c>_tailSegment</c>
/// or <c>_headSegment</c>) in an earlier incarnation and act on it later; counting such threads would cost an atomic
/// per operation. Instead every action they can take either goes through the CAS that commits it, on a value that never
/// recurs across incarnations, or is re-checked under the lock:
/// <list type="bullet">
/// <item><c>Head</c> strictly increases over a segment's whole life: a reused segment starts at the base
/// <c>b = (t &amp; ~mask) + SegmentSize</c>, above <c>t</c>. So a consumer's CAS succeeds only if <c>Head</c> did not
/// change since it read it, which rules out a reuse in between. After reading <c>Head</c> the consumer re-reads
/// <c>_headSegment</c>; if the segment is still the head then, the attempt is an ordinary one on the head segment
/// (which stays the head until the claimed positions are taken). Without that re-read a consumer that read the head
/// segment long ago could take items from a reused segment further down the list, ahead of older items.</item>
/// <item><c>Tail</c>'s unfrozen values strictly increase too (the new base is above the old tail), and a frozen value
/// carries bit 62, which no position reaches (that would take 4.6e18 items through one segment) and no slot sequence
/// equals. A producer only CASes a tail that equalled the slot's sequence, so never a frozen one; and a segment that
/// anyone can reach has an unfrozen value only while it is the tail (a reused segment is unfrozen only after it has
/// been linked as the tail, a new one is out of reach until then, and every segment is frozen before the tail moves
/// on). So a producer's successful CAS is an ordinary enqueue on the tail segment, with the close protocol above
/// intact.</item>
/// <item>A grow is re-checked under the lock: the segment must still be the tail and its <c>Tail</c> still the position
/// the producer found full, so a producer holding an old incarnation cannot freeze a live tail. Moving the head is
/// re-checked the same way (still the head, frozen, exhausted).</item>
/// <item>While a reused segment is being reset, its <c>Tail</c> stays frozen (no producer can claim) and its
/// <c>Head</c> is still <c>t</c>; the new sequences are <c>b + i</c>, so the slot of position <c>t</c> reads
/// <c>t + SegmentSize</c>, never <c>t + 1</c>, and a consumer at <c>t</c> finds nothing published. The
/// sequences are written before the release store of the new <c>Head</c>, and <c>Tail</c> is released last, so a thread
/// that reads either new value also reads the reset slots.</item>
/// </list></item>
/// </list>
/// <para>Walks. A retired segment's <c>Next</c> is cleared, so that a segment in the free list keeps nothing alive. A
/// walk from the head (<see cref="IsEmpty"/>, <see cref="Count"/>, <see cref="VisitStates"/>) could therefore stop
/// early at a segment retired under it, so retiring is bracketed by <c>_retireStamp</c> (odd while the head and the
/// link change, a seqlock): <see cref="IsEmpty"/>, which must be exact for parking and shutdown, repeats its walk until
/// it saw no retirement, and then the walk is one it could have made on a list whose segments are never reused. (A
/// retirement's writes are release stores after the odd stamp and before the even one; the walk's reads are acquire
/// loads between two reads of the stamp.) Reusing a segment needs no
/// stamp: a walk can only reach a reused segment through its new link (and then sees it reset), or through a stale
/// reference taken before the segment's retirement, which the stamp has already caught.</para>
/// </remarks>
internal sealed partial class GlobalQueue
{
    /// <summary>Slots per segment: a power of two, kept small enough (32 KiB) to stay off the large object heap.</summary>
    internal const int SegmentSize = 1024;

    /// <summary>
    /// Retired segments kept for reuse: 1,048,576 slots, the size of the runtime's largest <c>ConcurrentQueue</c>
    /// segment, so a backlog of up to about a million items repeats without allocating. More are left to the collector.
    /// </summary>
    internal const int DefaultMaxRetiredSegments = 1024;

    /// <summary>How many retired segments a grow examines for one that is quiet before it allocates.</summary>
    private const int RecycleCandidates = 4;

    private const long Mask = SegmentSize - 1;

    /// <summary>
    /// Added to a frozen segment's tail so that no enqueue attempt on it can succeed any more. Far larger than any real
    /// distance between a segment's head and tail (at most <see cref="SegmentSize"/>), so a reader can tell a frozen
    /// tail from a live one by that distance alone, whatever order it observes the offset and the flag in; and larger
    /// than any position, so a frozen tail never equals a live one of a later incarnation.
    /// </summary>
    private const long FreezeOffset = 1L << 62;

    private struct Slot
    {
        public WorkItemEntry Item;
        public long Sequence;
    }

    private sealed class Segment
    {
        public readonly Slot[] Slots = new Slot[SegmentSize];
        public PaddedInt64 Head;
        public PaddedInt64 Tail;
        public Segment? Next;
        public volatile bool Frozen;

        /// <summary>The next segment in the free list. Only under the segment lock.</summary>
        public Segment? NextRetired;

        /// <summary>Whether the segment is in the free list. Only under the segment lock.</summary>
        public bool InFreeList;

        public Segment()
        {
            for (int i = 0; i < Slots.Length; i++)
            {
                Slots[i].Sequence = i;
            }
        }

        /// <summary>The producer end without the freeze offset, given a head read before it.</summary>
        public long EffectiveTail(long head)
        {
            long tail = Volatile.Read(ref Tail.Value);
            return tail - head >= FreezeOffset / 2 ? tail - FreezeOffset : tail;
        }
    }

    /// <summary>Serialises the rare segment transitions: growing (with reuse) and moving the head (with retirement).</summary>
    private readonly Lock _segmentLock = new();
    private readonly int _maxRetired;
    private Segment _headSegment;
    private Segment _tailSegment;
    private volatile int _closed;

    /// <summary>Odd while a retirement changes the head and clears a link; written only under the lock.</summary>
    private long _retireStamp;

    // The free list (a stack, so the most recently used segments are reused first), when a segment last went into it or
    // out of it (Environment.TickCount64), and statistics: under the lock.
    private Segment? _freeList;
    private int _freeCount;
    private long _reusedCount;
    private long _lastFreeListUseMs;

    /// <summary>A queue that keeps up to <see cref="DefaultMaxRetiredSegments"/> retired segments for reuse.</summary>
    public GlobalQueue()
        : this(DefaultMaxRetiredSegments)
    {
    }

    /// <summary>A queue that keeps at most <paramref name="maxRetiredSegments"/> retired segments for reuse.</summary>
    internal GlobalQueue(int maxRetiredSegments)
    {
        Debug.Assert(maxRetiredSegments >= 0);
        _maxRetired = maxRetiredSegments;
        _headSegment = _tailSegment = new Segment();
    }

    /// <summary>Whether <see cref="Close"/> has been called.</summary>
    public bool IsClosed => _closed != 0;

    /// <summary>Retired segments waiting in the free list (tests and diagnostics).</summary>
    internal int RetiredSegmentCount
    {
        get
        {
            lock (_segmentLock)
            {
                return _freeCount;
            }
        }
    }

    /// <summary>How many times a grow reused a retired segment instead of allocating (tests and diagnostics).</summary>
    internal long ReusedSegmentCount
    {
        get
        {
            lock (_segmentLock)
            {
                return _reusedCount;
            }
        }
    }

    /// <summary>Adds an item. Returns false, without adding it, when the queue has been closed.</summary>
    public bool TryEnqueue(in WorkItemEntry item) => _closed == 0 && Enqueue(item, honourClose: true);

    /// <summary>
    /// Adds an item even when the queue is closed. Only for items that were already accepted elsewhere: a worker's full
    /// ring spilling over (that worker is alive and drains the global queue before it exits), or a continuation that
    /// the thread controller accepted before the stop (whoever stops the pool runs it).
    /// </summary>
    public void EnqueueAlways(in WorkItemEntry item) => Enqueue(item, honourClose: false);

    private bool Enqueue(in WorkItemEntry item, bool honourClose)
    {
        while (true)
        {
            Segment segment = Volatile.Read(ref _tailSegment);
            Slot[] slots = segment.Slots;
            var spinner = new SpinWait();
            long position;
            while (true)
            {
                position = Volatile.Read(ref segment.Tail.Value);
                ref Slot slot = ref slots[position & Mask];
                long sequence = Volatile.Read(ref slot.Sequence);
                if (sequence == position)
                {
                    if (Interlocked.CompareExchange(ref segment.Tail.Value, position + 1, position) != position)
                    {
                        continue; // another producer claimed it
                    }
                    Debug.Assert(Volatile.Read(ref slot.Sequence) == position, "A claimed slot stays free for its producer.");
                    if (honourClose && _closed != 0)
                    {
                        // Closed between our first check and our claim: the claim is not accepted work.
                        slot.Item = default;
                        Volatile.Write(ref slot.Sequence, position + 1);
                        return false;
                    }
                    Fill(ref slot.Item, item);
                    Volatile.Write(ref slot.Sequence, position + 1);
                    return true;
                }
                if (sequence < position)
                {
                    // Full (the slot still holds the item of the previous lap), or frozen (position carries the
                    // offset): move on to a new segment.
                    break;
                }
                // A producer claimed this position and has not published yet, or our Tail read is stale.
                spinner.SpinOnce(sleep1Threshold: -1);
            }
            Grow(segment, position);
        }
    }

    /// <summary>Links a successor to <paramref name="full"/>, if it is still the tail and still full at <paramref name="position"/>.</summary>
    private void Grow(Segment full, long position)
    {
        lock (_segmentLock)
        {
            if (Volatile.Read(ref _tailSegment) != full || Volatile.Read(ref full.Tail.Value) != position)
            {
                // Someone else already moved the tail on or claimed the position, or the observation was made in an
                // earlier incarnation of the segment: look again.
                return;
            }
            Debug.Assert(!full.Frozen, "Only the tail segment is frozen, once, under the lock.");
            Debug.Assert(position < FreezeOffset / 2, "A live tail carries no freeze offset.");

            Segment? next = TakeQuietRetired();
            bool reused = next is not null;
            long nextBase = 0;
            if (next is null)
            {
                next = new Segment();
            }
            else
            {
                nextBase = Volatile.Read(ref next.Head.Value);
                Debug.Assert(next.EffectiveTail(nextBase) < nextBase, "A reused segment stays frozen until it is the tail.");
            }

            // Order matters for lock-free readers: the offset first (so a reader that does not see Frozen yet sees a
            // huge tail and counts the segment as non-empty, never as exhausted), then Next, then Frozen (so a reader
            // that sees Frozen also sees the successor).
            Interlocked.Add(ref full.Tail.Value, FreezeOffset);
            Volatile.Write(ref full.Next, next);
            full.Frozen = true;
            Volatile.Write(ref _tailSegment, next);
            if (reused)
            {
                // Unfrozen only now that it is reachable from the head and is the tail: a producer that held it from an
                // earlier incarnation can claim a position in it only from here on, and then it is an ordinary enqueue
                // at the tail.
                Volatile.Write(ref next.Tail.Value, nextBase);
            }
        }
    }

    /// <summary>
    /// A mark of the consumers' progress: the head segment and its head position. It changes with every take and never
    /// recurs (a segment's head strictly increases over its whole life, see the remarks), so two equal marks read at two
    /// moments mean that nobody took an item in between (or the segment was retired and reused exactly to the same
    /// position, which the strictly increasing head rules out).
    /// </summary>
    public Mark HeadMark
    {
        get
        {
            Segment segment = Volatile.Read(ref _headSegment);
            return new Mark(segment, Volatile.Read(ref segment.Head.Value));
        }
    }

    /// <summary>See <see cref="HeadMark"/>.</summary>
    public readonly record struct Mark(object? Segment, long Head);

    /// <summary>Whether a consumer would find nothing right now, counting claimed but unpublished positions as items.</summary>
    public bool IsEmpty
    {
        get
        {
            var spinner = new SpinWait();
            while (true)
            {
                long stamp = Volatile.Read(ref _retireStamp);
                if ((stamp & 1) == 0 && TryWalkIsEmpty(stamp, out bool empty))
                {
                    return empty;
                }
                spinner.SpinOnce(sleep1Threshold: -1); // a retirement ran during the walk (rare, and short)
            }
        }
    }

    /// <summary>One walk for <see cref="IsEmpty"/>; false when a retirement may have changed the list under it.</summary>
    private bool TryWalkIsEmpty(long stamp, out bool empty)
    {
        empty = true;
        for (Segment? s = Volatile.Read(ref _headSegment); s is not null; s = Volatile.Read(ref s.Next))
        {
            long head = Volatile.Read(ref s.Head.Value);
            if (head < s.EffectiveTail(head))
            {
                empty = false;
                break;
            }
            if (!s.Frozen)
            {
                break; // producers move to the next segment only after freezing this one
            }
            if (Volatile.Read(ref _retireStamp) != stamp)
            {
                return false;
            }
        }
        // Every read above is an acquire, so this one comes after them: an unchanged, even stamp means none of them
        // saw a retirement's writes half done.
        return Volatile.Read(ref _retireStamp) == stamp;
    }

    /// <summary>Approximate number of items claimed by producers and not yet taken by consumers.</summary>
    public long Count
    {
        get
        {
            long count = 0;
            for (int attempt = 0; attempt < 4; attempt++)
            {
                long stamp = Volatile.Read(ref _retireStamp);
                count = 0;
                bool torn = (stamp & 1) != 0;
                for (Segment? s = Volatile.Read(ref _headSegment); s is not null && !torn; s = Volatile.Read(ref s.Next))
                {
                    long head = Volatile.Read(ref s.Head.Value);
                    count += Math.Max(0, s.EffectiveTail(head) - head);
                    torn = Volatile.Read(ref _retireStamp) != stamp;
                }
                if (!torn)
                {
                    return count; // exact when nothing moved meanwhile
                }
            }
            return count; // the head kept moving: what the last walk saw before it did
        }
    }

    /// <summary>
    /// Debugger support: calls <paramref name="visit"/> with the state of every published item whose callback is
    /// <paramref name="callback"/>, walking the segments without taking anything. Racy by design (items may move while
    /// it runs), so it may miss or repeat an item; it never blocks producers or consumers.
    /// </summary>
    public void VisitStates(object callback, Action<object?> visit)
    {
        long stamp = Volatile.Read(ref _retireStamp);
        for (Segment? segment = Volatile.Read(ref _headSegment); segment is not null; segment = Volatile.Read(ref segment.Next))
        {
            foreach (Slot slot in segment.Slots)
            {
                slot.Item.VisitStateIf(callback, visit);
            }
            if (Volatile.Read(ref _retireStamp) != stamp)
            {
                return; // the segment may have been retired under us; its link no longer leads on
            }
        }
    }

    /// <summary>Rejects every later enqueue. Items accepted before the close stay in the queue until taken.</summary>
    public void Close()
    {
        _closed = 1;
        Interlocked.MemoryBarrier();
    }
}
