using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's local queue (LIFO slot and ring) as owner and as victim, and its takes from the global queue and stalled peers.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, with its own queues empty: takes a batch from the global queue, unless the watch of a peer shows that
    /// peer stalled with items in its ring; then it takes half of those instead.
    /// </summary>
    /// <remarks>
    /// <para>Why: a worker takes up to <see cref="GlobalBatchSize"/> items from the global queue at once and keeps the
    /// rest in its ring. If the operating system deschedules it (a time slice of several milliseconds when the cores
    /// have more runnable threads than cores), those items wait. A searching worker would steal them, but a busy one
    /// under a steady inflow from outside (socket completions) always finds the global queue first, so they waited the
    /// whole slice: round trips of 4-6 ms among round trips of under 1 ms.</para>
    /// <para>The watch costs one read of a peer's started count per <see cref="PeerWatchTakes"/> takes: at the start of
    /// a watch this worker notes the peer's count; at its end, a peer that has started nothing meanwhile while its ring
    /// holds items (through <see cref="MayStealFrom"/>, so a lone item is left to a running owner) gives half of them,
    /// and stays watched; otherwise the watch moves on to the next worker. Every peer is thus looked at within
    /// <see cref="PeerWatchTakes"/> takes times the number of workers. A peer that runs one long item loses ring items
    /// that waited behind it, which is what a thief would do anyway.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TakeShared(out WorkItemEntry item)
    {
        if (--_peerWatch.Countdown <= 0 && EndPeerWatch(out item))
        {
            return true;
        }
        return TryTakeGlobalBatch(out item);
    }

    /// <summary>The end of a watch (see <see cref="TakeShared"/>): steals from the peer if it stalled, else watches the next one.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool EndPeerWatch(out WorkItemEntry item)
    {
        _peerWatch.Countdown = PeerWatchTakes;
        Worker? peer = _peerWatch.Peer;
        if (peer is not null
            && peer.StartedCount == _peerWatch.PeerStarted
            && !peer.Ring.IsEmpty
            && peer.MayStealFrom()
            && peer.Ring.StealHalfInto(Ring, out item) != 0)
        {
            _counts.CountPeerWatchSteal();
            return true; // the same peer stays watched, from the same count: if it is still stalled, the next watch takes more
        }
        Worker[] workers = Threads.Workers;
        Worker? next = null;
        if (workers.Length > 1)
        {
            int index = Array.IndexOf(workers, peer) + 1; // -1 (none yet, or it left the list) starts at the first
            next = workers[index % workers.Length];
            if (next == this)
            {
                next = workers[(index + 1) % workers.Length];
            }
        }
        _peerWatch.Peer = next;
        _peerWatch.PeerStarted = next is null ? 0 : next.StartedCount;
        item = default;
        return false;
    }


    /// <summary>Owner or thief: takes the LIFO slot's item.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeLifoSlot(out WorkItemEntry item)
    {
        object? next = Volatile.Read(ref _local.LifoSlot.Value);
        if (next is not null && Interlocked.CompareExchange(ref _local.LifoSlot.Value, null, next) == next)
        {
            item = new WorkItemEntry(next, WorkItemEntry.WorkItemMarker, null);
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>How long a thief leaves a running owner's lone queued item to its owner: 3 µs.</summary>
    private static readonly long s_stealGraceTicks = Math.Max(1, Stopwatch.Frequency * 3 / 1_000_000);

    /// <summary>
    /// Thief: whether this worker's queued items may be taken now. An owner that is running an item and holds exactly
    /// one queued item (in its LIFO slot, or alone in its ring) will most likely run that item next, within nanoseconds
    /// in a chain of short items, and a thief taking it would move the chain from core to core. Such an item is left to
    /// its owner until the owner has started nothing for a grace period (<see cref="s_stealGraceTicks"/>): its current
    /// item computes or blocks on, as a parent that forked a child does, and the child is taken. Surplus items (more
    /// than one) and the items of an owner between items may be taken at once.
    /// </summary>
    /// <remarks>
    /// A heuristic over snapshots of the owner's counts and queues: it decides only when a thief tries, never whether
    /// the take is safe (the ring's and the slot's own protocols do that), so a stale read costs at most a later steal.
    /// </remarks>
    public bool MayStealFrom()
    {
        long started = _record.StartedCount;
        if (started == _record.CompletedCount)
        {
            return true; // between items
        }
        int queued = Ring.Count + (Volatile.Read(ref _local.LifoSlot.Value) is null ? 0 : 1);
        if (queued != 1)
        {
            return queued > 1;
        }
        long deadline = Stopwatch.GetTimestamp() + s_stealGraceTicks;
        while (_record.StartedCount == started)
        {
            if (Stopwatch.GetTimestamp() >= deadline)
            {
                return true;
            }
            Thread.SpinWait(8);
        }
        return false; // the owner moved on: it has most likely taken the item itself
    }

    /// <summary>Whether this worker holds no queued item (ring and LIFO slot; a snapshot).</summary>
    public bool HasNoLocalWork => Volatile.Read(ref _local.LifoSlot.Value) is null && Ring.IsEmpty;

    /// <summary>
    /// Owner only: queues an <see cref="IWorkItem"/> without ExecutionContext into the LIFO slot, moving the item it
    /// displaces into the ring. Returns whether this worker now holds more than the new item (work to share).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool PushToLifoSlot(object workItem)
    {
        if (_local.LifoSlot.Value is null)
        {
            // Only the owner stores non-null, so the slot stays empty until the store below.
            Volatile.Write(ref _local.LifoSlot.Value, workItem);
            return !Ring.IsEmpty;
        }
        object? displaced = Interlocked.Exchange(ref _local.LifoSlot.Value, workItem);
        if (displaced is not null)
        {
            var entry = new WorkItemEntry(displaced, WorkItemEntry.WorkItemMarker, null);
            if (!Ring.TryPush(entry))
            {
                OverflowToGlobal(entry);
            }
        }
        return true;
    }

    /// <summary>
    /// Takes a batch from the global queue, after giving a producer this worker has caught up with a moment to get a
    /// batch ahead (<see cref="GlobalTakeGapWaits"/>): returns the first, keeps the rest in the ring (where they can be
    /// stolen).
    /// </summary>
    public bool TryTakeGlobalBatch(out WorkItemEntry item)
    {
        int room = Ring.Capacity - Ring.Count;
        int want = Math.Min(_local.Batch.Length, room + 1);
        int taken = Scheduler.TryDequeueGlobalBatch(_local.Batch.AsSpan(0, want), GlobalTakeGapWaits);
        if (taken == 0)
        {
            item = default;
            return false;
        }
        item = _local.Batch[0];
        _local.Batch[0] = default;
        if (_requests.LookOutside)
        {
            // Outside work reached this worker by another path (its search, or its own queues running dry): the
            // request is met. Kept, it would send the next dispatch outside again, ahead of the worker's local items.
            _requests.LookOutside = false;
        }
        // Pushed newest first, so that the owner's LIFO pops run the batch in queue order.
        if (taken > 1)
        {
            Ring.PushRangeReversed(_local.Batch.AsSpan(1, taken - 1));
        }
        if (taken == want && taken > 1)
        {
            // A full batch: the global queue may hold more, and others can steal the rest of this batch. A partial
            // batch emptied the queue, so this worker alone can run what it took.
            _services.Idle.WakeWorkerIfNeeded();
        }
        return true;
    }

    /// <summary>Called by the owner when its ring is full: half of it moves to the global queue, then the item goes in.</summary>
    public void OverflowToGlobal(in WorkItemEntry entry)
    {
        for (int i = Ring.Capacity / 2; i > 0 && Ring.TrySteal(out WorkItemEntry oldest); i--)
        {
            Scheduler.EnqueueOverflow(oldest);
        }
        if (!Ring.TryPush(entry))
        {
            Scheduler.EnqueueOverflow(entry);
        }
    }
}
