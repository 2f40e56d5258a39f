using System;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Tasks;

namespace Spindle;

// Task integration: the pool's TaskScheduler and SynchronizationContext, the Run methods, and cancellation of queued
// work (see Tasks/RunWorkItem.cs for the token protocol).
//
// Every Run overload, with a token or without, has one model: the queued entry is a RunWorkItem (a
// TaskCompletionSource that is also the work item; RunAsValueTask uses a pooled ValueTaskRunItem), and the delegate runs
// with the pool's SynchronizationContext installed, so its awaits come back to the pool through Post, which queues
// without allocating. TaskScheduler.Current inside is TaskScheduler.Default, as inside Task.Run. A cancellable token
// cancels the item the moment it fires; shutdown with CancelPending cancels it through its task. An async delegate
// whose task has not completed holds the pool's drain (WorkerPool.Shutdown.cs), so Dispose waits for it too.
public sealed partial class WorkerPool
{
    private WorkerPoolTaskScheduler? _taskScheduler;
    private WorkerPoolSynchronizationContext? _synchronizationContext;

    /// <summary>
    /// The <see cref="System.Threading.Tasks.TaskScheduler"/> that runs tasks on this pool: pass it to
    /// <see cref="TaskFactory"/>, <see cref="Task.Start(System.Threading.Tasks.TaskScheduler)"/>,
    /// <c>ContinueWith</c> or <see cref="ParallelOptions.TaskScheduler"/>. See <see cref="WorkerPoolTaskScheduler"/>.
    /// </summary>
    public WorkerPoolTaskScheduler TaskScheduler =>
        Volatile.Read(ref _taskScheduler) ?? Interlocked.CompareExchange(ref _taskScheduler, new WorkerPoolTaskScheduler(this), null) ?? _taskScheduler!;

    /// <summary>The <see cref="System.Threading.SynchronizationContext"/> that posts to this pool. See <see cref="WorkerPoolSynchronizationContext"/>.</summary>
    public WorkerPoolSynchronizationContext SynchronizationContext =>
        Volatile.Read(ref _synchronizationContext) ?? Interlocked.CompareExchange(ref _synchronizationContext, new WorkerPoolSynchronizationContext(this), null) ?? _synchronizationContext!;

