using System;
using System.Diagnostics;
using System.Threading;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Runtime.ExceptionServices;
using System.Threading.Tasks;
using Spindle.Queues;

namespace Spindle;

// Shutdown. Protocol:
// - The first call moves _state from running to draining or cancelling (a cancelling call may also upgrade a draining
//   pool) and closes the global queue. From then on every enqueue throws ObjectDisposedException: a global enqueue
//   either claimed its slot before the close (and is drained) or sees the close (and is rejected), see GlobalQueue; a
//   local enqueue checks _state, and if it raced the change its item sits in the ring of a live worker that drains it.
// - Parked workers are woken. A worker exits when the pool is shutting down and it can see no work in any queue; a
//   worker still running an item drains its own ring before it can get there.
// - In cancelling mode a worker that dequeues an item counts it in _cancelledCount instead of running it.
// - The caller then joins every worker (except itself, when Dispose is called from inside a work item) and finally
//   sweeps the queues itself, which only finds anything if no worker could be started.
public sealed partial class WorkerPool
{
    private long _cancelledCount;

    /// <summary>
    /// Stops accepting work, runs every item already accepted, and waits for the workers to exit. Idempotent. Called
    /// from one of this pool's own work items it does not wait for the workers (which would deadlock): it returns at
    /// once and the workers finish the accepted items and exit on their own.
    /// </summary>
    public void Dispose() => Shutdown(ShutdownMode.Drain);

    /// <summary>
    /// Like <see cref="Dispose"/>, but waits for the workers without blocking the calling thread.
    /// </summary>
    public ValueTask DisposeAsync()
    {
        if (t_currentWorker?.Pool == this || t_dedicatedPool == this)
        {
            Dispose();
            return ValueTask.CompletedTask;
        }
        BeginShutdown(ShutdownMode.Drain);
        return new ValueTask(Task.Factory.StartNew(
            static state => ((WorkerPool)state!).Shutdown(ShutdownMode.Drain),
            this, default, TaskCreationOptions.LongRunning | TaskCreationOptions.DenyChildAttach, System.Threading.Tasks.TaskScheduler.Default));
    }

    /// <summary>
    /// Stops accepting work and waits for the workers to exit, either running (<see cref="ShutdownMode.Drain"/>) or
    /// cancelling (<see cref="ShutdownMode.CancelPending"/>) the items that have not started. Items already running always
    /// finish. Idempotent; a cancelling call after a draining one cancels what has not started yet.
    /// </summary>
    /// <param name="mode">What to do with accepted items that have not started.</param>
    /// <returns>
    /// The number of items this pool has cancelled (never run) because of shutdown. When called from one of this pool's
    /// own work items the call does not wait, and the figure covers only the items cancelled so far.
    /// </returns>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public int Shutdown(ShutdownMode mode)
    {
        if (mode is not ShutdownMode.Drain and not ShutdownMode.CancelPending)
        {
            throw new ArgumentOutOfRangeException(nameof(mode), mode, "Unknown shutdown mode.");
        }
        BeginShutdown(mode);
        if (t_currentWorker?.Pool == this || t_dedicatedPool == this)
        {
            return (int)Interlocked.Read(ref _cancelledCount);
        }
        foreach (Worker worker in SnapshotWorkers())
        {
            // A worker listed by a TryAddWorker that has not finished starting its thread: wait for the outcome (the
            // start takes a scheduling round at most), since an unstarted thread cannot be joined.
            var spinner = new SpinWait();
            while (Volatile.Read(ref worker.StartState) == Worker.StartPending)
            {
                spinner.SpinOnce();
            }
            if (worker.StartState == Worker.StartSucceeded)
            {
                worker.Thread!.Join();
            }
        }
        // Dedicated threads finish the long-running item they run (it had started) and exit; retired workers may still
        // be running their stop hook.
        foreach (Thread thread in SnapshotDedicatedThreads())
        {
            thread.Join();
        }
        StopMonitor();
        StopTimers(join: true);
        JoinWaitThreads();
        SweepLeftovers();
        return (int)Interlocked.Read(ref _cancelledCount);
    }

