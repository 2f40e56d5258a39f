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
//   pool) and closes the global queue. From then on every public enqueue throws ObjectDisposedException: a global
//   enqueue either claimed its slot before the close (and is drained) or sees the close (and is rejected), see
//   GlobalQueue; a local enqueue checks _state, and if it raced the change its item sits in the ring of a live worker
//   that drains it.
// - Continuations are not new work: a Post to the pool's SynchronizationContext, a task queued to its TaskScheduler
//   and a timer firing belong to work the pool already accepted, and refusing them would crash the thread that
//   completed the awaited task or strand the awaiter. EnqueueContinuation accepts them onto the pool (global queue)
//   until the pool has stopped, and after that runs them on the built-in ThreadPool (RunElsewhere, counted).
// - Drain holds (_drainHolds) count work that has started and may still produce continuations: async Run items whose
//   task has not completed, and long-running items on dedicated threads. While a hold is out, idle workers park
//   instead of exiting, so that a continuation arriving during the drain still runs on the pool.
// - A worker exits when the pool is shutting down, no hold is out and it can see no work in any queue; a worker still
//   running an item drains its own ring before it can get there.
// - The pool stops (_stopped, under _threadLock) when shutdown has begun, no worker is left and no hold is out. Who
//   makes that transition (the last worker to exit, BeginShutdown of a pool without workers, or the release of the last
//   hold) closes the timers' ready list and sets _stoppedEvent. Anything a continuation put into the global queue before
//   the stop is run by the last worker (on its way out) or by the disposing thread; after the stop, continuations run
//   elsewhere. Both sides decide under _threadLock, so nothing falls between them.
// - In cancelling mode a worker that dequeues a plain work item or a Run item cancels it (counted in _cancelledCount,
//   once per item) instead of running it; continuations, scheduler tasks and timer firings still run, and a wait
//   firing runs only to find its registration ended (StopWaits unregisters them all).
// - Shutdown called from outside the pool then waits for the stop, joins every thread that belonged to the pool, and
//   sweeps the queues itself, which only finds anything if no worker could be started.
public sealed partial class WorkerPool
{
    private long _cancelledCount;
    private long _redirectedCount;
    private int _drainHolds;
    private volatile bool _stopped;            // written under _threadLock, once
    private readonly ManualResetEventSlim _stoppedEvent = new(initialState: false, spinCount: 0);

    /// <summary>
    /// Callbacks that arrived after this pool had stopped and therefore ran on the built-in <see cref="ThreadPool"/>:
    /// continuations posted to <see cref="SynchronizationContext"/>, tasks queued to <see cref="TaskScheduler"/>, and
    /// firings of this pool's timers that were still scheduled. See <see cref="Shutdown(ShutdownMode)"/>.
    /// </summary>
    public long RedirectedCallbackCount => Interlocked.Read(ref _redirectedCount);

    /// <summary>Whether shutdown has finished: no worker is left and every accepted item has run or was cancelled.</summary>
    internal bool HasStopped => _stopped;

