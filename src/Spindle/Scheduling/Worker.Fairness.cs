using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Telemetry;
using Spindle.Queues;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle.Scheduling;

/// <summary>A worker's looks outside its own queues: timed intervals, the aged bottom of its ring, stranded peers, long items.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, about every <see cref="FairnessLookTicks"/> of work (at most every <see cref="FairnessInterval"/>
    /// items, or at once when the stall monitor asks, see <see cref="IsLookOutsideRequested"/>): the far end of the LIFO
    /// ring once it has aged, then outside work, so neither the ring's oldest items nor the global queue can be starved
    /// by a worker that keeps re-queueing to itself. Sets the number of items until the next look.
    /// </summary>
    /// <remarks>
    /// <para>The interval is timed, not counted, so the wait of outside work is bounded in time whatever the local items'
    /// length: one clock read per look, and the next interval is the number of items that took about
    /// <see cref="FairnessLookTicks"/> in the last one (it shrinks at once, and grows at most fourfold per look, so
    /// items that turn long are noticed soon). Items of 20 µs get a look every 5 items, items of 1 ms after each item,
    /// trivial items every <see cref="FairnessInterval"/>.</para>
    /// <para>While the LIFO slot holds this worker's next item, or its ring holds items, the look takes one outside item,
    /// not a batch. A batch's rest would go into the ring, which the owner reaches only when the slot is empty, and a
    /// chain that re-queues itself through the slot never leaves it empty, so those items would wait for the ageing rule
    /// below, one per <see cref="OldestLocalAgeMs"/>, while the rest of the outside queue grew behind them. And a batch
    /// pushed onto a ring that still holds the previous batch's rest is popped first (the owner pops the newest), so
    /// under a steady inflow from outside (socket completions) the older items sank to the ring's far end and waited
    /// there for as long as the inflow lasted: round trips of 20-100 ms among 1-2 ms ones. Left in the global queue,
    /// they go to whichever worker looks next, in queue order.</para>
    /// <para>The ring's bottom is taken only once nobody has taken from it (its top index has not moved) for
    /// <see cref="OldestLocalAgeMs"/>, so a self-requeue loop cannot starve it; it comes before outside work, which under
    /// a steady inflow is never missing, so checked after it the aged item waited for the inflow to stop. Not on every
    /// look: taking the oldest item of a tree-shaped workload (tasks spawning tasks) opens a whole new subtree, and done
    /// every 61 items it made skynet's live frontier breadth-first, turning its gen0 collections into gen2 ones.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool LookOutside(out WorkItemEntry item)
    {
        bool requested = _lookOutsideRequested;
        if (_lookTookOutside && _fairnessInterval == 1 && !requested && !HasNoLocalWork)
        {
            // The previous dispatch was a look (the interval is one item) that took an outside item, and local work
            // waits: this dispatch is the local work's turn. Items long enough to make every dispatch a look (a chain
            // that re-queues itself outside, as a mailbox that used its throughput does) would otherwise be taken ahead
            // of local work at every look, for as long as the chain lasted. Two items ran by the next look: its
            // interval's arithmetic counts them.
            _lookTookOutside = false;
            _fairnessInterval = 2;
            _fairnessCountdown = 1;
            item = default;
            return false;
        }
        _lookTookOutside = false;
        if (requested)
        {
            _lookOutsideRequested = false; // before the look: a request made after it is kept for the next dispatch
        }
        long now = Stopwatch.GetTimestamp();
        long elapsed = now - _lastFairnessLook;
        int interval = _fairnessInterval;
        bool longItems = false;
        if (_lastFairnessLook != 0 && elapsed > 0)
        {
            // The items run since the last look (fewer than the interval when the monitor asked for this look early).
            // After a park the first look only starts the clock (see Dispatch).
            // Lane items run since then count for the items' length (not for the interval, which counts dispatches
            // that reach the pool's queue): a worker that serves lanes reaches this look only now and then.
            long ran = Math.Max(1, interval - _fairnessCountdown);
            interval = NextLookInterval(elapsed, ran, ran + _laneItemsSinceLook, interval, out longItems);
        }
        _laneItemsSinceLook = 0;
        NoteItemLength(longItems);
        _fairnessInterval = interval;
        _fairnessCountdown = interval;
        _lastFairnessLook = now;
        // A look the monitor asked for serves a stranded worker's work first: it has waited longest (StrandedAfterMs
        // and more), and under a steady inflow from outside it would never be reached after the global queue.
        if (requested && TryStealFromStranded(out item))
        {
            return true;
        }
        if (TakeAgedBottom(out item))
        {
            return true;
        }
        if (Volatile.Read(ref LifoSlot.Value) is not null || !Ring.IsEmpty)
        {
            if (Scheduler.TryDequeueGlobalBatch(_batch.AsSpan(0, 1)) != 0)
            {
                item = _batch[0];
                _batch[0] = default;
                _lookTookOutside = true;
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
    /// The number of counted items until the next timing: as many as took about <see cref="FairnessLookTicks"/> in the
    /// last <paramref name="elapsed"/> ticks, in which <paramref name="ran"/> counted items ran (at most four times the
    /// previous <paramref name="interval"/>, at most <see cref="FairnessInterval"/>); <paramref name="longItems"/>: the
    /// <paramref name="itemsRun"/> items run in all took <see cref="s_longItemTicks"/> or more each.
    /// </summary>
    private static int NextLookInterval(long elapsed, long ran, long itemsRun, int interval, out bool longItems)
    {
        longItems = elapsed >= itemsRun * s_longItemTicks;
        return (int)Math.Clamp(ran * FairnessLookTicks / elapsed, 1, Math.Min(4L * interval, FairnessInterval));
    }

    /// <summary>
    /// Owner only: times a lane's items, on an interval of their own fitted like the looks' (about one clock read per
    /// <see cref="FairnessLookTicks"/> of lane items, at most one per <see cref="FairnessInterval"/> items), and enters or
    /// leaves the relief's count of long-item workers by it. A worker in a turn of a lane's long items never reaches a
    /// look of the pool's queue, so without this it would never count as being in long items, and an item queued to a
    /// lane from outside would wait for its item to end while the relief slept. The pool queue's looks are not moved.
    /// </summary>
    private void TimeLaneItems()
    {
        long now = Stopwatch.GetTimestamp();
        long elapsed = now - _lastLaneTiming;
        int interval = _laneTimingInterval;
        if (_lastLaneTiming != 0 && elapsed > 0)
        {
            // After a park the first timing only starts the clock (see Dispatch), and says nothing of the items.
            long ran = Math.Max(1, interval - _laneTimingCountdown);
            interval = NextLookInterval(elapsed, ran, ran, interval, out bool longItems);
            NoteItemLength(longItems);
        }
        _laneTimingInterval = interval;
        _laneTimingCountdown = interval;
        _lastLaneTiming = now;
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
        foreach (Worker victim in Threads.Workers)
        {
            if (victim == this || !victim._stranded || victim.HasNoLocalWork || !victim.MayStealFrom())
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

    /// <summary>Owner only: takes the ring's oldest item if it has waited at the bottom for <see cref="OldestLocalAgeMs"/>.</summary>
    private bool TakeAgedBottom(out WorkItemEntry item)
    {
        long top = Ring.Top;
        long now = Environment.TickCount64;
        if (Ring.IsEmpty)
        {
            // No bottom to age. -1 is an index the ring never has, so the first look that finds items starts their
            // clock: keeping the empty ring's top here made items pushed later look as old as this look.
            _bottomTop = -1;
        }
        else if (top != _bottomTop)
        {
            _bottomTop = top;
            _bottomSince = now;
        }
        else if (now - _bottomSince >= OldestLocalAgeMs && Ring.TrySteal(out item))
        {
            _bottomTop = Ring.Top;
            _bottomSince = now;
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>
    /// How long (in Stopwatch ticks) one item must take, at two looks running, before this worker counts as being in
    /// long items for the relief thread: 200 µs, twice a look's target. Shorter items are looked past after each item
    /// anyway, so outside work waits for them no longer than about that; and a single long spell is more often this
    /// thread being descheduled than a long item.
    /// </summary>
    private static readonly long s_longItemTicks = FairnessLookTicks * 2;

    /// <summary>
    /// Owner only, at each look: enters or leaves the relief's count of workers in long items (see
    /// <see cref="OutsideRelief"/>) once two looks running found items of <see cref="s_longItemTicks"/> or more (a look
    /// that only starts the clock finds none). Only transitions touch the shared count, so short items cost nothing more.
    /// </summary>
    private void NoteItemLength(bool longItems)
    {
        bool counted = longItems && _longLookStreak;
        _longLookStreak = longItems;
        if (counted != _countedLongItems)
        {
            _countedLongItems = counted;
            Scheduler.Relief.NoteLongItems(counted);
        }
    }

    /// <summary>Owner only: leaves the relief's count of workers in long items, if this worker is in it.</summary>
    private void LeaveLongItemCount()
    {
        if (_countedLongItems)
        {
            _countedLongItems = false;
            Scheduler.Relief.NoteLongItems(false);
        }
    }
}
