using System;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Lanes;

// After the stop: a capped lane keeps its cap, and a serial lane its order, for whatever still arrives.
//
// A stopped lane gets no new work, but continuations of work it accepted still arrive (an await that resumes through
// the lane's SynchronizationContext or TaskScheduler, a long-running task's continuation), and the pool's stop may leave
// items in its queue that no worker ran (see Scheduler.SweepLeftovers). They no longer run as the lane's items on the
// pool's workers: after the lane's own stop they run as the pool's work, after the pool's stop on the built-in pool.
// Code that uses a serial lane as its lock (a strand, an actor's mailbox) must still see them one at a time and in
// order, so a capped lane does not hand them on one by one: it keeps them in its own queue and its own slots decide
// how many run at once, as before the stop.
//
// Protocol (no lost entry, no slot leak):
// - An entry arriving after the stop is published in the lane's queue (EnqueueAlways: a CAS, a full fence), and the
//   enqueuer then drives: while the queue holds something and a slot is free, take a slot, dequeue, and hand the entry
//   on wrapped in an AfterStopItem, which gives the slot back when the entry has run and drives again.
// - Whoever gives a slot back (an AfterStopItem, the sweep, a worker that met the stopped lane) decrements the slot
//   count (a full fence) and then reads the queue. So of an enqueuer that found every slot taken and a holder that gave
//   one back, at least one sees the other, and the entry is driven.
// - The slots also keep the stop's own leftovers in line: the sweep takes them with a slot (TryTakeLeftover), so a
//   continuation arriving during the sweep waits behind the leftover that runs.
// - The queue is FIFO and an entry starts only after it is dequeued with a slot, so with a cap of 1 the entries run one
//   at a time in the order they were queued, each after the previous one has returned.
// - The stop's report (Stopped) waits for the leftovers: every lane's leftover holds a slot (an uncapped lane's too)
//   until it has run, wherever it runs, and whoever gives a slot back after the stop, or finds the queue empty, looks
//   whether the lane is now idle (StopIfDue). A drive ends with that look.
internal sealed partial class Lane
{
    /// <summary>
    /// An entry that must run, for a lane that has stopped: through the lane's queue and slots if it has a cap, else to
    /// the pool's queue (the built-in pool after the pool's stop).
    /// </summary>
    private void HandOnStopped(in WorkItemEntry entry)
    {
        if (Cap != int.MaxValue)
        {
            EnqueueAfterStop(entry);
            return;
        }
        _host.EnqueueContinuation(entry, preferLocal: false);
    }

    /// <summary>An entry for a lane that has stopped and has a cap: queued behind what is there, and driven through the slots.</summary>
    private void EnqueueAfterStop(in WorkItemEntry entry)
    {
        Debug.Assert(_stopped && Cap != int.MaxValue);
        _queue.EnqueueAlways(entry);
        DriveAfterStop();
    }

    [ThreadStatic]
    private static Lane? t_afterStopLane;

    /// <summary>
    /// The lane whose entry the calling thread is running off the workers, with one of its slots: on the lane's
    /// after-stop path, or as a leftover the pool's shutdown runs (<see cref="RunLeftoverHere"/>); null otherwise. What
    /// the lane's task bridge asks before it runs work of the lane inline, and the lane's shutdown before it waits.
    /// </summary>
    public static Lane? AfterStopLaneOfCurrentThread => t_afterStopLane;

    /// <summary>Whether this lane belongs to the pool whose lane host is <paramref name="host"/>.</summary>
    public bool IsHostedBy(ILaneHost host) => _host == host;

    /// <summary>A slot taken after the stop that is not needed: gives it back, then drives (see the protocol).</summary>
    private void GiveBackAfterStopSlot()
    {
        Interlocked.Decrement(ref _running.Value);
        DriveAfterStop();
    }

