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
    /// reach, instead of leaving each to be cancelled when a worker gets to it (which a worker blocked in a long item
    /// may not do for a long time). Takes the global queue's entries and, as a thief, every worker's ring and LIFO slot;
    /// asks each entry's owner (<see cref="ItemRunner.MustRunDespiteCancel(in WorkItemEntry)"/>, which counts what it cancels), and queues
    /// the entries that must run anyway (continuations, firings) again. Entries workers take meanwhile are decided by
    /// them, as always: each entry is taken by exactly one party.
    /// </summary>
    public void CancelQueuedNow()
    {
        Debug.Assert(IsCancelling);
        Span<WorkItemEntry> batch = new WorkItemEntry[WorkerLocalQueue.GlobalBatchSize];
        List<WorkItemEntry>? mustRun = null;
        int taken;
        while ((taken = _globalQueue.TryDequeueBatch(batch)) > 0)
        {
            for (int i = 0; i < taken; i++)
            {
                Decide(batch[i], ref mustRun);
                batch[i] = default;
            }
        }
        Lanes.CancelQueuedNow();
        foreach (Worker worker in _roster.Workers)
        {
            while (worker.Ring.TrySteal(out WorkItemEntry entry))
            {
                Decide(entry, ref mustRun);
            }
            if (worker.TryTakeLifoSlot(out WorkItemEntry next))
            {
                Decide(next, ref mustRun);
            }
        }
        if (mustRun is not null)
        {
            foreach (WorkItemEntry entry in mustRun)
            {
                EnqueueContinuation(entry, preferLocal: false);
            }
        }

        void Decide(in WorkItemEntry entry, ref List<WorkItemEntry>? keep)
        {
            if (_runner.MustRunDespiteCancel(entry))
            {
                (keep ??= []).Add(entry);
            }
        }
    }

    /// <summary>Whether anything is left in the queues that outlive the workers (fired timers, the global queue).</summary>
    public bool HasLeftovers => Urgent.MayBeWaiting || !_globalQueue.IsEmpty || Lanes.HasLeftovers;

    /// <summary>Takes a batch of what is left in the queues a worker would look at outside its own ring: fired timers first, then the global queue.</summary>
    private int TakeLeftovers(Span<WorkItemEntry> batch)
    {
        int taken = 0;
        while (taken < batch.Length && Urgent.TryTake(out batch[taken]))
        {
            taken++;
        }
        return taken != 0 ? taken : _globalQueue.TryDequeueBatch(batch);
    }

    /// <summary>After the stop, by a thread that is not the pool's: every leftover runs on the built-in ThreadPool.</summary>
    public void RedirectLeftovers()
    {
        Span<WorkItemEntry> batch = new WorkItemEntry[WorkerLocalQueue.GlobalBatchSize];
        while (true)
        {
            int taken = TakeLeftovers(batch);
            if (taken == 0)
            {
                if (Lanes.TryTakeLeftover(out WorkItemEntry laneItem, out Lane? lane))
                {
                    // After the stop a lane's leftovers run as the pool's do, through the lane's cap if it has one (the
                    // lane has already dropped those a cancelling shutdown cancels).
                    lane!.RunLeftoverElsewhere(laneItem);
                    continue;
                }
                return;
            }
            for (int i = 0; i < taken; i++)
            {
                if (!IsCancelling || _runner.MustRunDespiteCancel(batch[i]))
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
        Span<WorkItemEntry> batch = new WorkItemEntry[WorkerLocalQueue.GlobalBatchSize];
        ExceptionDispatchInfo? firstUnhandled = null;
        var spinner = new SpinWait();
        while (HasLeftovers)
        {
            int taken = TakeLeftovers(batch);
            if (taken == 0)
            {
                if (Lanes.TryTakeLeftover(out WorkItemEntry laneItem, out Lane? lane))
                {
                    bool handled = _runner.RunOnForeignThread(laneItem, out Exception? thrown, countCompleted: true);
                    lane!.OnLeftoverDone();
                    if (!handled && firstUnhandled is null)
                    {
                        firstUnhandled = ExceptionDispatchInfo.Capture(thrown!);
                    }
                    continue;
                }
                spinner.SpinOnce();
                continue;
            }
            for (int i = 0; i < taken; i++)
            {
                if ((!IsCancelling || _runner.MustRunDespiteCancel(batch[i]))
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
