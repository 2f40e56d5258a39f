using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Spindle.Queues;

// The slots and segment life cycle of the global queue: filling a claimed slot, moving the head past an exhausted
// segment, retiring it, and taking a retired segment back for reuse. The protocol (what makes reuse safe) is in the
// remarks on GlobalQueue.
internal sealed partial class GlobalQueue
{
    /// <summary>Moves the head past <paramref name="exhausted"/> and retires it, if it is still the exhausted head.</summary>
    private void AdvanceHead(Segment exhausted)
    {
        lock (_segmentLock)
        {
            if (Volatile.Read(ref _headSegment) != exhausted)
            {
                return; // another consumer moved the head on
            }
            long head = Volatile.Read(ref exhausted.Head.Value);
            if (!exhausted.Frozen || head < exhausted.EffectiveTail(head))
            {
                return; // the caller's reads were of an earlier incarnation; it looks again
            }
            Segment? next = Volatile.Read(ref exhausted.Next);
            Debug.Assert(next is not null, "A frozen segment has its successor.");
            Debug.Assert(head == exhausted.EffectiveTail(head), "Consumers take only published positions, all below the frozen tail.");
            Debug.Assert(exhausted != _tailSegment && !exhausted.InFreeList);

            long stamp = _retireStamp;
            Debug.Assert((stamp & 1) == 0);
            Volatile.Write(ref _retireStamp, stamp + 1);
            Volatile.Write(ref _headSegment, next!);
            Volatile.Write(ref exhausted.Next, null);
            Volatile.Write(ref _retireStamp, stamp + 2);

            if (_freeCount < _maxRetired)
            {
                exhausted.NextRetired = _freeList;
                exhausted.InFreeList = true;
                _freeList = exhausted;
                _freeCount++;
                _lastFreeListUseMs = Environment.TickCount64;
            }
        }
    }

    /// <summary>
    /// Takes a retired segment that no thread can still be working in, reset to a new base with its tail still frozen;
    /// null when the free list holds none (among the first few).
    /// </summary>
    private Segment? TakeQuietRetired()
    {
        Debug.Assert(_segmentLock.IsHeldByCurrentThread);
        Segment? previous = null;
        Segment? candidate = _freeList;
        for (int i = 0; candidate is not null && i < RecycleCandidates; i++)
        {
            if (IsQuiet(candidate))
            {
                if (previous is null)
                {
                    _freeList = candidate.NextRetired;
                }
                else
                {
                    previous.NextRetired = candidate.NextRetired;
                }
                candidate.NextRetired = null;
                candidate.InFreeList = false;
                _freeCount--;
                _reusedCount++;
                _lastFreeListUseMs = Environment.TickCount64;
                Reset(candidate);
                return candidate;
            }
            previous = candidate;
            candidate = candidate.NextRetired;
        }
        return null;
    }

    /// <summary>
    /// Gives retired segments beyond <paramref name="keep"/> back to the collector if the free list has not been used (no
    /// segment retired into it or drawn from it) for <paramref name="idleMs"/> milliseconds; returns how many it gave
    /// back. Meant to run after each full (generation 2) collection: a queue whose backlogs come back keeps its list; one
    /// that has had none for a while keeps only <paramref name="keep"/> segments, the most recently retired, so a backlog
    /// that happened once does not pin its segments for the life of the queue. (Idle time, not "since the last trim":
    /// code that collects twice in a row, a common idiom, would otherwise trim a list in full use at its second
    /// collection.)
    /// </summary>
    /// <remarks>
    /// Safe against threads that still hold a reference to a dropped segment from its last incarnation: they can act on
    /// it only through a CAS on a value that never recurs or under the lock, as for a retired segment (see the remarks
    /// on GlobalQueue); a dropped segment is simply never reused, so none of them can succeed, and the collector frees it
    /// once they have let go.
    /// </remarks>
    public int TrimRetired(int keep, long idleMs)
    {
        Debug.Assert(keep >= 0 && idleMs >= 0);
        lock (_segmentLock)
        {
            if (_freeCount <= keep || Environment.TickCount64 - _lastFreeListUseMs < idleMs)
            {
                return 0;
            }
            Segment? last = null;
            Segment? dropped = _freeList;
            for (int i = 0; i < keep; i++)
            {
                last = dropped;
                dropped = dropped!.NextRetired;
            }
            if (last is null)
            {
                _freeList = null;
            }
            else
            {
                last.NextRetired = null;
            }
            int released = 0;
            while (dropped is not null)
            {
                Segment? next = dropped.NextRetired;
                dropped.NextRetired = null;
                dropped.InFreeList = false;
                dropped = next;
                released++;
            }
            _freeCount -= released;
            Debug.Assert(_freeCount == keep);
            return released;
        }
    }

    /// <summary>
    /// Writes an item into a claimed slot. A free slot holds no references (a consumer clears the slot it takes, a new or
    /// recycled segment is cleared), so only the item's non-null fields are written: an unflowed item's null context
    /// costs no write barrier.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static void Fill(ref WorkItemEntry free, in WorkItemEntry item)
    {
        Debug.Assert(free.Callback is null && free.State is null && free.Context is null, "A free slot holds no references.");
        free.Callback = item.Callback;
        if (item.State is { } state)
        {
            free.State = state;
        }
        if (item.Context is { } context)
        {
            free.Context = context;
        }
    }

    /// <summary>Whether every slot of a retired segment has been freed by the consumer that took it.</summary>
    private static bool IsQuiet(Segment segment)
    {
        long tail = Volatile.Read(ref segment.Head.Value); // a retired segment's head sits at its frozen tail
        Slot[] slots = segment.Slots;
        for (int i = 0; i < slots.Length; i++)
        {
            if (Volatile.Read(ref slots[i].Sequence) != tail + ((i - tail) & Mask))
            {
                return false; // a consumer is still copying this slot out
            }
        }
        return true;
    }

    /// <summary>Starts a quiet retired segment's next incarnation at a base above its old tail; its tail stays frozen.</summary>
    private static void Reset(Segment segment)
    {
        long oldTail = segment.Head.Value;
        Debug.Assert(segment.Frozen && segment.EffectiveTail(oldTail) == oldTail, "Only an exhausted, frozen segment is reset.");
        Debug.Assert(segment.Next is null, "Retirement cleared the link.");
        long newBase = (oldTail & ~Mask) + SegmentSize;
        Slot[] slots = segment.Slots;
        for (int i = 0; i < slots.Length; i++)
        {
            Debug.Assert(slots[i].Item.Callback is null && slots[i].Item.State is null && slots[i].Item.Context is null,
                "Consumers cleared every slot they took.");
            slots[i].Sequence = newBase + i;
        }
        // Release: a consumer that reads the new head also reads the new sequences.
        Volatile.Write(ref segment.Head.Value, newBase);
        segment.Frozen = false; // the tail still carries the offset, so the segment still reads as frozen and exhausted
    }
}
