namespace Spindle.Scheduling;

/// <summary>What shutdown with <see cref="ShutdownMode.CancelPending"/> does with a queued entry that has not started.</summary>
internal enum ShutdownOutcome
{
    /// <summary>Dropped without running, and counted in the figure <see cref="WorkerPool.Shutdown(ShutdownMode)"/> returns.</summary>
    Cancelled,

    /// <summary>Dropped without running and not counted: the item had already ended (its own token cancelled it).</summary>
    AlreadyEnded,

    /// <summary>Run anyway: a continuation or a firing of work the pool accepted earlier.</summary>
    Run,
}

/// <summary>
/// An object of the library's own that the pool queues, and that decides for itself what shutdown with
/// <see cref="ShutdownMode.CancelPending"/> does with its entry. An entry with no such owner is a plain work item: it is
/// cancelled and counted. So a new kind of item states its policy here, and the scheduler never tests for types.
/// </summary>
/// <remarks>
/// The owner of an entry (<see cref="Queues.WorkItemEntry.FindShutdownOwner"/>) is, in this order: the item itself for
/// an <see cref="IWorkItem"/> entry; the target of the entry's callback when that is an instance method of an owner
/// (posted continuations, the task scheduler); the entry's state when its <see cref="QueuedCallback"/> is the entry's
/// callback (timers, wait registrations, Run items). The last test keeps user work that merely passes one of these
/// objects as its state a plain work item. The interface is internal, so user code cannot implement it.
/// </remarks>
internal interface IShutdownAware
{
    /// <summary>The callback this object's entries carry it with as their state; null when it is queued otherwise.</summary>
    object? QueuedCallback { get; }

    /// <summary>
    /// Shutdown with <see cref="ShutdownMode.CancelPending"/> met this object's entry before it started. For
    /// <see cref="ShutdownOutcome.Cancelled"/> and <see cref="ShutdownOutcome.AlreadyEnded"/> the object has already
    /// reported the cancellation to whoever waits for it (a task completing as cancelled); the entry is then dropped.
    /// </summary>
    ShutdownOutcome OnCancelPending();
}
