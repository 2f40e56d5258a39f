using System.Diagnostics;
using System.Runtime.CompilerServices;
using Spindle.Lanes;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's turn at a lane: the lane's items run back to back while the turn's order lets them (see <see cref="WorkSources.TakeNextInTurn"/>).</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Runs (or, when the lane or the pool cancels its queued work, cancels) an item taken from <paramref name="lane"/>,
    /// and then, keeping the lane's slot, the lane's next items while the turn's order lets it (see
    /// <see cref="WorkSources.TakeNextInTurn"/>); then gives the slot back, whatever happened.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void RunLaneItem(Lane lane, ref WorkItemEntry item, ref PoolThreadState threadState)
    {
        var turn = new LaneTurn();
        try
        {
            do
            {
                if (_services.Runner.CancelsInstead(item, lane, Scheduler.IsCancelling))
                {
                    item = default;
                }
                else
                {
                    RunItem(ref item, ref threadState);
                    turn.Ran++;

                    // Lane items are timed on their own interval (see LookPacer.TimeLaneItems), so a worker whose lane
                    // items are long enters the relief's count of long-item workers; the pool queue's looks keep theirs.
                    if (_pacing.Looks.CountLaneItem())
                    {
                        _pacing.Looks.TimeLaneItems(Stopwatch.GetTimestamp(), Scheduler.Relief);
                    }
                }
                // The dispatch loop's duty that a turn keeps: the timer deadline every few items.
                if ((turn.Ran & (LaneTurnCheckInterval - 1)) == 0 && (_pacing.Timers.Countdown -= LaneTurnCheckInterval) <= 0)
                {
                    CheckTimers();
                }
            }
            while (_services.Sources.TakeNextInTurn(this, lane, ref turn, out item));
        }
        finally
        {
            _scope.Lane = null;
            if (lane.OnTurnDone(turn.Ran))
            {
                _services.Lanes.OnSlotFreedWithWork();
            }
        }
    }
}
