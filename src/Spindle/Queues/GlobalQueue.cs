using System;
using System.Diagnostics;
using System.Threading;
using Spindle.Threading;

namespace Spindle.Queues;

/// <summary>
/// The pool's queue for work queued from outside its workers: lock-free, many producers, many consumers, unbounded,
/// consumed in batches, and closable so that shutdown knows exactly which items were accepted.
/// </summary>
/// <remarks>
/// <para>Layout: a linked list of fixed-size segments. Each segment has a producer counter <c>Tail</c> and a consumer
/// counter <c>Head</c>, each on its own cache line, and a slot array whose slots carry a small state word.</para>
/// <list type="bullet">
/// <item>A producer claims slot <c>i</c> with one atomic increment of <c>Tail</c> (it never fails or retries, unlike a
/// CAS loop). It writes the item, then publishes it with a release store of the slot state (Empty → Ready). When
/// <c>i</c> is past the segment end, the producer makes sure a next segment is linked (CAS on <c>Next</c>), advances
/// the shared tail segment (CAS), and claims again there. <c>Tail</c> may overshoot the segment size; readers clamp it.</item>
/// <item>A consumer claims a run of up to <c>n</c> published-or-claimed slots <c>[h, h + n)</c> with one CAS on
/// <c>Head</c>, so workers pay one contended atomic per batch, not per item. A claimed slot may not be published yet
/// (its producer sits between its increment and its store); the consumer spins briefly on that slot's state.</item>
/// <item>Closing: <see cref="Close"/> sets <c>_closed</c> and fences. A producer re-reads <c>_closed</c> after its
/// increment (a full fence). If it sees the queue closed it marks its slot Abandoned and reports rejection; otherwise
/// its increment is ordered before the close, so every consumer that later observes the close also observes the claimed
/// slot and waits for it. Hence, after a consumer sees the queue closed and empty, no accepted item can appear in it.</item>
/// <item>Consumers clear each slot they take, so the queue never keeps a dequeued item's state alive. Segments are not
/// reused (a stale reader could still hold one), so the queue allocates one segment per <see cref="SegmentSize"/> items.</item>
/// </list>
/// </remarks>
internal sealed class GlobalQueue
{
    internal const int SegmentSize = 1024;

    private const int SlotEmpty = 0;
    private const int SlotReady = 1;
    private const int SlotAbandoned = 2;

    private struct Slot
    {
        public WorkItemEntry Item;
        public int State;
    }

    private sealed class Segment
    {
        public readonly Slot[] Slots = new Slot[SegmentSize];
        public readonly long BaseIndex;
        public PaddedInt32 Tail;
        public PaddedInt32 Head;
        public Segment? Next;

        public Segment(long baseIndex) => BaseIndex = baseIndex;
    }

    private Segment _headSegment;
    private Segment _tailSegment;
    private volatile int _closed;

    public GlobalQueue()
    {
        _headSegment = _tailSegment = new Segment(0);
    }

    public bool IsClosed => _closed != 0;

    /// <summary>
    /// Adds an item. Returns false, without adding it, when the queue has been closed.
    /// </summary>
    public bool TryEnqueue(in WorkItemEntry item)
    {
        if (_closed != 0)
        {
            return false;
        }
        return Enqueue(item, honourClose: true);
    }

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
            int index = Interlocked.Increment(ref segment.Tail.Value) - 1;
            if (index < SegmentSize)
            {
                ref Slot slot = ref segment.Slots[index];
                if (honourClose && _closed != 0)
                {
                    // Closed between our first check and our claim: the claim is not accepted work.
                    Volatile.Write(ref slot.State, SlotAbandoned);
                    return false;
                }
                slot.Item = item;
                Volatile.Write(ref slot.State, SlotReady);
                return true;
            }
            AdvanceTail(segment);
        }
    }

    private void AdvanceTail(Segment full)
    {
        Segment? next = Volatile.Read(ref full.Next);
        if (next is null)
        {
            var created = new Segment(full.BaseIndex + SegmentSize);
            next = Interlocked.CompareExchange(ref full.Next, created, null) ?? created;
        }
        Interlocked.CompareExchange(ref _tailSegment, next, full);
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
            int head = Volatile.Read(ref segment.Head.Value);
            int tail = Math.Min(Volatile.Read(ref segment.Tail.Value), SegmentSize);
            if (head >= tail)
            {
                if (head < SegmentSize)
                {
                    return 0;
                }
                Segment? next = Volatile.Read(ref segment.Next);
                if (next is null)
                {
                    // Exhausted, and no producer has linked a successor yet: nothing is published beyond this point.
                    return 0;
                }
                Interlocked.CompareExchange(ref _headSegment, next, segment);
                continue;
            }

            int count = Math.Min(destination.Length, tail - head);
            if (Interlocked.CompareExchange(ref segment.Head.Value, head + count, head) != head)
            {
                continue;
            }

            int taken = 0;
            for (int i = head; i < head + count; i++)
            {
                ref Slot slot = ref segment.Slots[i];
                int state = Volatile.Read(ref slot.State);
                if (state == SlotEmpty)
                {
                    state = WaitForPublication(ref slot);
                }
                if (state == SlotReady)
                {
                    destination[taken++] = slot.Item;
                    slot.Item = default;
                }
            }
            if (taken > 0)
            {
                return taken;
            }
            // Every claimed slot was abandoned by a producer that lost the race with Close; look again.
        }
    }

    private static int WaitForPublication(ref Slot slot)
    {
        // The producer has claimed this slot and is between its increment and its release store. It is running
        // (or preempted) code that does not block, so the wait is short; SpinWait yields and then sleeps if not.
        var spinner = new SpinWait();
        int state;
        while ((state = Volatile.Read(ref slot.State)) == SlotEmpty)
        {
            spinner.SpinOnce();
        }
        return state;
    }

    /// <summary>Whether a consumer would find nothing right now (snapshot).</summary>
    public bool IsEmpty
    {
        get
        {
            for (Segment? s = Volatile.Read(ref _headSegment); s is not null; s = Volatile.Read(ref s.Next))
            {
                int tail = Volatile.Read(ref s.Tail.Value);
                if (Volatile.Read(ref s.Head.Value) < Math.Min(tail, SegmentSize))
                {
                    return false;
                }
                if (tail < SegmentSize)
                {
                    return true; // producers move to the next segment only once this one is full
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
            Segment head = Volatile.Read(ref _headSegment);
            Segment tail = Volatile.Read(ref _tailSegment);
            long first = head.BaseIndex + Volatile.Read(ref head.Head.Value);
            long last = tail.BaseIndex + Math.Min(Volatile.Read(ref tail.Tail.Value), SegmentSize);
            return Math.Max(0, last - first);
        }
    }

    /// <summary>Rejects every later enqueue. Items accepted before the close stay in the queue until taken.</summary>
    public void Close()
    {
        _closed = 1;
        Interlocked.MemoryBarrier();
    }
}
