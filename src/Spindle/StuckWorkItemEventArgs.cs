using System;

namespace Spindle;

/// <summary>
/// Describes a work item that has been running on a worker for longer than the pool's
/// <see cref="WorkerPoolOptions.StuckItemThreshold"/>, raised through <see cref="WorkerPool.StuckWorkItemDetected"/>.
/// </summary>
public sealed class StuckWorkItemEventArgs : EventArgs
{
    internal StuckWorkItemEventArgs(WorkerPool pool, string description, string? workerThreadName, int managedThreadId,
        TimeSpan runningTime, string? laneName)
    {
        Pool = pool;
        Description = description;
        WorkerThreadName = workerThreadName;
        ManagedThreadId = managedThreadId;
        RunningTime = runningTime;
        LaneName = laneName;
    }

    /// <summary>The pool whose worker runs the item.</summary>
    public WorkerPool Pool { get; }

    /// <summary>
    /// What the item is: for a delegate, its method's declaring type and name (<c>Namespace.Type.Method</c>); for an
    /// <see cref="IWorkItem"/>, its type; for a task of <see cref="WorkTarget.TaskScheduler"/>, <c>Task {Id}</c> with the
    /// task's type when it is not a plain task. The pool's own wrappers (<c>Run</c> items, posted callbacks, timers,
    /// registered waits) are named by the delegate they wrap. Prefixed by <c>lane '{name}': </c> for an item of a lane.
    /// Meant for people: its format may change.
    /// </summary>
    public string Description { get; }

    /// <summary>
    /// The name of the worker thread that runs the item (<c>{prefix} #{n}</c>, see
    /// <see cref="WorkerPoolOptions.ThreadNamePrefix"/>; <c>{prefix} relief</c> for the pool's relief thread, see
    /// <see cref="WorkerPoolOptions.OutsideWorkReliefDelay"/>).
    /// </summary>
    public string? WorkerThreadName { get; }

    /// <summary>The <see cref="System.Threading.Thread.ManagedThreadId"/> of the thread that runs the item, a worker or the relief thread (to find its stack in a dump).</summary>
    public int ManagedThreadId { get; }

    /// <summary>
    /// How long the item has been running, at least: measured from the first look of the pool's detector that saw it,
    /// so the item may have started up to a quarter threshold earlier. Never below the threshold.
    /// </summary>
    public TimeSpan RunningTime { get; }

    /// <summary>The name of the lane the item came from, or <see langword="null"/> for the pool's own queue.</summary>
    public string? LaneName { get; }
}
