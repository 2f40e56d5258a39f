namespace Spindle;

/// <summary>
/// Why a <see cref="WorkerPool"/> added or removed a thread. The pool counts every decision by reason; read the counts
/// with <see cref="WorkerPool.GetThreadInjectionCount(ThreadInjectionReason)"/>.
/// </summary>
public enum ThreadInjectionReason
{
    /// <summary>Work arrived while no worker was idle and the pool was below its current thread target.</summary>
    Demand,

    /// <summary>
    /// Work waited while every worker was busy and no item completed for the starvation threshold (the workers are
    /// presumably blocked), so the monitor added threads.
    /// </summary>
    Starvation,

    /// <summary>A work item entered a blocking region (<see cref="WorkerPool.EnterBlockingRegion"/>) while work was waiting.</summary>
    BlockingRegion,

    /// <summary>A dedicated thread was started for an item queued with <see cref="WorkItemOptions.LongRunning"/>.</summary>
    LongRunning,

    /// <summary>The minimum thread count was raised (<see cref="WorkerPool.SetThreadLimits(int, int)"/>) and threads were started to meet it.</summary>
    MinimumRaised,

    /// <summary>A thread could not be created (the OS or runtime refused it); the creation is retried with backoff.</summary>
    CreationFailed,

    /// <summary>A worker above the minimum exited after staying idle for <see cref="WorkerPoolOptions.IdleTimeout"/>.</summary>
    RetiredIdle,

    /// <summary>
    /// A worker exited because the pool had more threads than its current target: a blocking region ended, a starvation
    /// episode was over, or the maximum was lowered.
    /// </summary>
    RetiredSurplus,
}
