using System;
using System.Diagnostics;
using System.Threading;
using Spindle.Threading;

namespace Spindle.Queues;

/// <summary>
/// The pool's queue for work queued from outside its workers: lock-free, many producers, many consumers, unbounded,
/// consumed in batches, allocation-free in steady state, and closable so that shutdown knows exactly which items were
/// accepted.
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
/// <item>When a producer finds the tail segment full it takes <c>_growLock</c> (rare), freezes the segment (adds
/// <see cref="FreezeOffset"/> to its <c>Tail</c>, so every later or in-flight enqueue attempt on it fails), links a new
/// segment and makes it the tail. Without the freeze, consumers freeing slots could let a late producer put an item
/// into a segment they have already left. Consumers move the head to the next segment once the head segment is frozen
/// and every position below its frozen tail has been claimed.</item>
/// <item>Closing: <see cref="Close"/> sets <c>_closed</c> and fences. A producer re-reads <c>_closed</c> after its claim
/// (the CAS is a full fence). If it sees the queue closed it publishes an empty entry, which consumers skip, and reports
/// rejection; otherwise its claim is ordered before the close, so every consumer that later observes the close also
/// observes the claimed position (through <c>Tail</c>) and waits for it. Hence after a consumer has seen the queue closed
/// and empty, no accepted item can appear in it.</item>
/// <item>Consumers clear each slot they take, so the queue never keeps a dequeued item's state alive.</item>
/// </list>
/// </remarks>
internal sealed class GlobalQueue
{
    /// <summary>Slots per segment: a power of two, kept small enough (32 KiB) to stay off the large object heap.</summary>
    internal const int SegmentSize = 1024;

    /// <summary>
    /// Added to a frozen segment's tail so that no enqueue attempt on it can succeed any more. Far larger than any real
    /// distance between a segment's head and tail (at most <see cref="SegmentSize"/>), so a reader can tell a frozen tail
    /// from a live one by that distance alone, whatever order it observes the offset and the flag in.
    /// </summary>
    private const long FreezeOffset = 1L << 40;

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

    private readonly Lock _growLock = new();
    private Segment _headSegment;
    private Segment _tailSegment;
    private volatile int _closed;

    public GlobalQueue()
    {
        _headSegment = _tailSegment = new Segment();
    }

    public bool IsClosed => _closed != 0;

    /// <summary>Adds an item. Returns false, without adding it, when the queue has been closed.</summary>
    public bool TryEnqueue(in WorkItemEntry item) => _closed == 0 && Enqueue(item, honourClose: true);

    /// <summary>
    /// Adds an item even when the queue is closed. Only for items that were already accepted elsewhere (a worker's
    /// full ring spilling over): that worker is alive and drains the global queue before it exits.
    /// </summary>
    public void EnqueueAlways(in WorkItemEntry item) => Enqueue(item, honourClose: false);

