using System;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle;

public abstract partial class WorkTarget
{
    /// <summary>Queues <paramref name="callBack"/> with a null state. See <see cref="QueueUserWorkItem(WaitCallback, object?)"/>.</summary>
    /// <returns>Always <see langword="true"/> (the return type mirrors <see cref="ThreadPool.QueueUserWorkItem(WaitCallback)"/>).</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool QueueUserWorkItem(WaitCallback callBack) => QueueUserWorkItem(callBack, null);

    /// <summary>
    /// Queues <paramref name="callBack"/> to run once with <paramref name="state"/>, flowing the caller's
    /// <see cref="ExecutionContext"/> when <see cref="WorkerPoolOptions.FlowExecutionContext"/> is set. Like
    /// <see cref="ThreadPool.QueueUserWorkItem(WaitCallback, object?)"/>, the item goes to the pool's global queue even
    /// when called from one of its workers; the overloads that take <c>preferLocal</c> or <see cref="WorkItemOptions"/>
    /// can use the calling worker's local queue instead.
    /// </summary>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool QueueUserWorkItem(WaitCallback callBack, object? state)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        Enqueue(new WorkItemEntry(callBack, state, CaptureContext()), preferLocal: false);
        return true;
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> to run once with <paramref name="state"/>, which is never boxed. Flows the
    /// caller's <see cref="ExecutionContext"/> when <see cref="WorkerPoolOptions.FlowExecutionContext"/> is set.
    /// </summary>
    /// <param name="callBack">The work.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="preferLocal"><see langword="true"/> to use the calling worker's local queue when called from one of this
    /// pool's workers; <see langword="false"/> to use the global queue (fairer to work queued from outside).</param>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool QueueUserWorkItem<TState>(Action<TState> callBack, TState state, bool preferLocal)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        Enqueue(CreateEntry(callBack, state, CaptureContext()), preferLocal);
        return true;
    }

    /// <summary>
    /// Like <see cref="QueueUserWorkItem(WaitCallback, object?)"/> (the global queue, as
    /// <see cref="ThreadPool.UnsafeQueueUserWorkItem(WaitCallback, object?)"/>) but never flows the caller's
    /// <see cref="ExecutionContext"/>.
    /// </summary>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool UnsafeQueueUserWorkItem(WaitCallback callBack, object? state)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        Enqueue(new WorkItemEntry(callBack, state, null), preferLocal: false);
        return true;
    }

    /// <summary>Like <see cref="QueueUserWorkItem{TState}(Action{TState}, TState, bool)"/> but never flows the caller's <see cref="ExecutionContext"/>.</summary>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool UnsafeQueueUserWorkItem<TState>(Action<TState> callBack, TState state, bool preferLocal)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        Enqueue(CreateEntry(callBack, state, null), preferLocal);
        return true;
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> to have <see cref="IWorkItem.Execute"/> called once, without allocating and
    /// without flowing <see cref="ExecutionContext"/>, like
    /// <see cref="ThreadPool.UnsafeQueueUserWorkItem(IThreadPoolWorkItem, bool)"/>.
    /// </summary>
    /// <param name="callBack">The work; may be queued again while it is pending or running. Not a <see cref="Task"/>.</param>
    /// <param name="preferLocal">See <see cref="QueueUserWorkItem{TState}(Action{TState}, TState, bool)"/>.</param>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="callBack"/> is a <see cref="Task"/> (a task is
    /// started with <see cref="Task.Start(TaskScheduler)"/> on <see cref="TaskScheduler"/>, which keeps the task's own
    /// checks).</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool UnsafeQueueUserWorkItem(IWorkItem callBack, bool preferLocal)
    {
        ValidateWorkItem(callBack);
        Enqueue(new WorkItemEntry(callBack, WorkItemEntry.WorkItemMarker, null), preferLocal);
        return true;
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> to run once with <paramref name="state"/> (never boxed), as
    /// <paramref name="options"/> says: <see cref="WorkItemOptions.LongRunning"/> runs it on a dedicated thread,
    /// <see cref="WorkItemOptions.PreferLocal"/> uses the calling worker's local queue. Flows the caller's
    /// <see cref="ExecutionContext"/> when <see cref="WorkerPoolOptions.FlowExecutionContext"/> is set.
    /// </summary>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="options"/> has undefined flags.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool QueueUserWorkItem<TState>(Action<TState> callBack, TState state, WorkItemOptions options)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        ValidateOptions(options);
        Enqueue(CreateEntry(callBack, state, CaptureContext()), options);
        return true;
    }

    /// <summary>Like <see cref="QueueUserWorkItem{TState}(Action{TState}, TState, WorkItemOptions)"/> but never flows the caller's <see cref="ExecutionContext"/>.</summary>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="options"/> has undefined flags.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool UnsafeQueueUserWorkItem<TState>(Action<TState> callBack, TState state, WorkItemOptions options)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        ValidateOptions(options);
        Enqueue(CreateEntry(callBack, state, null), options);
        return true;
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> as <paramref name="options"/> says, without flowing the caller's
    /// <see cref="ExecutionContext"/> (see <see cref="QueueUserWorkItem{TState}(Action{TState}, TState, WorkItemOptions)"/>).
    /// Allocates nothing unless <see cref="WorkItemOptions.LongRunning"/> has to start a thread.
    /// </summary>
    /// <returns>Always <see langword="true"/>.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="callBack"/> is a <see cref="Task"/> (see
    /// <see cref="UnsafeQueueUserWorkItem(IWorkItem, bool)"/>), or <paramref name="options"/> has undefined flags.</exception>
    /// <exception cref="ObjectDisposedException">The pool or the lane is shutting down or has shut down.</exception>
    public bool UnsafeQueueUserWorkItem(IWorkItem callBack, WorkItemOptions options)
    {
        ValidateWorkItem(callBack);
        ValidateOptions(options);
        Enqueue(new WorkItemEntry(callBack, WorkItemEntry.WorkItemMarker, null), options);
        return true;
    }

    /// <summary>
    /// The checks of every method that takes an <see cref="IWorkItem"/>, those of
    /// <see cref="ThreadPool.UnsafeQueueUserWorkItem(IThreadPoolWorkItem, bool)"/>: not null, and not a
    /// <see cref="Task"/>, which would run its <see cref="IWorkItem.Execute"/> while the task itself stays unstarted
    /// (queued this way it would bypass <see cref="Task.Start(TaskScheduler)"/> and the task's state checks).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static void ValidateWorkItem(IWorkItem callBack)
    {
        ArgumentNullException.ThrowIfNull(callBack);
        if (callBack is Task)
        {
            ThrowWorkItemIsTask();
        }
    }

    [DoesNotReturn]
    private static void ThrowWorkItemIsTask() =>
        throw new ArgumentOutOfRangeException("callBack", "A Task cannot be queued as a work item; start it with Task.Start on the pool's TaskScheduler.");

    private static void ValidateOptions(WorkItemOptions options)
    {
        if ((options & ~(WorkItemOptions.PreferLocal | WorkItemOptions.LongRunning)) != 0)
        {
            throw new ArgumentOutOfRangeException(nameof(options), options, "Unknown work item options.");
        }
    }

    private void Enqueue(in WorkItemEntry entry, WorkItemOptions options)
    {
        if ((options & WorkItemOptions.LongRunning) != 0)
        {
            EnqueueLongRunning(entry);
        }
        else
        {
            Enqueue(entry, preferLocal: (options & WorkItemOptions.PreferLocal) != 0);
        }
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> with <paramref name="state"/> as a continuation of work this target has
    /// already accepted (an actor's mailbox that holds messages, the next step of an operation under way): it is never
    /// refused, never cancelled and never held back by a lane's bound. While the pool runs, and during its drain in
    /// both shutdown modes, it runs on the pool (a lane's continuation goes to the pool's own queue once the lane has
    /// stopped), except one accepted while the last worker leaves: the thread that completes the stop (the one in
    /// <c>Dispose</c> or <c>ShutdownAsync</c>, or that last worker) runs it, as it runs every leftover. After the pool
    /// has stopped it runs on the built-in <see cref="ThreadPool"/>, counted by
    /// <see cref="WorkerPool.RedirectedCallbackCount"/>. This is the path for integrations whose work must not be
    /// dropped once accepted (actor dispatchers); ordinary work belongs in <c>UnsafeQueueUserWorkItem</c>, which a
    /// shutdown refuses and <see cref="ShutdownMode.CancelPending"/> cancels.
    /// </summary>
    /// <remarks>
    /// Never flows the caller's <see cref="ExecutionContext"/>. Allocates nothing when <paramref name="callBack"/> is
    /// the delegate of an earlier call (keep it in a field: a static lambda, or one delegate per dispatcher): the
    /// library wraps each delegate once, for as long as the delegate lives.
    /// </remarks>
    /// <typeparam name="TState">A reference type (a value-typed state would have to be boxed).</typeparam>
    /// <param name="callBack">The work.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="preferLocal"><see langword="true"/> to use the calling worker's local queue when called from one of
    /// the pool's workers (ignored by a lane, whose items always go to its queue).</param>
    /// <exception cref="ArgumentNullException"><paramref name="callBack"/> is null.</exception>
    public void UnsafeQueueContinuation<TState>(Action<TState> callBack, TState state, bool preferLocal)
        where TState : class?
    {
        ArgumentNullException.ThrowIfNull(callBack);
        // A reference-typed TState makes Action<TState> an Action<object?> at the ABI level; see WorkItemEntry.
        ContinuationCallback wrapper = ContinuationCallback.For(ref _lastContinuation, Unsafe.As<Action<object?>>(callBack));
        Bridge.EnqueueContinuation(new WorkItemEntry(wrapper.Run, state, null), preferLocal);
    }

    // The wrapper of the last delegate given to UnsafeQueueContinuation (a one-entry cache in front of the shared table).
    private ContinuationCallback? _lastContinuation;

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static WorkItemEntry CreateEntry<TState>(Action<TState> callBack, TState state, ExecutionContext? context)
    {
        if (typeof(TState).IsValueType)
        {
            return new WorkItemEntry(new StateWorkItem<TState>(callBack, state), WorkItemEntry.WorkItemMarker, context);
        }
        // A reference-typed TState makes Action<TState> an Action<object?> at the ABI level; see WorkItemEntry.
        return new WorkItemEntry(callBack, state, context);
    }

    /// <summary>
    /// The enqueue path of new work: the scheduler's for the pool's own queue, the lane's otherwise (which waits for room
    /// or rejects when the lane is full, as its options say); throws when the pool or the lane is shutting down.
    /// </summary>
    /// <remarks>
    /// The two paths are not inlined into the public methods: those are small enough for the JIT to inline into the
    /// caller's code, and the path inside them made every call site compile the whole enqueue (the scheduler's, the
    /// lane's, the wake rule), which a cold process pays for in JIT time at each queueing loop it runs (the comparison
    /// program's cold-start scenario). One call per enqueue instead, to the path the caller asked for: a shared enqueue
    /// (every call from outside the pool) does not carry the local path's code, whose struct locals made its frame
    /// zero 0xE0 bytes of stack on every call.
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void Enqueue(in WorkItemEntry entry, bool preferLocal)
    {
        if (preferLocal)
        {
            EnqueuePreferringLocal(entry);
        }
        else
        {
            EnqueueShared(entry);
        }
    }

    /// <summary><see cref="Enqueue(in WorkItemEntry, bool)"/> for the pool's queue (or the lane's).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void EnqueueShared(in WorkItemEntry entry) => EnqueueOnPath(entry, preferLocal: false);

    /// <summary><see cref="Enqueue(in WorkItemEntry, bool)"/> for the calling worker's local queue when it is one (a lane's queue otherwise).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void EnqueuePreferringLocal(in WorkItemEntry entry) => EnqueueOnPath(entry, preferLocal: true);

    /// <summary>The body of both paths, inlined into each with <paramref name="preferLocal"/> a constant.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void EnqueueOnPath(in WorkItemEntry entry, bool preferLocal)
    {
        Lane? lane = LaneCore;
        if (lane is null)
        {
            if (!Unsafe.As<WorkerPool>(this).SchedulerCore.TryEnqueue(entry, preferLocal))
            {
                ThrowShutDown();
            }
        }
        else
        {
            Unsafe.As<WorkerPoolLane>(this).Enqueue(entry);
        }
    }
}