    private void BeginShutdown(ShutdownMode mode)
    {
        int target = mode == ShutdownMode.CancelPending ? StateCancelling : StateDraining;
        lock (_threadLock)
        {
            if (_state >= target)
            {
                return;
            }
            // Close the global queue before publishing the state, so that once IsShutdownStarted is true no enqueue
            // from outside the pool can still be accepted.
            _globalQueue.Close();
            _state = target;
            _retryTimer?.Dispose();
            _retryTimer = null;
        }
        CloseReadyList();
        StopTimers(join: false);
        StopWaits();
        WakeAllWorkers();
        ReleaseIdleDedicatedThreads();
        _monitorBlocker.Signal();
    }

    private Worker[] SnapshotWorkers()
    {
        lock (_threadLock)
        {
            return _workers;
        }
    }

    /// <summary>
    /// Runs or cancels what is left after every worker has exited. Items are only left when the pool never managed to
    /// start a worker for them (thread creation failing up to shutdown, or a first enqueue racing the shutdown), and
    /// accepted work must still run exactly once, so the disposing thread runs them itself.
    /// </summary>
    /// <remarks>
    /// The loop runs until the queue is empty counting claimed positions, not just until a batch comes back empty: a
    /// producer that claimed its slot before the close may still be publishing it. The queue is closed, so every later
    /// claim is published empty and the loop ends. Under <see cref="UnhandledExceptionPolicy.FailProcess"/> the first
    /// unhandled exception is rethrown from <see cref="Shutdown(ShutdownMode)"/> once every leftover has been dealt with.
    /// </remarks>
    private void SweepLeftovers()
    {
        Debug.Assert(Volatile.Read(ref _threadCount) == 0 || t_currentWorker?.Pool == this);
        Span<WorkItemEntry> batch = new WorkItemEntry[GlobalBatchSize];
        ExceptionDispatchInfo? firstUnhandled = null;
        var spinner = new SpinWait();
        while (UrgentWorkMayBeWaiting || !_globalQueue.IsEmpty)
        {
            int taken = 0;
            while (taken < batch.Length && TryTakeUrgent(out batch[taken]))
            {
                taken++;
            }
            if (taken == 0)
            {
                taken = _globalQueue.TryDequeueBatch(batch);
            }
            if (taken == 0)
            {
                spinner.SpinOnce();
                continue;
            }
            for (int i = 0; i < taken; i++)
            {
                if (_state == StateCancelling && !CancelPendingItem(batch[i]))
                {
                }
                else if (!RunLeftover(batch[i], out Exception? unhandled) && firstUnhandled is null)
                {
                    firstUnhandled = ExceptionDispatchInfo.Capture(unhandled!);
                }
                batch[i] = default;
            }
        }
        firstUnhandled?.Throw();
    }

    /// <summary>
    /// Runs one leftover item on the calling thread, in the item's ExecutionContext (or the caller's, for an item queued
    /// without one), and puts the caller's thread state back afterwards. Returns false with the exception when the item
    /// threw and the policy says the exception is unhandled.
    /// </summary>
    private bool RunLeftover(in WorkItemEntry item, out Exception? unhandled)
    {
        unhandled = null;
        ExecutionContext? callerContext = ExecutionContext.Capture();
        SynchronizationContext? callerSync = System.Threading.SynchronizationContext.Current;
        CultureInfo culture = CultureInfo.CurrentCulture;
        CultureInfo uiCulture = CultureInfo.CurrentUICulture;
        try
        {
            if (item.Context is null)
            {
                item.Invoke();
            }
            else
            {
                ExecutionContext.Run(item.Context, static state => ((StrongBox<WorkItemEntry>)state!).Value.Invoke(), new StrongBox<WorkItemEntry>(item));
            }
        }
        catch (Exception exception)
        {
            if (!ReportItemException(exception))
            {
                unhandled = exception;
            }
        }
        finally
        {
            if (callerContext is not null)
            {
                ExecutionContext.Restore(callerContext);
            }
            System.Threading.SynchronizationContext.SetSynchronizationContext(callerSync);
            CultureInfo.CurrentCulture = culture;
            CultureInfo.CurrentUICulture = uiCulture;
            Interlocked.Increment(ref _exitedWorkersCompleted);
        }
        return unhandled is null;
    }
}
