using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's looks outside its own queues: timed intervals, the aged bottom of its ring, stranded peers, long items.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, about every <see cref="LookPacer.FairnessLookTicks"/> of work (at most every <see cref="LookPacer.FairnessInterval"/>
    /// items, or at once when the stall monitor asks, see <see cref="RequestLookOutside"/>): the far end of the LIFO
    /// ring once it has aged, then outside work, so neither the ring's oldest items nor the global queue can be starved
    /// by a worker that keeps re-queueing to itself. Sets the number of items until the next look.
    /// </summary>
    /// <remarks>
    /// <para>The interval is timed, not counted, so the wait of outside work is bounded in time whatever the local items'
    /// length: one clock read per look, and the next interval is the number of items that took about
    /// <see cref="LookPacer.FairnessLookTicks"/> in the last one (it shrinks at once, and grows at most fourfold per look, so
    /// items that turn long are noticed soon). Items of 20 µs get a look every 5 items, items of 1 ms after each item,
    /// trivial items every <see cref="LookPacer.FairnessInterval"/>.</para>
    /// <para>While the LIFO slot holds this worker's next item, or its ring holds items, the look takes one outside item,
    /// not a batch. A batch's rest would go into the ring, which the owner reaches only when the slot is empty, and a
    /// chain that re-queues itself through the slot never leaves it empty, so those items would wait for the ageing rule
    /// below, one per <see cref="LookPacer.OldestLocalAgeMs"/>, while the rest of the outside queue grew behind them. And a batch
    /// pushed onto a ring that still holds the previous batch's rest is popped first (the owner pops the newest), so
    /// under a steady inflow from outside (socket completions) the older items sank to the ring's far end and waited
    /// there for as long as the inflow lasted: round trips of 20-100 ms among 1-2 ms ones. Left in the global queue,
    /// they go to whichever worker looks next, in queue order.</para>
    /// <para>The ring's bottom is taken only once nobody has taken from it (its top index has not moved) for
    /// <see cref="LookPacer.OldestLocalAgeMs"/>, so a self-requeue loop cannot starve it; it comes before outside work, which under
    /// a steady inflow is never missing, so checked after it the aged item waited for the inflow to stop. Not on every
    /// look: taking the oldest item of a tree-shaped workload (tasks spawning tasks) opens a whole new subtree, and done
    /// every 61 items it made skynet's live frontier breadth-first, turning its gen0 collections into gen2 ones.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool LookOutside(out WorkItemEntry item)
    {
        bool requested = _requests.LookOutside;
        if (_pacing.Looks.MayYieldToLocalWork(requested) && !HasNoLocalWork)
        {
            // The previous dispatch was a look that took an outside item, and local work waits: this dispatch is the
            // local work's turn (see LookPacer.YieldToLocalWork).
            _pacing.Looks.YieldToLocalWork();
            item = default;
            return false;
        }
        if (requested)
        {
            _requests.LookOutside = false; // before the look: a request made after it is kept for the next dispatch
        }
        if (_pacing.Looks.Look(Stopwatch.GetTimestamp(), out bool counted))
        {
            Scheduler.Relief.NoteLongItems(counted);
        }
        // A look the monitor asked for serves a stranded worker's work first: it has waited longest (StrandedAfterMs
        // and more), and under a steady inflow from outside it would never be reached after the global queue.
        if (requested && TryStealFromStranded(out item))
        {
            return true;
        }
        if (_local.TakeAgedBottom(out item))
        {
            return true;
        }
        if (!HasNoLocalWork)
        {
            if (_local.TryTakeOneGlobal(Scheduler, out item))
            {
                _pacing.Looks.TookOutside();
                return true;
            }
        }
        else if (TryTakeGlobalBatch(out item))
        {
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>
    /// Owner only: times a lane's items, on an interval of their own fitted like the looks' (about one clock read per
    /// <see cref="LookPacer.FairnessLookTicks"/> of lane items, at most one per <see cref="LookPacer.FairnessInterval"/> items), and enters or
    /// leaves the relief's count of long-item workers by it. A worker in a turn of a lane's long items never reaches a
    /// look of the pool's queue, so without this it would never count as being in long items, and an item queued to a
    /// lane from outside would wait for its item to end while the relief slept. The pool queue's looks are not moved.
    /// </summary>
    private void TimeLaneItems()
    {
        if (_pacing.Looks.TimeLaneItems(Stopwatch.GetTimestamp(), out bool counted))
        {
            Scheduler.Relief.NoteLongItems(counted);
        }
    }

    /// <summary>
    /// A look the stall monitor asked for: takes one item another worker queued to itself before it blocked or began a
    /// long item (see <see cref="IsStranded"/>): its LIFO slot first (the item it queued last, typically the one it waits
    /// for), else the oldest of its ring. One item, run now: this worker is busy with work of its own, and more items
    /// pushed into its ring would wait there behind its own chain; the monitor asks again at its next tick while the
    /// victim stays stranded.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TryStealFromStranded(out WorkItemEntry item)
    {
        foreach (Worker victim in _services.Roster.Workers)
        {
            if (victim == this || !victim._requests.Stranded || victim.HasNoLocalWork || !victim.MayStealFrom())
            {
                continue;
            }
            if (victim.TryTakeLifoSlot(out item) || (!victim.Ring.IsEmpty && victim.Ring.TrySteal(out item)))
            {
                CountSteal();
                return true;
            }
        }
        item = default;
        return false;
    }

    /// <summary>Owner only: leaves the relief's count of workers in long items, if this worker is in it.</summary>
    private void LeaveLongItemCount()
    {
        if (_pacing.Looks.Leave())
        {
            Scheduler.Relief.NoteLongItems(false);
        }
    }
}
