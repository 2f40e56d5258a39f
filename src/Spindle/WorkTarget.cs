using System;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Tasks;

namespace Spindle;

/// <summary>
/// Somewhere work can be queued: a <see cref="WorkerPool"/> (its own queue, the default lane) or one of its
/// <see cref="WorkerPoolLane"/>s. Both offer the same queueing surface, implemented once here: the
/// <c>QueueUserWorkItem</c> forms, the <c>TryQueueUserWorkItem</c> and <c>QueueUserWorkItemAsync</c> forms for bounded
/// lanes, <c>Run</c> and <c>RunAsValueTask</c>, and a <see cref="System.Threading.Tasks.TaskScheduler"/> and a
/// <see cref="System.Threading.SynchronizationContext"/> that queue to this target.
/// </summary>
/// <remarks>
/// In the members' documentation, "the pool" is the pool this target belongs to; work queued on a lane runs on that
/// pool's threads, under the lane's priority, share, cap and bound. Work an item queues goes where its code sends it:
/// inside a lane's task or <c>Run</c> delegate, <see cref="System.Threading.Tasks.TaskScheduler.Current"/> or
/// <see cref="System.Threading.SynchronizationContext.Current"/> is the lane's, so child tasks and awaits stay in the
/// lane, while a call on the pool itself queues to the pool's own queue. This class cannot be derived from outside
/// the library.
/// </remarks>
public abstract partial class WorkTarget : ITaskTarget
{
    private protected WorkTarget()
    {
    }

    // Set once by the derived constructor (Bind), before the target is published: the task bridge of this target, the
    // lane state (null for the pool's own queue) and the pool's flow setting.
    private TaskBridge _bridge = null!;
    private Lane? _laneCore;
    private bool _flowContext;

    // The public handles of the task integration, made on first use (set once by CAS).
    private WorkerPoolTaskScheduler? _taskScheduler;
    private WorkerPoolSynchronizationContext? _synchronizationContext;

    /// <summary>The task bridge of this target (the pool's, or the lane's).</summary>
    internal TaskBridge Bridge => _bridge;

    /// <summary>The lane this target queues to; null for the pool's own queue.</summary>
    internal Lane? LaneCore => _laneCore;

    /// <summary>Whether entry points capture and flow the caller's <see cref="ExecutionContext"/>.</summary>
    private protected bool FlowContext => _flowContext;

    /// <summary>The derived constructor, once, before the target is published: what this target queues through.</summary>
    private protected void Bind(TaskBridge bridge, Lane? lane, bool flowContext)
    {
        _bridge = bridge;
        _laneCore = lane;
        _flowContext = flowContext;
        bridge.Attach(this);
    }

    /// <summary>The pool this target belongs to: the pool itself, or the lane's pool.</summary>
    internal abstract WorkerPool OwningPool { get; }

    /// <summary>The exception for an item refused because the target is full (only a lane can be).</summary>
    internal virtual Exception FullException() => new InvalidOperationException("The pool's own queue has no bound and is never full.");

    /// <summary>Throws the exception every entry point throws once the pool, or the lane, is shutting down.</summary>
    [DoesNotReturn]
    internal abstract void ThrowShutDown();

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private protected ExecutionContext? CaptureContext() => FlowContext ? ExecutionContext.Capture() : null;

