using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's turn at a lane: the lane's items run back to back while nothing else competes for the worker.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Runs (or, when the lane or the pool cancels its queued work, cancels) an item taken from <paramref name="lane"/>,
    /// and then, keeping the lane's slot, the lane's next items while nothing else competes for this worker (a turn:
    /// see <see cref="Lane"/>); then gives the slot back, whatever happened.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void RunLaneItem(Lane lane, ref WorkItemEntry item, ref PoolThreadState threadState)
    {
        int ran = 0;
        int unwatched = 0; // items the turn may still take without looking for a gap (see Lane.TryTakeNextInTurn)
        try
        {
            long wantedSince = 0;
            while (true)
            {
                if (lane.IsCancelling && !_services.Runner.MustRunDespiteCancel(item, lane, byPool: Scheduler.IsCancelling))
                {
                    item = default;
                }
                else
                {
                    RunItem(ref item, ref threadState);
                    ran++;

                    // Lane items are timed on their own interval (see TimeLaneItems), so a worker whose lane items are
                    // long enters the relief's count of long-item workers; the pool queue's looks keep theirs.
                    if (_pacing.Looks.CountLaneItem())
                    {
                        TimeLaneItems();
                    }
                }
                if (_services.Urgent.MayBeWaiting || !_services.Lanes.IsAloneInTurn(lane, new LaneTaker(this)))
                {
                    break;
                }
                // The duties of the dispatch loop: the timer deadline every few items, and the end of the turn once
                // lower classes have had work waiting (their minimum share), or this worker has been surplus, for a
                // millisecond. Checked after every item, so a turn of long items ends after the first item that ends
                // a millisecond later; the clock is read only while something else wants this worker.
                if ((ran & (LaneTurnCheckInterval - 1)) == 0 && (_pacing.Timers.Countdown -= LaneTurnCheckInterval) <= 0)
                {
                    CheckTimers();
                }
                if (_services.Roster.IsAboveTarget || _services.Lanes.IsLowerWorkWaiting(lane, new LaneTaker(this)))
                {
                    long now = LaneClock.Now;
                    if (wantedSince == 0)
                    {
                        wantedSince = now;
                    }
                    else if (now - wantedSince >= LaneClock.TurnYield)
                    {
                        break;
                    }
                }
                if (!lane.TryTakeNextInTurn(ref unwatched, out item) && !WaitBrieflyInTurn(lane, out item))
                {
                    break;
                }
            }
        }
        finally
        {
            _scope.Lane = null;
            if (lane.OnTurnDone(ran))
            {
                _services.Lanes.OnSlotFreedWithWork();
            }
        }
    }

    /// <summary>Spins of a lane turn that found the lane's queue empty before it gives the slot back.</summary>
    private const int LaneTurnSpins = 32;

    /// <summary>
    /// A turn found the lane's queue empty: keeps the slot for a few microseconds in case the producer is about to queue
    /// the next item (a strand fed from another thread usually is), as long as nothing else competes for this worker.
    /// Giving the slot back at once would make the producer's next enqueue mark the lane ready and wake a worker.
    /// </summary>
    /// <remarks>
    /// It polls by trying to dequeue, which reads the head's slot and never the queue's tail, so the waiting worker does
    /// not pull the line every enqueue writes away from the producer.
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool WaitBrieflyInTurn(Lane lane, out WorkItemEntry item)
    {
        for (int i = 0; i < LaneTurnSpins; i++)
        {
            Thread.SpinWait(16);
            if (lane.TryTakeNextInTurn(out item))
            {
                return true;
            }
            if (_services.Urgent.MayBeWaiting || !_services.Lanes.IsAloneInTurn(lane, new LaneTaker(this)))
            {
                break;
            }
        }
        item = default;
        return false;
    }
}