    /// <summary>Runs <paramref name="action"/> on the pool; the returned task completes when it has run.</summary>
    /// <param name="action">The work.</param>
    /// <param name="cancellationToken">
    /// If it is cancelled before the work starts, the work never runs, the task is cancelled at once and the delegate
    /// is released; once the work has started the token is only passed along (the work may observe it).
    /// </param>
    /// <returns>
    /// A task for the work: faulted with the delegate's exception (which never reaches the pool's
    /// <see cref="UnhandledException"/> policy), cancelled as above, or already cancelled (nothing queued) when the
    /// token was cancelled at the call.
    /// </returns>
    /// <exception cref="ArgumentNullException"><paramref name="action"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public Task Run(Action action, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(action);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled(cancellationToken);
        }
        return QueueRunItem<VoidResult>(action, RunKind.Action, cancellationToken);
    }

    /// <summary>Runs <paramref name="function"/> on the pool; the returned task gets its result.</summary>
    /// <param name="function">The work.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A task for the result; see <see cref="Run(Action, CancellationToken)"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public Task<TResult> Run<TResult>(Func<TResult> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled<TResult>(cancellationToken);
        }
        return QueueRunItem<TResult>(function, RunKind.Func, cancellationToken);
    }

    /// <summary>
    /// Runs the asynchronous <paramref name="function"/> on the pool and returns a proxy for the task it returns (the
    /// delegate's own task is unwrapped). Its awaits resume on the pool unless they use <c>ConfigureAwait(false)</c>.
    /// </summary>
    /// <param name="function">The work; a null task from it faults the proxy with <see cref="InvalidOperationException"/>.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A proxy for the delegate's task.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public Task Run(Func<Task> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled(cancellationToken);
        }
        return QueueRunItem<VoidResult>(function, RunKind.AsyncAction, cancellationToken);
    }

    /// <summary>Runs the asynchronous <paramref name="function"/> on the pool and returns a proxy for its task's result.</summary>
    /// <param name="function">The work; a null task from it faults the proxy with <see cref="InvalidOperationException"/>.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A proxy for the delegate's task.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public Task<TResult> Run<TResult>(Func<Task<TResult>> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled<TResult>(cancellationToken);
        }
        return QueueRunItem<TResult>(function, RunKind.AsyncFunc, cancellationToken);
    }

    /// <summary>
    /// Like <see cref="Run(Action, CancellationToken)"/>, but returns a <see cref="ValueTask"/> backed by a pooled
    /// completion source: a steady stream of runs allocates only the delegate. Await it (or read it) exactly once, as
    /// any <see cref="ValueTask"/>.
    /// </summary>
    /// <param name="action">The work.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A value task for the work.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="action"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public ValueTask RunAsValueTask(Action action, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(action);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled(cancellationToken);
        }
        ValueTaskRunItem<VoidResult> item = QueueValueTaskItem<VoidResult>(action, isFunc: false, cancellationToken, out short version);
        return new ValueTask(item, version);
    }

    /// <summary>Like <see cref="Run{TResult}(Func{TResult}, CancellationToken)"/>, returning a pooled <see cref="ValueTask{TResult}"/>; see <see cref="RunAsValueTask(Action, CancellationToken)"/>.</summary>
    /// <param name="function">The work.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A value task for the result.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public ValueTask<TResult> RunAsValueTask<TResult>(Func<TResult> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled<TResult>(cancellationToken);
        }
        ValueTaskRunItem<TResult> item = QueueValueTaskItem<TResult>(function, isFunc: true, cancellationToken, out short version);
        return new ValueTask<TResult>(item, version);
    }

    internal static InvalidOperationException NullTaskException() => new("The asynchronous delegate returned a null task.");

    private void ThrowIfShutDown()
    {
        if (_state != StateRunning)
        {
            ThrowShutDown();
        }
    }

    private Task<TResult> QueueRunItem<TResult>(Delegate work, RunKind kind, CancellationToken cancellationToken)
    {
        var item = new RunWorkItem<TResult>(this, work, kind, cancellationToken);
        if (cancellationToken.CanBeCanceled)
        {
            // Registered before the item is queued, so that the registration exists whenever a worker could unregister it.
            item.RegisterCancellation();
        }
        if (!TryEnqueue(new WorkItemEntry(RunWorkItem<TResult>.RunCallback, item, CaptureContext()), preferLocal: true))
        {
            item.CancelByShutdown(); // never queued: not counted as cancelled by shutdown, the caller gets the exception
            ThrowShutDown();
        }
        return item.Task;
    }

    private ValueTaskRunItem<TResult> QueueValueTaskItem<TResult>(Delegate work, bool isFunc, CancellationToken cancellationToken, out short version)
    {
        ValueTaskRunItem<TResult> item = ValueTaskRunItem<TResult>.Rent(this, work, isFunc, cancellationToken);
        version = item.Version; // read before queueing: once it has run and been read, the item is reused
        if (cancellationToken.CanBeCanceled)
        {
            item.RegisterCancellation();
        }
        if (!TryEnqueue(new WorkItemEntry(ValueTaskRunItem<TResult>.RunCallback, item, CaptureContext()), preferLocal: true))
        {
            item.CancelByShutdown(); // releases the queue's share; the caller never sees the item
            ThrowShutDown();
        }
        return item;
    }

    /// <summary>Debugger support for <see cref="WorkerPoolTaskScheduler"/>: visits the states of queued entries with <paramref name="callback"/>.</summary>
    internal void VisitQueuedStates(Action<object?> visit, object callback)
    {
        _globalQueue.VisitStates(callback, visit);
        foreach (Worker worker in Volatile.Read(ref _workers))
        {
            worker.Ring.VisitStates(callback, visit);
        }
    }

    /// <summary>
    /// Shutdown with <see cref="ShutdownMode.CancelPending"/> meets an item that has not started. Plain work items are
    /// dropped and counted. Run items report the cancellation through their task, and are counted only if this call
    /// cancelled them (one that its token cancelled already is only skipped). Tasks of the pool's scheduler, posted
    /// continuations, timer firings and wait firings still run: a Task cannot be cancelled from outside, a dropped
    /// continuation would leave its awaiting code waiting forever, and timers and waits say themselves whether a firing
    /// still applies (a disposed timer's or an ended registration's firing does nothing). None of them is counted.
    /// Returns whether the item must run anyway.
    /// </summary>
    private bool CancelPendingItem(in WorkItemEntry item)
    {
        object? state = item.State;
        if (state is IShutdownCancellable cancellable) // only the Run items implement it (the interface is internal)
        {
            if (cancellable.CancelByShutdown())
            {
                Interlocked.Increment(ref _cancelledCount);
            }
            return false;
        }
        if (state is Timers.PoolTimer or RegisteredWait)
        {
            return true;
        }
        if (_taskScheduler is { } scheduler && ReferenceEquals(item.Callback, scheduler.ExecuteCallback))
        {
            return true;
        }
        if ((ReferenceEquals(state, WorkItemEntry.WorkItemMarker) && item.Callback is WorkerPoolSynchronizationContext.IPostedWork)
            || (item.Callback is Action<object?> { Target: WorkerPoolSynchronizationContext.IPostedWork }))
        {
            return true;
        }
        Interlocked.Increment(ref _cancelledCount);
        return false;
    }
}
