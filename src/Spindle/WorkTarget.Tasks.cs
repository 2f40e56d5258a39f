using System;
using System.Diagnostics.CodeAnalysis;
using System.Threading;
using System.Threading.Tasks;
using System.Runtime.CompilerServices;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Tasks;

namespace Spindle;

// Task integration (the public surface; the bridge itself is Tasks/TaskBridge.cs).
public abstract partial class WorkTarget
{
    /// <summary>
    /// The <see cref="System.Threading.Tasks.TaskScheduler"/> that runs tasks on this pool: pass it to
    /// <see cref="TaskFactory"/>, <see cref="Task.Start(System.Threading.Tasks.TaskScheduler)"/>,
    /// <c>ContinueWith</c> or <see cref="ParallelOptions.TaskScheduler"/>. See <see cref="WorkerPoolTaskScheduler"/>.
    /// </summary>
    public WorkerPoolTaskScheduler TaskScheduler =>
        Volatile.Read(ref _taskScheduler) ?? Interlocked.CompareExchange(ref _taskScheduler, new WorkerPoolTaskScheduler(this), null) ?? _taskScheduler!;

    /// <summary>The <see cref="System.Threading.SynchronizationContext"/> that posts to this pool. See <see cref="WorkerPoolSynchronizationContext"/>.</summary>
    public WorkerPoolSynchronizationContext SynchronizationContext =>
        Volatile.Read(ref _synchronizationContext)
        ?? Interlocked.CompareExchange(ref _synchronizationContext, new WorkerPoolSynchronizationContext(this), null)
        ?? _synchronizationContext!;

    SynchronizationContext ITaskTarget.SynchronizationContext => SynchronizationContext;

    [DoesNotReturn]
    void ITaskTarget.ThrowShutDown() => ThrowShutDown();

    Exception ITaskTarget.FullException() => FullException();

    /// <summary>Runs <paramref name="action"/> on the pool; the returned task completes when it has run.</summary>
    /// <param name="action">The work.</param>
    /// <param name="cancellationToken">
    /// If it is cancelled before the work starts, the work never runs, the task is cancelled at once and the delegate
    /// is released; once the work has started the token is only passed along (the work may observe it). On a full lane
    /// in <see cref="LaneFullMode.Wait"/> mode the call blocks until there is room or the token is cancelled (then it
    /// returns the cancelled task, having queued nothing).
    /// </param>
    /// <returns>
    /// A task for the work: faulted with the delegate's exception (which never reaches the pool's
    /// <see cref="WorkerPool.UnhandledException"/> policy), cancelled as above, or already cancelled (nothing queued) when the
    /// token was cancelled at the call.
    /// </returns>
    /// <exception cref="ArgumentNullException"><paramref name="action"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public Task Run(Action action, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(action);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled(cancellationToken);
        }
        return cancellationToken.CanBeCanceled
            ? Bridge.QueueRunItem<VoidResult>(action, RunKind.Action, CaptureContext(), cancellationToken)
            : Bridge.QueueActionRun(action, CaptureContext());
    }

    /// <summary>Runs <paramref name="function"/> on the pool; the returned task gets its result.</summary>
    /// <param name="function">The work.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A task for the result; see <see cref="Run(Action, CancellationToken)"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public Task<TResult> Run<TResult>(Func<TResult> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled<TResult>(cancellationToken);
        }
        return Bridge.QueueRunItem<TResult>(function, RunKind.Func, CaptureContext(), cancellationToken);
    }

    /// <summary>
    /// Runs the asynchronous <paramref name="function"/> on the pool and returns a proxy for the task it returns (the
    /// delegate's own task is unwrapped). Its awaits resume on the pool unless they use <c>ConfigureAwait(false)</c>.
    /// </summary>
    /// <param name="function">The work; a null task from it faults the proxy with <see cref="InvalidOperationException"/>.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A proxy for the delegate's task.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public Task Run(Func<Task> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled(cancellationToken);
        }
        return Bridge.QueueRunItem<VoidResult>(function, RunKind.AsyncAction, CaptureContext(), cancellationToken);
    }

    /// <summary>Runs the asynchronous <paramref name="function"/> on the pool and returns a proxy for its task's result.</summary>
    /// <param name="function">The work; a null task from it faults the proxy with <see cref="InvalidOperationException"/>.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A proxy for the delegate's task.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public Task<TResult> Run<TResult>(Func<Task<TResult>> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled<TResult>(cancellationToken);
        }
        return Bridge.QueueRunItem<TResult>(function, RunKind.AsyncFunc, CaptureContext(), cancellationToken);
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
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public ValueTask RunAsValueTask(Action action, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(action);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled(cancellationToken);
        }
        ValueTaskRunItem<VoidResult> item = Bridge.QueueValueTaskItem<VoidResult>(action, isFunc: false, CaptureContext(), out short version, cancellationToken);
        return new ValueTask(item, version);
    }

    /// <summary>Like <see cref="Run{TResult}(Func{TResult}, CancellationToken)"/>, returning a pooled <see cref="ValueTask{TResult}"/>; see <see cref="RunAsValueTask(Action, CancellationToken)"/>.</summary>
    /// <param name="function">The work.</param>
    /// <param name="cancellationToken">See <see cref="Run(Action, CancellationToken)"/>.</param>
    /// <returns>A value task for the result.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="function"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public ValueTask<TResult> RunAsValueTask<TResult>(Func<TResult> function, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(function);
        ThrowIfShutDown();
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled<TResult>(cancellationToken);
        }
        ValueTaskRunItem<TResult> item = Bridge.QueueValueTaskItem<TResult>(function, isFunc: true, CaptureContext(), out short version, cancellationToken);
        return new ValueTask<TResult>(item, version);
    }

    private protected void ThrowIfShutDown()
    {
        if (LaneCore is Lane lane ? lane.IsShutdownStarted : Unsafe.As<WorkerPool>(this).SchedulerCore.IsShutdownStarted)
        {
            ThrowShutDown();
        }
    }
}
