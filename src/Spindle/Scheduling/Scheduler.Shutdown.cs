using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.ExceptionServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Queues;

namespace Spindle.Scheduling;

// Shutdown's side of the scheduler: the cancel sweep of CancelPending and the leftovers no worker ran (swept by the
// last thread out, or handed to the built-in pool after the stop).
internal sealed partial class Scheduler
{
    /// <summary>
    /// Shutdown with <see cref="ShutdownMode.CancelPending"/> has begun: cancels, now, every queued entry this thread can
    /// reach (<see cref="WorkSources.CancelQueued"/>), instead of leaving each to be cancelled when a worker gets to it
    /// (which a worker blocked in a long item may not do for a long time), and queues the entries that must run anyway
    /// (continuations, firings) again.
    /// </summary>
    public void CancelQueuedNow()
    {
        Debug.Assert(IsCancelling);
        if (Sources.CancelQueued(_runner) is { } mustRun)
        {
            foreach (WorkItemEntry entry in mustRun)
            {
                EnqueueContinuation(entry, preferLocal: false);
            }
        }
    }

    /// <summary>After the stop, by a thread that is not the pool's: every leftover runs on the built-in ThreadPool.</summary>
    public void RedirectLeftovers()
    {
        Span<WorkItemEntry> batch = new WorkItemEntry[WorkerLocalQueue.GlobalBatchSize];
        while (true)
        {
            int taken = Sources.TakeLeftovers(batch, out WorkItemEntry laneItem, out Lane? lane);
            if (taken == 0)
            {
                if (lane is not null)
                {
                    // After the stop a lane's leftovers run as the pool's do, each holding one of the lane's slots until
                    // it has run (the lane's cap holds, and its stop waits for them); the lane has already dropped those
                    // a cancelling shutdown cancels.
                    lane.RunLeftoverElsewhere(laneItem);
                    continue;
                }
                return;
            }
            for (int i = 0; i < taken; i++)
            {
                if (!_runner.CancelsInstead(batch[i], lane: null, IsCancelling))
                {
                    _runner.RunElsewhere(batch[i]);
                }
                batch[i] = default;
            }
        }
    }

    /// <summary>
    /// Runs or cancels what is left after every worker has exited. Items are only left when the pool never managed to
    /// start a worker for them (thread creation failing up to shutdown, or a first enqueue racing the shutdown), or when
    /// a continuation arrived between the last worker's decision to exit and the stop; accepted work must still run
    /// exactly once, so the calling thread (the disposing thread, or the last worker on its way out) runs them itself.
    /// </summary>
    /// <remarks>
    /// The loop runs until the queue is empty counting claimed positions, not just until a batch comes back empty: a
    /// producer that claimed its slot before the close may still be publishing it. The queue is closed, so every later
    /// claim is published empty and the loop ends. Under <see cref="UnhandledExceptionPolicy.FailProcess"/> the first
    /// unhandled exception is rethrown once every leftover has been dealt with.
    /// </remarks>
    public void SweepLeftovers()
    {
        List<Scheduler> sweeping = t_sweeping ??= [];
        sweeping.Add(this);
        try
        {
            SweepLeftoversHere();
        }
        finally
        {
            Debug.Assert(sweeping[^1] == this, "Sweeps on one thread nest.");
            sweeping.RemoveAt(sweeping.Count - 1);
        }
    }

    /// <summary>
    /// Whether the calling thread runs an entry of this pool off its workers, further down its stack: inside
    /// <see cref="SweepLeftovers"/> of this scheduler (running one of its leftovers, or about to), or running an entry of
    /// one of its stopped lanes with one of the lane's slots (on the lane's after-stop path, on the built-in pool). A
    /// shutdown call made there is the pool's own item's call: it must not wait for a sweep of the same pool, which may
    /// be waiting for this very entry (the sweep that runs it, or one that waits for the lane's slot it holds).
    /// </summary>
    public bool RunsOwnEntryOffWorkersOnThisThread =>
        (t_sweeping?.Contains(this) ?? false) || (Lane.AfterStopLaneOfCurrentThread?.IsHostedBy(this) ?? false);

    // The schedulers whose SweepLeftovers runs on this thread, outermost first: a leftover of one pool may shut another
    // pool down, whose sweep then runs on top of the first.
    [ThreadStatic]
    private static List<Scheduler>? t_sweeping;

    private void SweepLeftoversHere()
    {
        Span<WorkItemEntry> batch = new WorkItemEntry[WorkerLocalQueue.GlobalBatchSize];
        ExceptionDispatchInfo? firstUnhandled = null;
        var spinner = new SpinWait();
        while (Sources.HasLeftovers)
        {
            int taken = Sources.TakeLeftovers(batch, out WorkItemEntry laneItem, out Lane? lane);
            if (taken == 0)
            {
                if (lane is not null)
                {
                    // The leftover holds one of the lane's slots until it has run: the lane's stop waits for it.
                    bool handled;
                    Exception? thrown;
                    using (lane.RunLeftoverHere())
                    {
                        handled = _runner.RunOnForeignThread(laneItem, out thrown, countCompleted: true);
                    }
                    if (!handled && firstUnhandled is null)
                    {
                        firstUnhandled = ExceptionDispatchInfo.Capture(thrown!);
                    }
                    continue;
                }
                if (Lane.AfterStopLaneOfCurrentThread is not null)
                {
                    // This thread is running a lane's entry with one of its slots (a leftover of an outer sweep, or the
                    // lane's after-stop drive), and that entry shut the pool down again. What is left may be held back
                    // by that very slot, which frees only when the entry returns: waiting here would wait for itself.
                    // The outer sweep or drive takes the rest once the entry has returned.
                    break;
                }
                spinner.SpinOnce();
                continue;
            }
            for (int i = 0; i < taken; i++)
            {
                if (!_runner.CancelsInstead(batch[i], lane: null, IsCancelling)
                    && !_runner.RunOnForeignThread(batch[i], out Exception? unhandled, countCompleted: true)
                    && firstUnhandled is null)
                {
                    firstUnhandled = ExceptionDispatchInfo.Capture(unhandled!);
                }
                batch[i] = default;
            }
        }
        firstUnhandled?.Throw();
    }
}
