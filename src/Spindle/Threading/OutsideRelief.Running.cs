using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Threading;

/// <summary>What the relief thread runs: the next outside item or lane item, published for the stuck-item detector.</summary>
internal sealed partial class OutsideRelief
{
    /// <summary>
    /// Takes the next item (<see cref="WorkSources.TakeForRelief"/>) and runs it under a drain hold. Returns false when there was none
    /// or the pool is shutting down (the workers drain the queues then); <paramref name="mark"/> is the takers' progress
    /// right after the take, so that the caller can tell whether a worker took queued work while the item ran.
    /// </summary>
    private bool RunNext(ref PoolThreadState threadState, out Progress mark)
    {
        mark = default;
        // The hold first, then the state: a shutdown either is seen here or sees the hold and waits for the item.
        _threads.AcquireDrainHold();
        try
        {
            // The thread count is checked before every take, not only at arming: the pool may have reached its maximum
            // since (starvation injection), and this thread counts against it.
            if (_scheduler.IsShutdownStarted || _threads.ThreadCount >= _threads.MaxThreads)
            {
                return false;
            }
            // The relief's order (see WorkSources.TakeForRelief): High lanes, the oldest outside item, other lanes.
            if (!_scheduler.Sources.TakeForRelief(_one, out WorkItemEntry item, out Lane? lane))
            {
                return false;
            }
            mark = ReadProgress();
            if (lane is not null)
            {
                RunLaneItem(lane, ref item, ref threadState);
                return true;
            }
            if (_runner.CancelsInstead(item, lane: null, _scheduler.IsCancelling))
            {
                return true; // shutdown with CancelPending began between the check and the take: cancelled and counted, as a worker does
            }
            RunPublished(ref item, ref threadState, lane: null);
            return true;
        }
        finally
        {
            _threads.ReleaseDrainHold();
        }
    }

    /// <summary>
    /// Runs (or, when the lane or the pool cancels its queued work, cancels) an item taken from <paramref name="lane"/>
    /// with one of its slots, and gives the slot back, as a worker's turn of one item does.
    /// </summary>
    private void RunLaneItem(Lane lane, ref WorkItemEntry item, ref PoolThreadState threadState)
    {
        int ran = 0;
        // The lane first (read through Lane.OfCurrentThread by the item, and by a cancelled item's owner), then the
        // callback and the started count (RunPublished).
        Volatile.Write(ref _runningLane, lane);
        try
        {
            if (_runner.CancelsInstead(item, lane, _scheduler.IsCancelling))
            {
                item = default;
            }
            else
            {
                RunPublished(ref item, ref threadState, lane);
                ran = 1;
            }
        }
        finally
        {
            Volatile.Write(ref _runningLane, null);
            if (lane.OnTurnDone(ran))
            {
                _scheduler.Lanes.OnSlotFreedWithWork();
            }
        }
    }

    /// <summary>Runs an item, published for the stuck-item detector (see the remarks); timed as <paramref name="lane"/>'s.</summary>
    private void RunPublished(ref WorkItemEntry item, ref PoolThreadState threadState, Lane? lane)
    {
        _runner.Run(_record, ref _timing, ref item, ref threadState, lane); // published as on a worker, every item timed
        // The relief thread keeps no item alive between items: it is idle more often than not.
        _record.ExitOwner();
        _record.DropCallback();
    }
}
