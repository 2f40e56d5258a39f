using System.Runtime.CompilerServices;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's local queue as owner and as victim (see <see cref="WorkerLocalQueue"/>), and its takes from the global queue and stalled peers.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, with its own queues empty: takes a batch from the global queue, unless the watch of a peer shows that
    /// peer stalled with items in its ring (see <see cref="PeerWatch"/>); then it takes half of those instead.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TakeShared(out WorkItemEntry item)
    {
        if (_peerWatch.CountTake() && EndPeerWatch(out item))
        {
            return true;
        }
        return TryTakeGlobalBatch(out item);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool EndPeerWatch(out WorkItemEntry item)
    {
        if (_peerWatch.TryEnd(this, _services.Roster.Workers, Ring, out item))
        {
            _counts.CountPeerWatchSteal();
            return true;
        }
        return false;
    }

    /// <summary>Owner or thief: takes the LIFO slot's item.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeLifoSlot(out WorkItemEntry item) => _local.TryTakeLifoSlot(out item);

    /// <summary>Thieves and the scheduler: the LIFO slot's item, if any (a snapshot).</summary>
    public object? PeekLifoSlot() => _local.PeekLifoSlot();

    /// <summary>Owner only: whether its LIFO slot holds an item (a plain read of its own field is current).</summary>
    public bool HoldsLifoItem => _local.HoldsLifoItem;

    /// <summary>Thief: whether this worker's queued items may be taken now (see <see cref="WorkerLocalQueue.MayStealFrom"/>).</summary>
    public bool MayStealFrom() => _local.MayStealFrom(ref _record);

    /// <summary>Whether this worker holds no queued item (ring and LIFO slot; a snapshot).</summary>
    public bool HasNoLocalWork => _local.IsEmpty;

    /// <summary>Owner only: queues an item into the LIFO slot; returns whether this worker now holds more than it (work to share).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool PushToLifoSlot(object workItem) => _local.PushToLifoSlot(workItem, Scheduler);

    /// <summary>Owner only, with its ring full: half of it moves to the global queue, then the item goes in.</summary>
    public void OverflowToGlobal(in WorkItemEntry entry) => _local.OverflowToGlobal(entry, Scheduler);

    /// <summary>Owner only: takes a batch from the global queue into its ring (see <see cref="WorkerLocalQueue.TryTakeGlobalBatch"/>).</summary>
    public bool TryTakeGlobalBatch(out WorkItemEntry item)
    {
        if (!_local.TryTakeGlobalBatch(Scheduler, out item, out bool full))
        {
            return false;
        }
        if (_requests.LookOutside)
        {
            // Outside work reached this worker by another path (its search, or its own queues running dry): the
            // request is met. Kept, it would send the next dispatch outside again, ahead of the worker's local items.
            _requests.LookOutside = false;
        }
        if (full)
        {
            // A full batch: the global queue may hold more, and others can steal the rest of this batch. A partial
            // batch emptied the queue, so this worker alone can run what it took.
            _services.Idle.WakeWorkerIfNeeded();
        }
        return true;
    }
}
