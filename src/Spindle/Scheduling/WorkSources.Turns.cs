using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's turn at a lane (its own stack): what the turn's order needs to remember between items.</summary>
internal struct LaneTurn
{
    /// <summary>Items of the lane the worker ran in this turn.</summary>
    public int Ran;

    /// <summary>Items the turn may still take without looking for a gap (see <see cref="Lane.TryTakeNextInTurn(ref int, out WorkItemEntry)"/>).</summary>
    public int Unwatched;

    /// <summary>When something else first wanted this worker during the turn (<see cref="LaneClock"/> time), 0: not yet.</summary>
    public long WantedSince;
}

// The order of a lane turn: whether a worker that holds a lane's slot keeps it for the lane's next item.
internal sealed partial class WorkSources
{
    /// <summary>Spins of a lane turn that found the lane's queue empty before it gives the slot back.</summary>
    private const int LaneTurnSpins = 32;

    /// <summary>
    /// A lane turn's order, after each item: the turn ends when fired timers wait or the lane set says another lane
    /// competes for this worker (<see cref="LaneSet.IsAloneInTurn"/>), or once lower classes have had work waiting (their
    /// minimum share), or this worker has been surplus, for <see cref="LaneClock.TurnYield"/>; otherwise it takes the
    /// lane's next item, waiting a few microseconds for one (<see cref="WaitBrieflyInTurn"/>). Checked after every item,
    /// so a turn of long items ends after the first item that ends a millisecond later; the clock is read only while
    /// something else wants the worker.
    /// </summary>
    public bool TakeNextInTurn(Worker self, Lane lane, ref LaneTurn turn, out WorkItemEntry item)
    {
        if (Urgent.MayBeWaiting || !Lanes.IsAloneInTurn(lane, new LaneTaker(self)))
        {
            item = default;
            return false;
        }
        if (_roster.IsAboveTarget || Lanes.IsLowerWorkWaiting(lane, new LaneTaker(self)))
        {
            long now = LaneClock.Now;
            if (turn.WantedSince == 0)
            {
                turn.WantedSince = now;
            }
            else if (now - turn.WantedSince >= LaneClock.TurnYield)
            {
                item = default;
                return false;
            }
        }
        return lane.TryTakeNextInTurn(ref turn.Unwatched, out item) || WaitBrieflyInTurn(self, lane, out item);
    }

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
    private bool WaitBrieflyInTurn(Worker self, Lane lane, out WorkItemEntry item)
    {
        for (int i = 0; i < LaneTurnSpins; i++)
        {
            Thread.SpinWait(16);
            if (lane.TryTakeNextInTurn(out item))
            {
                return true;
            }
            if (Urgent.MayBeWaiting || !Lanes.IsAloneInTurn(lane, new LaneTaker(self)))
            {
                break;
            }
        }
        item = default;
        return false;
    }
}
