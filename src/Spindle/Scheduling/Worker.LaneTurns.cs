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
        int unwatched = 0; // items the turn may still take without looking for a gap (see TakeNextInTurn)
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
                if (Threads.IsAboveTarget || _services.Lanes.IsLowerWorkWaiting(lane, new LaneTaker(this)))
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
                if (!TakeNextInTurn(lane, ref unwatched, out item) && !WaitBrieflyInTurn(lane, out item))
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

    /// <summary>
    /// How many items past the head a turn wants published before it takes the next item at its producer's heels, and
    /// how many it then takes without looking again (see <see cref="TakeNextInTurn"/>). Two items share a cache line of
    /// the lane's queue, so eight are four lines.
    /// </summary>
    private const int LaneTurnGap = 8;

    /// <summary>Most waits of <c>Thread.SpinWait(8)</c> (about 0.3 µs each on the 2-core VM) a turn spends for a gap.</summary>
    private const int LaneTurnGapWaits = 8;

    /// <summary>
    /// Takes the lane's next item in a turn, keeping a small distance from a producer that is queueing right now.
    /// </summary>
    /// <remarks>
    /// <para>A turn that runs short items catches up with a producer that feeds the lane from another thread: it then
    /// takes each item just after it was published. Each take reads the slot's cache line and frees the slot, and the
    /// producer's next write into the same line has to fetch it back, so the two threads pass one line back and forth
    /// for every item or two. So when the next
    /// item is there but the item <see cref="LaneTurnGap"/> positions further is not yet, the turn waits a moment (at
    /// most <see cref="LaneTurnGapWaits"/> short spins, about 2.5 µs here) for the producer to get that far ahead, and
    /// then takes the next <see cref="LaneTurnGap"/> items without looking again, whether the gap came or not: lines
    /// the producer has finished with (as it does, without waiting, when the gap is already there). It stops waiting after the first spin in which no new item was published (a
    /// burst of a few items, not a producer at work). The looks read slots near the head (never the queue's tail), and
    /// spinning touches nothing shared.</para>
    /// <para>The cost: an item that waits behind fewer than <see cref="LaneTurnGap"/> others in a running turn may start
    /// up to one spin (about 0.3 µs here) later when nothing more is being queued, and up to about 2.5 µs later while a
    /// producer is, at most once per <see cref="LaneTurnGap"/> items. An empty queue is not waited on here (the turn's
    /// <see cref="WaitBrieflyInTurn"/> polls for a next item as before), so a lane fed item by item with pauses between
    /// them takes each as soon as it is seen, and the turn-ending checks still run after every item.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static bool TakeNextInTurn(Lane lane, ref int unwatched, out WorkItemEntry item)
    {
        if (unwatched > 0)
        {
            unwatched--;
        }
        else if (lane.IsPublishedAhead(0))
        {
            // With the gap already there (a backlog), the next items are lines the producer has finished with too:
            // one look per LaneTurnGap items, not one per item.
            if (!lane.IsPublishedAhead(LaneTurnGap))
            {
                lane.WaitForGap(LaneTurnGap, LaneTurnGapWaits);
            }
            unwatched = LaneTurnGap - 1;
        }
        return lane.TryTakeNextInTurn(out item);
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

/// <summary>
/// A worker as the lane set's dispatch sees it (see <see cref="ILaneTaker"/>): a struct, so that the set's generic
/// methods are compiled for it and call the worker directly.
/// </summary>
internal readonly struct LaneTaker(Worker worker) : ILaneTaker
{
    /// <inheritdoc/>
    public bool SeesNoPoolWork => worker.HasNoLocalWork && worker.Scheduler.GlobalQueueIsEmpty;

    /// <inheritdoc/>
    public bool TryTakeDefault(out WorkItemEntry item) => worker.TryTakeDefault(out item);

    /// <inheritdoc/>
    public void EnterLane(Lane lane) => worker.EnterLane(lane);
}
