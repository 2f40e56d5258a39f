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
    /// Takes the next item (<see cref="TryTakeNext"/>) and runs it under a drain hold. Returns false when there was none
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
            if (!TryTakeNext(out WorkItemEntry item, out Lane? lane))
            {
                return false;
            }
            mark = ReadProgress();
            if (lane is not null)
            {
                RunLaneItem(lane, ref item, ref threadState);
                return true;
            }
            if (_scheduler.IsCancelling && !_runner.MustRunDespiteCancel(item))
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
    /// The next item this thread may take (see the remarks): a High lane's, then the oldest of the pool's queue, then a
    /// Normal or Low lane's; <paramref name="lane"/> is the lane it came from (null for the pool's queue), whose slot it
    /// holds.
    /// </summary>
    private bool TryTakeNext(out WorkItemEntry item, out Lane? lane)
    {
        LaneSet lanes = _scheduler.Lanes;
        bool lanesReady = lanes.AnyReady;
        if (lanesReady && lanes.TryTakeForRelief(LaneSet.HighClass, LaneSet.HighClass, out item, out lane))
        {
            return true;
        }
        Span<WorkItemEntry> one = _one;
        if (_scheduler.TryDequeueGlobalBatch(one) != 0)
        {
            item = one[0];
            one[0] = default;
            lane = null;
            return true;
        }
        if (lanesReady)
        {
            return lanes.TryTakeForRelief(LaneSet.NormalClass, LaneSet.LowClass, out item, out lane);
        }
        item = default;
        lane = null;
        return false;
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
            if (lane.IsCancelling && !_runner.MustRunDespiteCancel(item, lane, byPool: _scheduler.IsCancelling))
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
        _record.Begin(item.Callback); // published for the stuck-item detector, as on a worker
        try
        {
            _runner.RunTimedOnPoolThread(ref item, lane);
        }
        finally
        {
            // The relief thread keeps no item alive between items: it is idle more often than not.
            _record.ExitOwner();
            _record.DropCallback();
            _record.End();
            threadState.Reset();
        }
    }
}
