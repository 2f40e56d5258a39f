using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Threading;

namespace Spindle.Tasks;

/// <summary>
/// The task bridge: what the pool's, or a lane's, <see cref="WorkerPoolTaskScheduler"/> and
/// <see cref="WorkerPoolSynchronizationContext"/> queue through, and the queueing of Run items (see RunWorkItem.cs for
/// the token protocol).
/// </summary>
/// <remarks>
/// <para>Every Run overload, with a token or without, has one model: the queued entry is a RunWorkItem (a
/// TaskCompletionSource that is also the work item; Run(Action) with a token that cannot be cancelled uses the slimmer
/// ActionRunItem, with the same outcomes; RunAsValueTask uses a pooled ValueTaskRunItem), and the delegate
/// runs with the pool's SynchronizationContext installed, so its awaits come back to the pool through Post, which
/// queues without allocating. TaskScheduler.Current inside is TaskScheduler.Default, as inside Task.Run. A cancellable
/// token cancels the item the moment it fires; shutdown with CancelPending cancels it through its task. An async
/// delegate whose task has not completed holds the pool's drain (ThreadController.Lifetime.cs), so Dispose waits for
/// it too.</para>
/// <para>State (owned here): the target it serves, attached once before the target is published. Work goes in through the
/// scheduler's narrow surface (TryEnqueue, EnqueueContinuation) and the dedicated threads; drain holds through the
/// thread controller.</para>
/// <para>The three queueing methods (QueueActionRun, QueueRunItem, QueueValueTaskItem) are compiled fully optimised at
/// their first call (<see cref="MethodImplOptions.AggressiveOptimization"/>), with the scheduler's enqueue inlined into
/// them. Under tiered compilation they would start at tier 0, and call counting, which promotes them, begins only once
/// the process has compiled no new tier-0 method for 100 ms: a process whose pool, timers and monitor keep reaching
/// code for the first time keeps postponing it. Traced on 2 cores (perf, with the runtime's perf map), a producer
/// calling Run(Action) from outside in batches of 1,000 still ran QueueActionRun at tier 0 or instrumented 3-5 s into
/// the process. Compiled this way, medians of interleaved runs timed 3 s in: 6.1M to 7.4M tasks/s, and 4.7M to 8.8M in a
/// process that also made one reflection call per batch (its stubs are tier-0 compilations). They give up dynamic PGO,
/// which has nothing to devirtualise on this path.</para>
/// </remarks>
internal sealed class TaskBridge
{
    private ITaskTarget _target = null!;
    private SynchronizationContext? _context;

    public TaskBridge(IPoolHost pool, Scheduler scheduler, ThreadController threads, DedicatedThreads dedicated, Lane? lane = null)
    {
        Pool = pool;
        Scheduler = scheduler;
        Threads = threads;
        Dedicated = dedicated;
        Lane = lane;
    }

    /// <summary>The lane this bridge queues to, or null for the pool's own queue.</summary>
    public Lane? Lane { get; }

    /// <summary>The façade's target, once it attached itself (before it is published): the pool or the lane.</summary>
    public void Attach(ITaskTarget target)
    {
        Debug.Assert(_target is null, "A bridge serves one target.");
        _target = target;
    }

    /// <summary>
    /// Whether the calling thread may run this bridge's work inline: a thread of the pool; for a lane, one running an item
    /// of the lane, or an entry of the stopped lane on its after-stop path (either holds one of the lane's slots, so its
    /// cap holds, and work queued to the lane from there would wait behind that very slot).
    /// </summary>
    public bool IsOwnThread =>
        Lane is null ? PoolThreads.CurrentPool == Pool : Worker.LaneOfCurrentThread == Lane || Lane.AfterStopLaneOfCurrentThread == Lane;

    /// <summary>Queues a continuation (never throws): to the lane's queue, or the scheduler's continuation path.</summary>
    public void EnqueueContinuation(in WorkItemEntry entry, bool preferLocal)
    {
        if (Lane is null)
        {
            Scheduler.EnqueueContinuation(entry, preferLocal);
        }
        else
        {
            Lane.EnqueueContinuation(entry);
        }
    }

    /// <summary>
    /// An entry (<paramref name="callback"/>, <paramref name="state"/>) this bridge queued has become pointless (its task
    /// ran inline): for the pool, the calling worker takes it back if it is still the newest of its own queue (see
    /// <see cref="Scheduler.TryTakeBackNewestLocal"/>); for a lane, whose queue is shared, a recent entry keeps its place
    /// but holds <paramref name="replacement"/> instead of the state (see <see cref="Lane.TryReplaceRecentState"/>), which
    /// the callback must run as nothing. Either way the queue no longer keeps the state reachable. Best effort: returns
    /// false, changing nothing, when the entry was not found where it is looked for.
    /// </summary>
    public bool ReleaseQueuedEntry(object callback, object state, object replacement) =>
        Lane is null ? Scheduler.TryTakeBackNewestLocal(callback, state) : Lane.TryReplaceRecentState(callback, state, replacement);

    /// <summary>
    /// Queues a long-running task: on a dedicated thread for the pool; through the lane's queue, in a blocking region,
    /// for a lane. Never throws (a long-running task during shutdown runs as ordinary work).
    /// </summary>
    public void EnqueueLongRunningContinuation(in WorkItemEntry entry)
    {
        if (Lane is null)
        {
            if (!Dedicated.TryEnqueue(entry))
            {
                Scheduler.EnqueueContinuation(entry, preferLocal: false);
            }
        }
        else
        {
            Lane.EnqueueContinuation(Lane.LongRunningEntry(entry));
        }
    }

