using System;
using System.Diagnostics.CodeAnalysis;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Tasks;

namespace Spindle;

/// <summary>
/// A queue of a <see cref="WorkerPool"/> with its own priority class, share, concurrency cap and bound, served by the
/// pool's threads (no threads of its own). Create one with <see cref="WorkerPool.CreateLane(LaneOptions)"/>; queue to it
/// with the same methods as the pool (<see cref="WorkTarget"/>), or through its <see cref="WorkTarget.TaskScheduler"/>
/// and <see cref="WorkTarget.SynchronizationContext"/>.
/// </summary>
/// <remarks>
/// <para>Dispatch: at every dispatch a worker takes from the highest class with runnable work (High, then Normal, whose
/// members include the pool's own queue with share 1, then Low), and within a class by weighted round robin of the
/// shares. A lane's items wait only in the lane's queue, never in a worker's local queue, so no worker keeps running
/// lower-class work it holds locally while higher-class work waits. No class starves: while higher classes keep every
/// worker busy, a lower class with runnable work still starts an item at least every 10 ms (plus the length of the
/// items in progress).</para>
/// <para>Caps: at most <see cref="MaxConcurrency"/> items of the lane run at once, counting items blocked inside;
/// items waiting for a slot stay queued and hold no worker. A serial lane (cap 1) runs its items one at a time in the
/// order they were queued, each seeing the effects of the previous one. A blocking region inside a lane item lets the
/// pool add a thread, but not raise the lane's cap. The pool's starvation detection serves lanes too: a thread it adds
/// takes the highest-priority runnable work first.</para>
/// <para>Bound: a lane with <see cref="QueueLimit"/> holds at most that many queued items. When it is full, the plain
/// queueing calls (including <c>Run</c>) block (<see cref="LaneFullMode.Wait"/>) or throw
/// <see cref="WorkRejectedException"/> (<see cref="LaneFullMode.Reject"/>); the <c>TryQueueUserWorkItem</c> forms return
/// false, and the <c>QueueUserWorkItemAsync</c> forms wait without blocking. Continuations of work the lane accepted
/// (posts to its context, tasks queued to its scheduler) are never refused or delayed.</para>
/// <para>Lifetime: <see cref="Shutdown(ShutdownMode)"/> and <see cref="Dispose"/> stop the lane's intake and drain or
/// cancel its own queued work, as the pool's shutdown does, without touching other lanes. Disposing the pool shuts its
/// lanes down with it. After a lane has stopped, continuations of its work run as the pool's own work.</para>
/// </remarks>
public sealed class WorkerPoolLane : WorkTarget, IDisposable, IAsyncDisposable, ILaneHandle
{
    private readonly Lane _lane;
    private readonly LaneOptions _options;

    internal WorkerPoolLane(WorkerPool pool, Lane lane, TaskBridge bridge)
    {
        Pool = pool;
        _lane = lane;
        _options = lane.Options;
        Bind(bridge, lane, pool.FlowsExecutionContext);
        lane.Attach(this);
    }

    /// <summary>The pool whose threads serve this lane.</summary>
    public WorkerPool Pool { get; }

    internal override WorkerPool OwningPool => Pool;

    [DoesNotReturn]
    void ILaneHandle.ThrowShutDown() => ThrowShutDown();

    Exception ILaneHandle.FullException() => FullException();

    /// <summary>The lane's name, from <see cref="LaneOptions.Name"/>.</summary>
    public string Name => _options.Name;

    /// <summary>The lane's priority class.</summary>
    public LanePriority Priority => _options.Priority;

    /// <summary>The lane's weight within its class.</summary>
    public int Share => _options.Share;

    /// <summary>The most items of the lane that run at once, or null for no cap.</summary>
    public int? MaxConcurrency => _options.MaxConcurrency;

    /// <summary>The most items the lane holds queued, or null for no bound.</summary>
    public int? QueueLimit => _options.QueueLimit;

    /// <summary>What a queueing call does when the lane is full.</summary>
    public LaneFullMode FullMode => _options.FullMode;

    /// <summary>Items queued in the lane that have not started (a snapshot).</summary>
    public long PendingWorkItemCount => _lane.QueuedCount;

    /// <summary>Items of the lane running right now, blocked ones included (a snapshot).</summary>
    public int RunningWorkItemCount => _lane.RunningCount;

    /// <summary>Items of the lane that have finished running (normally or by throwing).</summary>
    public long CompletedWorkItemCount => _lane.CompletedCount;

    /// <summary>Items of the lane cancelled (never run) by the lane's shutdown or the pool's.</summary>
    public long CancelledWorkItemCount => _lane.CancelledCount;

    /// <summary>Whether the lane's shutdown, or the pool's, has begun: the lane accepts no new work.</summary>
    public bool IsShutdownStarted => _lane.IsShutdownStarted;

    /// <summary>The lane whose item the calling thread is running, or null (outside the pool's threads, or in the pool's own work).</summary>
    public static WorkerPoolLane? Current => Worker.LaneOfCurrentThread?.Handle as WorkerPoolLane;

