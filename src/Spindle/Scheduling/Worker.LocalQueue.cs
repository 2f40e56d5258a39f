using System.Runtime.CompilerServices;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's local queue as owner and as victim (see <see cref="WorkerLocalQueue"/>), and its takes from the global queue and stalled peers.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, with its own queues empty, before it takes from the global queue: counts the take down the watch of a
    /// peer, and at the watch's end takes half of the peer's ring if the peer has stalled with items in it (see
    /// <see cref="PeerWatch"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeFromWatchedPeer(out WorkItemEntry item)
    {
        if (_peerWatch.CountTake())
        {
            return EndPeerWatch(out item);
        }
        item = default;
        return false;
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

    /// <summary>Owner only: takes its ring's oldest item once it has aged (see <see cref="WorkerLocalQueue.TakeAgedBottom"/>).</summary>
    public bool TakeAgedBottom(out WorkItemEntry item) => _local.TakeAgedBottom(out item);

    /// <summary>Owner only, at a look while local work waits: one item of the global queue, no batch (noted by its look pacer).</summary>
    public bool TryTakeOneGlobal(out WorkItemEntry item)
    {
        if (_local.TryTakeOneGlobal(_services.Sources, out item))
        {
            _pacing.Looks.TookOutside();
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
        if (!_local.TryTakeGlobalBatch(_services.Sources, out item, out bool full))
        {
            return false;
        }
        // Outside work reached this worker by another path (its search, or its own queues running dry): a requested
        // look is met. Kept, it would send the next dispatch outside again, ahead of the worker's local items.
        Requests.ClearLookOutside();
        if (full)
        {
            // A full batch: the global queue may hold more, and others can steal the rest of this batch. A partial
            // batch emptied the queue, so this worker alone can run what it took.
            _services.Idle.WakeWorkerIfNeeded();
        }
        return true;
    }
}