    /// <summary>Debugger support: visits the states of this bridge's queued entries whose callback is <paramref name="callback"/>.</summary>
    public void VisitQueuedStates(Action<object?> visit, object callback)
    {
        if (Lane is null)
        {
            Scheduler.Sources.VisitQueuedStates(visit, callback);
        }
        else
        {
            Lane.VisitQueuedStates(visit, callback);
        }
    }

    /// <summary>
    /// Queues a new Run item: the scheduler's enqueue, or the lane's (which waits for room or rejects as its options say;
    /// a cancellation of <paramref name="cancellationToken"/> ends the wait, and nothing is queued).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private EnqueueStatus TryEnqueueRun(in WorkItemEntry entry, CancellationToken cancellationToken = default)
    {
        if (Lane is null)
        {
            return Scheduler.TryEnqueue(entry, preferLocal: true) ? EnqueueStatus.Accepted : EnqueueStatus.ShutDown;
        }
        return Lane.TryEnqueue(entry, mayWaitForRoom: Lane.Options.FullMode == LaneFullMode.Wait, cancellationToken);
    }

    private void ThrowRefused(EnqueueStatus status)
    {
        if (status == EnqueueStatus.Full && Lane is not null)
        {
            throw _target.FullException();
        }
        _target.ThrowShutDown();
    }

    public IPoolHost Pool { get; }

    public Scheduler Scheduler { get; }

    public ThreadController Threads { get; }

    public DedicatedThreads Dedicated { get; }

    /// <summary>The target's synchronization context, which Run items install while the caller's delegate runs.</summary>
    /// <remarks>Kept after the first ask (the target publishes its one context once, by CAS), so that a Run item reads a
    /// field instead of calling the target; a race only reads the same object twice.</remarks>
    public SynchronizationContext SynchronizationContext => _context ??= _target.SynchronizationContext;

    /// <summary>Whether the pool has stopped (continuations then run elsewhere).</summary>
    public bool HasStopped => Threads.HasStopped;

    /// <summary>An async Run item's task is still running: hold the drain.</summary>
    public void AcquireDrainHold()
    {
        Threads.AcquireDrainHold();
        Lane?.AcquireHold();
    }

    /// <summary>An async Run item's task has completed.</summary>
    public void ReleaseDrainHold()
    {
        Lane?.ReleaseHold();
        Threads.ReleaseDrainHold();
    }

    internal static InvalidOperationException NullTaskException() => new("The asynchronous delegate returned a null task.");

    /// <summary>Queues a Run item; throws (having cancelled the item's task) when the pool is shutting down.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public Task<TResult> QueueRunItem<TResult>(Delegate work, RunKind kind, ExecutionContext? context, CancellationToken cancellationToken)
    {
        var item = new RunWorkItem<TResult>(this, work, kind, cancellationToken);
        if (cancellationToken.CanBeCanceled)
        {
            // Registered before the item is queued, so that the registration exists whenever a worker could unregister it.
            item.RegisterCancellation();
        }
        EnqueueStatus status = TryEnqueueRun(new WorkItemEntry(RunWorkItem<TResult>.RunCallback, item, context), cancellationToken);
        if (status == EnqueueStatus.Cancelled)
        {
            item.CancelUnqueued(); // the token ended the wait for room: the task is cancelled, as for a token cancelled at the call
        }
        else if (status != EnqueueStatus.Accepted)
        {
            item.CancelByShutdown(); // never queued: not counted as cancelled by shutdown, the caller gets the exception
            ThrowRefused(status);
        }
        return item.Task;
    }

    /// <summary>
    /// Queues a <c>Run(Action)</c> whose token cannot be cancelled (see <see cref="ActionRunItem"/>); throws when the
    /// pool is shutting down.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public Task QueueActionRun(Action action, ExecutionContext? context)
    {
        var item = new ActionRunItem(this, action);
        EnqueueStatus status = TryEnqueueRun(new WorkItemEntry(ActionRunItem.RunCallback, item, context));
        if (status != EnqueueStatus.Accepted)
        {
            item.Cancel(); // never queued: not counted as cancelled by shutdown, the caller gets the exception
            ThrowRefused(status);
        }
        return item.Task;
    }

    /// <summary>Queues a pooled value-task Run item; throws when the pool is shutting down.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public ValueTaskRunItem<TResult> QueueValueTaskItem<TResult>(Delegate work, bool isFunc, ExecutionContext? context, out short version, CancellationToken cancellationToken)
    {
        ValueTaskRunItem<TResult> item = ValueTaskRunItem<TResult>.Rent(this, work, isFunc, cancellationToken);
        version = item.Version; // read before queueing: once it has run and been read, the item is reused
        if (cancellationToken.CanBeCanceled)
        {
            item.RegisterCancellation();
        }
        EnqueueStatus status = TryEnqueueRun(new WorkItemEntry(ValueTaskRunItem<TResult>.RunCallback, item, context), cancellationToken);
        if (status == EnqueueStatus.Cancelled)
        {
            item.CancelUnqueued(); // the token ended the wait for room: the caller's value task is cancelled
        }
        else if (status != EnqueueStatus.Accepted)
        {
            item.CancelByShutdown(); // releases the queue's share; the caller never sees the item
            ThrowRefused(status);
        }
        return item;
    }
}