    /// <summary>Hands on queued entries of the stopped lane while a slot is free (each holds its slot until it has run).</summary>
    private void DriveAfterStop()
    {
        // The tasks of the Run items it drops complete after the loop, with no slot held (see CancelCompletions).
        using CancelCompletions.Scope completions = CancelCompletions.Defer();
        var spinner = new SpinWait();
        while (!_queue.IsEmpty && TryAcquireSlot())
        {
            WorkItemEntry entry = default;
            if (_queue.TryDequeueBatch(MemoryMarshal.CreateSpan(ref entry, 1)) == 0)
            {
                // Another driver took it, or an enqueuer has claimed a position and not yet written it: give the slot
                // back and look again (the enqueuer drives after it writes, but may have found this slot taken).
                Interlocked.Decrement(ref _running.Value);
                spinner.SpinOnce(sleep1Threshold: -1);
                continue;
            }
            OnDequeued();
            if (IsDroppedByCancel(entry))
            {
                Interlocked.Decrement(ref _running.Value);
                continue;
            }
            HandOnAfterStop(entry);
        }
        // Every slot given back after the stop ends here: this may have been the lane's last work.
        StopIfDue();
    }

    /// <summary>
    /// A leftover of the pool's stop taken with a slot (<see cref="TryTakeLeftover"/>) by a thread that does not run it
    /// itself: hands it on with its slot, like an after-stop entry, so that the lane's stop waits until it has run.
    /// </summary>
    public void RunLeftoverElsewhere(in WorkItemEntry entry) => HandOnAfterStop(entry);

    /// <summary>Queues <paramref name="entry"/>, which holds a slot, as the pool's continuation: on the pool while it runs or drains, elsewhere after its stop.</summary>
    private void HandOnAfterStop(in WorkItemEntry entry) =>
        _host.EnqueueContinuation(new WorkItemEntry(new AfterStopItem(this, entry), WorkItemEntry.WorkItemMarker, entry.Context), preferLocal: false);

    /// <summary>An after-stop entry has run (<paramref name="ran"/>) or was dropped by a cancelling shutdown: gives its slot back and drives.</summary>
    private void OnAfterStopItemDone(bool ran)
    {
        if (ran)
        {
            Interlocked.Increment(ref _completed);
        }
        GiveBackAfterStopSlot();
    }

    /// <summary>
    /// An entry of a stopped capped lane on its way to wherever it runs, holding one of the lane's slots. It carries the
    /// entry's ExecutionContext in its own queue entry, so the thread that runs it has set the context already; shutdown
    /// decides on it as on the entry it wraps.
    /// </summary>
    private sealed class AfterStopItem(Lane lane, WorkItemEntry entry) : IWorkItem, IShutdownAware, IEntryWrapper
    {
        private readonly WorkItemEntry _entry = entry;

        WorkItemEntry IEntryWrapper.WrappedEntry => _entry;

        object? IShutdownAware.QueuedCallback => null;

        ShutdownOutcome IShutdownAware.OnCancelPending()
        {
            ShutdownOutcome outcome = _entry.FindShutdownOwner()?.OnCancelPending() ?? ShutdownOutcome.Cancelled;
            if (outcome != ShutdownOutcome.Run)
            {
                if (outcome == ShutdownOutcome.Cancelled)
                {
                    lane.CountCancelled();
                }
                lane.OnAfterStopItemDone(ran: false);
            }
            return outcome;
        }

        public void Execute()
        {
            // While the entry runs, the thread holds one of the lane's slots: a Send to the lane's context or a wait on a
            // task of the lane's scheduler runs inline here (TaskBridge.IsOwnThread), as from an item of the running lane,
            // instead of queueing behind the slot this very entry holds. The entry still runs as the pool's work
            // (WorkerPoolLane.Current is null).
            Lane? outer = t_afterStopLane;
            t_afterStopLane = lane;
            try
            {
                _entry.Invoke();
            }
            finally
            {
                t_afterStopLane = outer;
                lane.OnAfterStopItemDone(ran: true);
            }
        }
    }
}