    /// <summary>
    /// Stops the lane's intake and waits until every item it accepted has run (<see cref="ShutdownMode.Drain"/>) or
    /// until the items that have not started are cancelled and the running ones have finished
    /// (<see cref="ShutdownMode.CancelPending"/>). Other lanes and the pool go on. Idempotent; a later call with
    /// <see cref="ShutdownMode.CancelPending"/> cancels what a drain has not run yet. Called from an item of this lane it
    /// does not wait (it would wait for itself). While it waits on one of the pool's workers, the pool treats the
    /// worker as blocked and adds a thread if work is waiting.
    /// </summary>
    /// <returns>The number of the lane's items cancelled so far (<see cref="CancelledWorkItemCount"/>).</returns>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public int Shutdown(ShutdownMode mode)
    {
        ValidateMode(mode);
        _lane.BeginShutdown(mode);
        if (!IsOwnItem)
        {
            using (BlockingRegion.Enter())
            {
                _lane.Stopped.Wait();
            }
        }
        return (int)_lane.CancelledCount;
    }

    /// <summary>
    /// Like <see cref="Shutdown(ShutdownMode)"/>, but waits for the lane to stop without blocking a thread.
    /// </summary>
    /// <param name="mode">What to do with the lane's items that have not started.</param>
    /// <param name="cancellationToken">Ends the wait (the returned task is then cancelled); the lane goes on shutting
    /// down in <paramref name="mode"/>.</param>
    /// <returns>A task for the number of the lane's items cancelled, completed once the lane has stopped.</returns>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public Task<int> ShutdownAsync(ShutdownMode mode, CancellationToken cancellationToken = default)
    {
        ValidateMode(mode);
        _lane.BeginShutdown(mode);
        if (IsOwnItem)
        {
            return Task.FromResult((int)_lane.CancelledCount);
        }
        return WaitForStopAsync(cancellationToken);
    }

    private async Task<int> WaitForStopAsync(CancellationToken cancellationToken)
    {
        await _lane.Stopped.WaitAsync(cancellationToken).ConfigureAwait(false);
        return (int)_lane.CancelledCount;
    }

    /// <summary>
    /// Shuts the lane down with <see cref="ShutdownMode.Drain"/> and waits for it; see <see cref="Shutdown(ShutdownMode)"/>.
    /// Once the pool's owner has given up waiting for the pool's stop and left its running items to finish on their own
    /// (the hosting package does at the host's shutdown timeout), disposal begins the drain and returns, as the pool's
    /// own disposal then does, rather than wait again for an item that overran that timeout.
    /// </summary>
    public void Dispose()
    {
        if (Pool.LeavesRunningItemsOnDispose)
        {
            _lane.BeginShutdown(ShutdownMode.Drain);
            return;
        }
        Shutdown(ShutdownMode.Drain);
    }

    /// <summary>Like <see cref="Dispose"/> without blocking a thread.</summary>
    public ValueTask DisposeAsync()
    {
        if (Pool.LeavesRunningItemsOnDispose)
        {
            _lane.BeginShutdown(ShutdownMode.Drain);
            return ValueTask.CompletedTask;
        }
        return new(ShutdownAsync(ShutdownMode.Drain));
    }

    /// <inheritdoc/>
    public override string ToString() =>
        $"Lane '{Name}' of pool '{Pool.Name}' ({Priority}, share {Share}, cap {MaxConcurrency?.ToString(System.Globalization.CultureInfo.InvariantCulture) ?? "none"}, pending {PendingWorkItemCount}, running {RunningWorkItemCount})";

    /// <summary>
    /// Whether the calling thread is running an item of this lane: on a worker, or off the workers with one of the lane's
    /// slots (a leftover of the pool's shutdown, an entry after the lane's stop), where the lane's stop waits for it too.
    /// </summary>
    private bool IsOwnItem => Worker.LaneOfCurrentThread == _lane || Lane.AfterStopLaneOfCurrentThread == _lane;

    private static void ValidateMode(ShutdownMode mode)
    {
        if (!Enum.IsDefined(mode))
        {
            throw new ArgumentOutOfRangeException(nameof(mode), mode, "Unknown shutdown mode.");
        }
    }

    /// <summary>The plain enqueue path: waits for room or rejects as the options say; throws once the lane is shutting down.</summary>
    internal void Enqueue(in WorkItemEntry entry)
    {
        switch (_lane.TryEnqueue(entry, mayWaitForRoom: _options.FullMode == LaneFullMode.Wait))
        {
            case EnqueueStatus.Accepted:
                return;
            case EnqueueStatus.Full:
                throw FullException();
            default:
                ThrowShutDown();
                return;
        }
    }

    /// <summary>
    /// What a plain queueing call (<c>QueueUserWorkItem</c>, <c>Run</c>) throws when the lane answered full: the
    /// rejection of a <see cref="LaneFullMode.Reject"/> lane, or, in <see cref="LaneFullMode.Wait"/> mode, the refusal to
    /// let an item of this capped lane wait for room in it.
    /// </summary>
    internal override Exception FullException() =>
        _options.FullMode == LaneFullMode.Reject
            ? WorkRejectedException.ForFullLane(_options)
            : new InvalidOperationException(
                $"The lane '{Name}' is full, and an item of the lane cannot wait for room in it: it holds one of the lane's " +
                "slots, so the wait could wait for itself. Use TryQueueUserWorkItem or QueueUserWorkItemAsync.");

    /// <inheritdoc/>
    [DoesNotReturn]
    internal override void ThrowShutDown() =>
        throw new ObjectDisposedException(GetType().FullName,
            Pool.IsShutdownStarted
                ? $"The worker pool '{Pool.Name}' is shut down or shutting down, and its lane '{Name}' accepts no more work."
                : $"The lane '{Name}' of worker pool '{Pool.Name}' is shut down or shutting down and accepts no more work.");
}