    private bool Enqueue(in WorkItemEntry item, bool honourClose)
    {
        while (true)
        {
            Segment segment = Volatile.Read(ref _tailSegment);
            Slot[] slots = segment.Slots;
            var spinner = new SpinWait();
            while (true)
            {
                long position = Volatile.Read(ref segment.Tail.Value);
                ref Slot slot = ref slots[position & (SegmentSize - 1)];
                long sequence = Volatile.Read(ref slot.Sequence);
                if (sequence == position)
                {
                    if (Interlocked.CompareExchange(ref segment.Tail.Value, position + 1, position) != position)
                    {
                        continue; // another producer claimed it
                    }
                    if (honourClose && _closed != 0)
                    {
                        // Closed between our first check and our claim: the claim is not accepted work.
                        slot.Item = default;
                        Volatile.Write(ref slot.Sequence, position + 1);
                        return false;
                    }
                    slot.Item = item;
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
            Grow(segment);
        }
    }

    private void Grow(Segment full)
    {
        lock (_growLock)
        {
            if (Volatile.Read(ref _tailSegment) != full)
            {
                return; // someone else already moved the tail on
            }
            // Order matters for lock-free readers: the offset first (so a reader that does not see Frozen yet sees a
            // huge tail and counts the segment as non-empty, never as exhausted), then Next, then Frozen (so a reader
            // that sees Frozen also sees the successor).
            Debug.Assert(!full.Frozen, "Only the tail segment is frozen, once, under the lock.");
            var next = new Segment();
            Interlocked.Add(ref full.Tail.Value, FreezeOffset);
            Volatile.Write(ref full.Next, next);
            full.Frozen = true;
            Volatile.Write(ref _tailSegment, next);
        }
    }

    /// <summary>
    /// Takes up to <paramref name="destination"/>.Length items, oldest first. Returns how many were taken (0 when the
    /// queue looked empty).
    /// </summary>
    public int TryDequeueBatch(Span<WorkItemEntry> destination)
    {
        Debug.Assert(destination.Length > 0);
        while (true)
        {
            Segment segment = Volatile.Read(ref _headSegment);
            Slot[] slots = segment.Slots;
            long head = Volatile.Read(ref segment.Head.Value);
            int ready = 0;
            while (ready < destination.Length
                && Volatile.Read(ref slots[(head + ready) & (SegmentSize - 1)].Sequence) == head + ready + 1)
            {
                ready++;
            }
            if (ready == 0)
            {
                if (segment.Frozen && head >= segment.EffectiveTail(head))
                {
                    Segment? next = Volatile.Read(ref segment.Next);
                    if (next is not null)
                    {
                        Interlocked.CompareExchange(ref _headSegment, next, segment);
                        continue;
                    }
                }
                return 0;
            }
            if (Interlocked.CompareExchange(ref segment.Head.Value, head + ready, head) != head)
            {
                continue;
            }
            int taken = 0;
            for (int i = 0; i < ready; i++)
            {
                long position = head + i;
                ref Slot slot = ref slots[position & (SegmentSize - 1)];
                if (slot.Item.Callback is not null)
                {
                    destination[taken++] = slot.Item;
                }
                slot.Item = default;
                Volatile.Write(ref slot.Sequence, position + SegmentSize);
            }
            if (taken > 0)
            {
                return taken;
            }
            // Every claimed slot was abandoned by a producer that lost the race with Close; look again.
        }
    }

    /// <summary>Whether a consumer would find nothing right now, counting claimed but unpublished positions as items.</summary>
    public bool IsEmpty
    {
        get
        {
            for (Segment? s = Volatile.Read(ref _headSegment); s is not null; s = Volatile.Read(ref s.Next))
            {
                long head = Volatile.Read(ref s.Head.Value);
                if (head < s.EffectiveTail(head))
                {
                    return false;
                }
                if (!s.Frozen)
                {
                    return true; // producers move to the next segment only after freezing this one
                }
            }
            return true;
        }
    }

    /// <summary>Approximate number of items claimed by producers and not yet taken by consumers.</summary>
    public long Count
    {
        get
        {
            long count = 0;
            for (Segment? s = Volatile.Read(ref _headSegment); s is not null; s = Volatile.Read(ref s.Next))
            {
                long head = Volatile.Read(ref s.Head.Value);
                count += Math.Max(0, s.EffectiveTail(head) - head);
            }
            return count;
        }
    }

    /// <summary>Rejects every later enqueue. Items accepted before the close stay in the queue until taken.</summary>
    /// <summary>
    /// Debugger support: calls <paramref name="visit"/> with the state of every published item whose callback is
    /// <paramref name="callback"/>, walking the segments without taking anything. Racy by design (items may move while
    /// it runs), so it may miss or repeat an item; it never blocks producers or consumers.
    /// </summary>
    public void VisitStates(object callback, Action<object?> visit)
    {
        for (Segment? segment = Volatile.Read(ref _headSegment); segment is not null; segment = Volatile.Read(ref segment.Next))
        {
            foreach (Slot slot in segment.Slots)
            {
                WorkItemEntry item = slot.Item;
                if (ReferenceEquals(item.Callback, callback))
                {
                    visit(item.State);
                }
            }
        }
    }

    public void Close()
    {
        _closed = 1;
        Interlocked.MemoryBarrier();
    }
}