    /// <summary>
    /// Queues <paramref name="callBack"/> with <paramref name="state"/> (never boxed) unless the target is full: the
    /// non-blocking form for a bounded lane. Flows the caller's <see cref="ExecutionContext"/> when
    /// <see cref="WorkerPoolOptions.FlowExecutionContext"/> is set.
    /// </summary>
    /// <param name="callBack">The work.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="preferLocal">See <see cref="QueueUserWorkItem{TState}(Action{TState}, TState, bool)"/> (a lane's
    /// items always go to the lane's queue).</param>
    /// <returns><see langword="true"/> when the item was queued; <see langword="false"/>, having queued nothing, when the
    /// lane holds <see cref="LaneOptions.QueueLimit"/> items (a pool, and an unbounded lane, is never full).</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool TryQueueUserWorkItem<TState>(Action<TState> callBack, TState state, bool preferLocal)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        return TryEnqueue(CreateEntry(callBack, state, CaptureContext()), preferLocal);
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> unless the target is full, without allocating and without flowing
    /// <see cref="ExecutionContext"/>. See <see cref="TryQueueUserWorkItem{TState}(Action{TState}, TState, bool)"/>.
    /// </summary>
    /// <returns><see langword="true"/> when the item was queued; <see langword="false"/> when the lane is full.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="callBack"/> is a <see cref="Task"/> (see
    /// <see cref="UnsafeQueueUserWorkItem(IWorkItem, bool)"/>).</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool TryQueueUserWorkItem(IWorkItem callBack, bool preferLocal)
    {
        ValidateWorkItem(callBack);
        return TryEnqueue(new WorkItemEntry(callBack, WorkItemEntry.WorkItemMarker, null), preferLocal);
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> with <paramref name="state"/> (never boxed), waiting without blocking a
    /// thread while a bounded lane is full, whatever its <see cref="LaneOptions.FullMode"/>. Flows the caller's
    /// <see cref="ExecutionContext"/> when <see cref="WorkerPoolOptions.FlowExecutionContext"/> is set.
    /// </summary>
    /// <param name="callBack">The work.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="cancellationToken">Ends the wait for room: the returned task is then cancelled and nothing is queued.
    /// It has no effect once the item is queued.</param>
    /// <returns>A task that completes when the item is queued (at once when there is room). It faults with
    /// <see cref="ObjectDisposedException"/> when the lane shuts down while the call waits.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public ValueTask QueueUserWorkItemAsync<TState>(Action<TState> callBack, TState state, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        return EnqueueAsync(CreateEntry(callBack, state, CaptureContext()), cancellationToken);
    }

    /// <summary>
    /// Queues <paramref name="callBack"/>, waiting without blocking a thread while a bounded lane is full; never flows
    /// <see cref="ExecutionContext"/>. See <see cref="QueueUserWorkItemAsync{TState}(Action{TState}, TState, CancellationToken)"/>.
    /// </summary>
    /// <returns>A task that completes when the item is queued.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="callBack"/> is a <see cref="Task"/> (see
    /// <see cref="UnsafeQueueUserWorkItem(IWorkItem, bool)"/>).</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public ValueTask QueueUserWorkItemAsync(IWorkItem callBack, CancellationToken cancellationToken = default)
    {
        ValidateWorkItem(callBack);
        return EnqueueAsync(new WorkItemEntry(callBack, WorkItemEntry.WorkItemMarker, null), cancellationToken);
    }

    private bool TryEnqueue(in WorkItemEntry entry, bool preferLocal)
    {
        Lane? lane = LaneCore;
        EnqueueStatus status = lane is null
            ? (Unsafe.As<WorkerPool>(this).SchedulerCore.TryEnqueue(entry, preferLocal) ? EnqueueStatus.Accepted : EnqueueStatus.ShutDown)
            : lane.TryEnqueue(entry, mayWaitForRoom: false);
        if (status == EnqueueStatus.ShutDown)
        {
            ThrowShutDown();
        }
        return status == EnqueueStatus.Accepted;
    }

    private ValueTask EnqueueAsync(in WorkItemEntry entry, CancellationToken cancellationToken)
    {
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled(cancellationToken);
        }
        Lane? lane = LaneCore;
        if (lane is null)
        {
            Enqueue(entry, preferLocal: false);
            return default;
        }
        switch (lane.TryEnqueue(entry, mayWaitForRoom: false, CancellationToken.None))
        {
            case EnqueueStatus.Accepted:
                return default;
            case EnqueueStatus.Full:
                return new ValueTask(lane.EnqueueWhenRoomAsync(entry, cancellationToken));
            default:
                ThrowShutDown();
                return default;
        }
    }

    /// <summary>
    /// Queues an item that may run for long: on the pool, on a dedicated thread; on a lane, through the lane's queue
    /// (under its priority and cap) and then inside a blocking region, so the pool adds a thread while it runs.
    /// </summary>
    private void EnqueueLongRunning(in WorkItemEntry entry)
    {
        if (LaneCore is null)
        {
            if (!Unsafe.As<WorkerPool>(this).DedicatedCore.TryEnqueue(entry))
            {
                ThrowShutDown();
            }
            return;
        }
        Unsafe.As<WorkerPoolLane>(this).Enqueue(LaneCore.LongRunningEntry(entry));
    }
}
