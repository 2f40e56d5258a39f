using System;
using System.Diagnostics;
using System.Threading;

namespace Spindle.Queues;

// The consumers' takes: a claim of published items at the head, then their copy, into a span or straight into a
// worker's ring. The protocol is in the remarks on GlobalQueue.
internal sealed partial class GlobalQueue
{
    /// <summary>
    /// Takes up to <paramref name="destination"/>.Length items, oldest first. Returns how many were taken (0 when the
    /// queue looked empty). With <paramref name="gapWaits"/> above zero, a consumer that finds two items or more but
    /// fewer than it asked for (in the head segment) has caught up with a producer: it first waits for the producer to
    /// get a whole batch ahead (<see cref="WaitForGap"/>, at most that many short spins), once, then counts again. A lone
    /// item is taken at once.
    /// </summary>
    public int TryDequeueBatch(Span<WorkItemEntry> destination, int gapWaits = 0)
    {
        Debug.Assert(destination.Length > 0);
        while (true)
        {
            int claimed = TryClaim(destination.Length, gapWaits, out Slot[] slots, out long head);
            if (claimed == 0)
            {
                return 0;
            }
            int taken = 0;
            for (int i = 0; i < claimed; i++)
            {
                ref Slot slot = ref slots[(head + i) & Mask];
                if (slot.Item.Callback is not null)
                {
                    destination[taken++] = slot.Item;
                }
                Free(ref slot, head + i);
            }
            if (taken > 0)
            {
                return taken;
            }
            gapWaits = 0; // every claimed slot was abandoned by a producer that lost the race with Close; look again
        }
    }

    /// <summary>
    /// <see cref="TryDequeueBatch"/> for a worker taking a batch into its own ring: up to <paramref name="max"/> items,
    /// the oldest returned in <paramref name="first"/>, the rest copied straight from their slots into
    /// <paramref name="ring"/>, newest first, so that the owner's LIFO pops run them in queue order (the ring must have
    /// room for <paramref name="max"/> - 1 more; a lone item leaves it untouched). Returns how many were taken,
    /// <paramref name="first"/> included.
    /// </summary>
    /// <remarks>
    /// Why not through a buffer: every copy of an entry into an array on the heap goes through the collector's write
    /// barrier once per reference, and a freshly queued item's state is young while the arrays are old, so each copy
    /// takes the barrier's whole path. Profiled on 2 cores with outside batches of 1,000 <c>Run</c> items, the two copies
    /// (slot to buffer, buffer to ring) were about a tenth of the draining worker's samples, half of them the buffer's.
    /// On one thread, queueing 32 items with fresh states, taking them as a batch and popping them: 25-27 ns an item
    /// straight into the ring against 31-35 through a buffer array (six alternating rounds of 9.6M items). A buffer on
    /// the stack instead, where the barrier ends at its first check, made drains slower, not faster (1M items queued
    /// from outside, then drained: 46.4 against 32.8 ms, medians of 8 interleaved pairs).
    /// </remarks>
    public int TryDequeueIntoRing(WorkStealingRing ring, int max, int gapWaits, out WorkItemEntry first)
    {
        Debug.Assert(max > 0);
        while (true)
        {
            int claimed = TryClaim(max, gapWaits, out Slot[] slots, out long head);
            if (claimed == 0)
            {
                first = default;
                return 0;
            }
            // The oldest item that a producer did not abandon is the caller's; the rest go to the ring, newest first.
            first = default;
            int i = 0;
            while (i < claimed && first.Callback is null)
            {
                ref Slot slot = ref slots[(head + i) & Mask];
                WorkItemEntry.Store(ref first, slot.Item);
                Free(ref slot, head + i);
                i++;
            }
            if (first.Callback is null)
            {
                gapWaits = 0; // every claimed slot was abandoned (see TryDequeueBatch); look again
                continue;
            }
            if (i == claimed)
            {
                return 1; // a lone item: the ring is not touched (a chain from outside takes its links one by one)
            }
            long bottom = ring.BeginPushInPlace(claimed - i);
            long b = bottom;
            for (int k = claimed - 1; k >= i; k--)
            {
                ref Slot slot = ref slots[(head + k) & Mask];
                if (slot.Item.Callback is not null)
                {
                    ring.WriteInPlace(b++, slot.Item);
                }
                Free(ref slot, head + k);
            }
            ring.EndPushInPlace(b);
            return 1 + (int)(b - bottom);
        }
    }

    /// <summary>
    /// Claims up to <paramref name="max"/> published items at the head of the head segment with one CAS of its head:
    /// returns how many (0 when the queue looked empty), in <paramref name="slots"/> from position
    /// <paramref name="head"/>. The caller copies each out and frees its slot (<see cref="Free"/>). See
    /// <see cref="TryDequeueBatch"/> for <paramref name="gapWaits"/>.
    /// </summary>
    private int TryClaim(int max, int gapWaits, out Slot[] slots, out long head)
    {
        while (true)
        {
            Segment segment = Volatile.Read(ref _headSegment);
            slots = segment.Slots;
            head = Volatile.Read(ref segment.Head.Value);
            if (Volatile.Read(ref _headSegment) != segment)
            {
                // The segment may have been retired and reused since we read it; the head we read must be one of the
                // head segment (see the remarks).
                continue;
            }
            int ready = 0;
            while (ready < max && Volatile.Read(ref slots[(head + ready) & Mask].Sequence) == head + ready + 1)
            {
                ready++;
            }
            if (gapWaits > 0 && ready >= 2 && ready < max
                && ((head + max) & Mask) >= max) // the batch's end is in this segment
            {
                WaitForGap(max, gapWaits, published: ready - 1);
                gapWaits = 0;
                continue;
            }
            if (ready == 0)
            {
                if (segment.Frozen && head >= segment.EffectiveTail(head))
                {
                    AdvanceHead(segment);
                    continue;
                }
                return 0;
            }
            if (Interlocked.CompareExchange(ref segment.Head.Value, head + ready, head) != head)
            {
                continue;
            }
            return ready;
        }
    }

    /// <summary>Clears a claimed slot, so the queue keeps nothing alive, and frees it for the producer of the next lap.</summary>
    private static void Free(ref Slot slot, long position)
    {
        Debug.Assert(Volatile.Read(ref slot.Sequence) == position + 1, "A claimed slot stays published until its consumer frees it.");
        slot.Item = default;
        Volatile.Write(ref slot.Sequence, position + SegmentSize);
    }
}
