namespace Spindle.Queues;

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
/// The owner of an entry (<see cref="Queues.WorkItemEntry.FindShutdownOwner"/>) is the item itself for an
/// <see cref="IWorkItem"/> entry (the interface is internal, so no user item implements it). For a delegate entry it is
/// the entry's state (timers, wait registrations, Run items) or the delegate's target (posted continuations, the task
/// scheduler), and only when the owner's <see cref="QueuedCallback"/> is that very delegate: user work that merely
/// passes one of these objects as its state, or binds a delegate to one, stays a plain work item.
/// </remarks>
internal interface IShutdownAware
{
    /// <summary>The delegate this object's entries are queued with (null when it is queued as an <see cref="IWorkItem"/>).</summary>
    object? QueuedCallback { get; }

    /// <summary>
    /// Shutdown with <see cref="ShutdownMode.CancelPending"/> met this object's entry before it started. For
    /// <see cref="ShutdownOutcome.Cancelled"/> and <see cref="ShutdownOutcome.AlreadyEnded"/> the object has already
    /// reported the cancellation to whoever waits for it (a task completing as cancelled); the entry is then dropped.
    /// </summary>
    ShutdownOutcome OnCancelPending();

    /// <summary>
    /// Whether running this object's entry now would do nothing because its work has ended (a firing of a timer that
    /// has been disposed since): a callback redirected after the pool's stop is then neither run nor counted.
    /// </summary>
    bool HasEnded => false;
}