    /// <summary>
    /// Stops accepting work, runs every item already accepted, and waits for the workers to exit. Idempotent. Called
    /// from one of this pool's own work items it does not wait for the workers (which would deadlock): it returns at
    /// once and the workers finish the accepted items and exit on their own. See <see cref="Shutdown(ShutdownMode)"/>.
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
    /// Stops accepting work and waits for the pool to stop, either running (<see cref="ShutdownMode.Drain"/>) or
    /// cancelling (<see cref="ShutdownMode.CancelPending"/>) the items that have not started. Items already running always
    /// finish. Idempotent; a cancelling call after a draining one cancels what has not started yet.
    /// </summary>
    /// <param name="mode">What to do with accepted items that have not started.</param>
    /// <returns>
    /// The number of accepted items this pool has cancelled (never run) because of shutdown, over every call: work items
    /// queued with the <c>QueueUserWorkItem</c> and <c>UnsafeQueueUserWorkItem</c> methods, and <c>Run</c> and
    /// <c>RunAsValueTask</c> items (their tasks complete as cancelled; an item its own token had cancelled already is not
    /// counted again). Continuations, scheduler tasks and timer callbacks are never cancelled by shutdown, and wait
    /// callbacks end with their registrations: none of them is counted. When called from one of this pool's own work
    /// items the call does not wait, and the figure covers
    /// only the items cancelled so far.
    /// </returns>
    /// <remarks>
    /// <para>What shutdown means for work that is already under way:</para>
    /// <list type="bullet">
    /// <item>An <c>await</c> inside a <c>Run</c> item that has not completed keeps the pool draining: its continuations run
    /// on the pool, and shutdown waits for the item's task, as it waits for a running item and for long-running items.
    /// So a <c>Run</c> item must not wait for the shutdown of its own pool from a thread that is not the pool's (after
    /// <c>ConfigureAwait(false)</c>): that would wait for itself. On the pool's own threads the call does not wait.</item>
    /// <item>A continuation posted to <see cref="SynchronizationContext"/> or a task queued to <see cref="TaskScheduler"/>
    /// during the drain runs on the pool, in both modes. One that arrives after the pool has stopped runs on the built-in
    /// <see cref="ThreadPool"/> (counted by <see cref="RedirectedCallbackCount"/>): it is never lost and never throws into
    /// the thread that completed the awaited work.</item>
    /// <item>The pool's timers keep firing during the drain, on the pool; timers still scheduled when the pool stops fire
    /// on the built-in pool until they are disposed (so <c>Task.Delay</c>, <c>CancelAfter</c> and <c>PeriodicTimer</c>
    /// on <see cref="TimeProvider"/> always complete). The timer thread exits once no timer is scheduled.</item>
    /// <item>Shutdown ends every wait registration, as <see cref="RegisteredWait.Unregister(WaitHandle?)"/> does: no
    /// wait callback starts after shutdown has begun (one that is running finishes).</item>
    /// </list>
    /// </remarks>
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
        WaitUntilStopped();
        Debug.Assert(SnapshotWorkers().Length == 0, "A stopped pool lists no worker.");
        // Workers that exited during shutdown, dedicated threads, and retired workers that may still be running their
        // stop hook.
        foreach (Thread thread in SnapshotDedicatedThreads())
        {
            thread.Join();
        }
        StopMonitor();
        JoinWaitThreads();
        SweepLeftovers();
        return (int)Interlocked.Read(ref _cancelledCount);
    }

    private void BeginShutdown(ShutdownMode mode)
    {
        int target = mode == ShutdownMode.CancelPending ? StateCancelling : StateDraining;
        bool stopped;
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
            // The state store must be visible before the hold count is read (TryStopLocked): a hold released meanwhile
            // either sees the new state (and tries the stop itself) or is seen released here.
            Interlocked.MemoryBarrier();
            _retryTimer?.Dispose();
            _retryTimer = null;
            stopped = TryStopLocked();
        }
        if (stopped)
        {
            OnStopped();
        }
        StopWaits();
        WakeAllWorkers();
        ReleaseIdleDedicatedThreads();
        _monitorBlocker.Signal();
    }

    /// <summary>
    /// Caller holds <see cref="_threadLock"/>: makes the pool stopped if shutdown has begun, no worker is left and no
    /// drain hold is out. Returns whether this call made the transition (the caller then calls <see cref="OnStopped"/>
    /// after releasing the lock).
    /// </summary>
    private bool TryStopLocked()
    {
        Debug.Assert(_threadLock.IsHeldByCurrentThread);
        if (_stopped || _state == StateRunning || _threadCount != 0 || Volatile.Read(ref _drainHolds) != 0)
        {
            return false;
        }
        _stopped = true;
        return true;
    }

    /// <summary>The pool has just stopped: timer firings from now on run elsewhere, and waiting shutdown calls return.</summary>
    private void OnStopped()
    {
        Debug.Assert(_stopped);
        CloseReadyList();
        ReleaseTimerThreadAfterStop();
        _stoppedEvent.Set();
    }

    /// <summary>
    /// Waits for the stop. While waiting, runs whatever sits in the queues when no worker exists to run it (the pool
    /// could not start one: thread creation failing), so that a drain hold waiting on such an item cannot wait forever.
    /// </summary>
    private void WaitUntilStopped()
    {
        while (!_stoppedEvent.Wait(10))
        {
            if (Volatile.Read(ref _threadCount) == 0 && (UrgentWorkMayBeWaiting || !_globalQueue.IsEmpty))
            {
                SweepLeftovers();
            }
        }
    }

    /// <summary>
    /// Takes a drain hold: work that has started and may still produce continuations (an async Run item's task, a
    /// long-running item). While a hold is out, a shutting-down pool keeps its workers (parked) instead of stopping.
    /// </summary>
    internal void AcquireDrainHold() => Interlocked.Increment(ref _drainHolds);

    /// <summary>Releases a hold taken with <see cref="AcquireDrainHold"/>; the last one lets a shutting-down pool stop.</summary>
    internal void ReleaseDrainHold()
    {
        int left = Interlocked.Decrement(ref _drainHolds); // a full fence before the read of _state
        Debug.Assert(left >= 0);
        if (left != 0 || _state == StateRunning)
        {
            return;
        }
        WakeAllWorkers(); // parked workers look again and exit (see Park)
        bool stopped;
        lock (_threadLock)
        {
            stopped = TryStopLocked();
        }
        if (stopped)
        {
            OnStopped();
            if (!_globalQueue.IsEmpty || UrgentWorkMayBeWaiting)
            {
                // No worker was left to run these (thread creation failed) and this thread is not the pool's: hand them on.
                RedirectLeftovers();
            }
        }
    }

    /// <summary>Whether a worker of a shutting-down pool may exit: no drain hold is out and no queue holds work.</summary>
    private bool MayExitForShutdown() => Volatile.Read(ref _drainHolds) == 0 && !AnyWorkVisible();

    /// <summary>
    /// Queues a continuation: a callback that belongs to work the pool has already accepted (a post to the pool's
    /// SynchronizationContext, a task of its TaskScheduler, a timer firing). Never throws: while the pool runs it is an
    /// ordinary enqueue; during shutdown it goes to the global queue until the pool has stopped, and after that it runs on
    /// the built-in ThreadPool.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    internal void EnqueueContinuation(in WorkItemEntry entry, bool preferLocal)
    {
        if (!TryEnqueue(entry, preferLocal))
        {
            EnqueueContinuationDuringShutdown(entry);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void EnqueueContinuationDuringShutdown(in WorkItemEntry entry)
    {
        bool accepted = false;
        lock (_threadLock)
        {
            if (!_stopped)
            {
                // The queue is closed to new work, not to this: whoever stops the pool later runs what is in it.
                _globalQueue.EnqueueAlways(entry);
                accepted = true;
            }
        }
        if (accepted)
        {
            WakeWorkerIfNeeded();
        }
        else
        {
            RunElsewhere(entry);
        }
    }

    /// <summary>Runs a callback that arrived after the pool stopped on the built-in ThreadPool, and counts it.</summary>
    internal void RunElsewhere(in WorkItemEntry entry)
    {
        Interlocked.Increment(ref _redirectedCount);
        ThreadPool.UnsafeQueueUserWorkItem(new RedirectedCallback(this, entry), preferLocal: false);
    }

    /// <summary>Takes a batch of what is left in the queues a worker would look at outside its own ring: fired timers first, then the global queue.</summary>
    private int TakeLeftovers(Span<WorkItemEntry> batch)
    {
        int taken = 0;
        while (taken < batch.Length && TryTakeUrgent(out batch[taken]))
        {
            taken++;
        }
        return taken != 0 ? taken : _globalQueue.TryDequeueBatch(batch);
    }

    /// <summary>After the stop, by a thread that is not the pool's: every leftover runs on the built-in ThreadPool.</summary>
    private void RedirectLeftovers()
    {
        Span<WorkItemEntry> batch = new WorkItemEntry[GlobalBatchSize];
        while (true)
        {
            int taken = TakeLeftovers(batch);
            if (taken == 0)
            {
                return;
            }
            for (int i = 0; i < taken; i++)
            {
                if (_state != StateCancelling || CancelPendingItem(batch[i]))
                {
                    RunElsewhere(batch[i]);
                }
                batch[i] = default;
            }
        }
    }

    /// <summary>A callback run on the built-in ThreadPool after its pool stopped: in its own context, under the pool's exception policy.</summary>
    private sealed class RedirectedCallback(WorkerPool pool, WorkItemEntry entry) : IThreadPoolWorkItem
    {
        public void Execute()
        {
            if (!pool.RunLeftover(entry, out Exception? unhandled, countCompleted: false))
            {
                // The policy says the process fails: rethrown on a built-in pool thread, as there.
                ExceptionDispatchInfo.Throw(unhandled!);
            }
        }
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
    /// start a worker for them (thread creation failing up to shutdown, or a first enqueue racing the shutdown), or when
    /// a continuation arrived between the last worker's decision to exit and the stop; accepted work must still run
    /// exactly once, so the calling thread (the disposing thread, or the last worker on its way out) runs them itself.
    /// </summary>
    /// <remarks>
    /// The loop runs until the queue is empty counting claimed positions, not just until a batch comes back empty: a
    /// producer that claimed its slot before the close may still be publishing it. The queue is closed, so every later
    /// claim is published empty and the loop ends. Under <see cref="UnhandledExceptionPolicy.FailProcess"/> the first
    /// unhandled exception is rethrown from <see cref="Shutdown(ShutdownMode)"/> once every leftover has been dealt with.
    /// </remarks>
    private void SweepLeftovers()
    {
        Span<WorkItemEntry> batch = new WorkItemEntry[GlobalBatchSize];
        ExceptionDispatchInfo? firstUnhandled = null;
        var spinner = new SpinWait();
        while (UrgentWorkMayBeWaiting || !_globalQueue.IsEmpty)
        {
            int taken = TakeLeftovers(batch);
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
                else if (!RunLeftover(batch[i], out Exception? unhandled, countCompleted: true) && firstUnhandled is null)
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
    private bool RunLeftover(in WorkItemEntry item, out Exception? unhandled, bool countCompleted)
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
            if (countCompleted)
            {
                Interlocked.Increment(ref _exitedWorkersCompleted);
            }
        }
        return unhandled is null;
    }
}
