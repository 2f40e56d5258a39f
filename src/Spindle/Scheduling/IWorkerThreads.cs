using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>
/// What the scheduling layer asks of the thread layer's controller: the live workers, the thread count against its
/// target, and the decisions that change it (add, retire, exit at shutdown, open or close a blocking region). The
/// controller owns all of this state; workers, the scheduler and the idle coordinator read it and ask for changes only
/// through these members.
/// </summary>
internal interface IWorkerThreads
{
    /// <summary>The workers, their count and the target (read without calls; changed only by the controller).</summary>
    WorkerRoster Roster { get; }

    /// <summary>The thread count below which idle workers do not retire.</summary>
    int MinThreads { get; }

    /// <summary>Whether shutdown's drain still waits for items that promised to run (timers mid-fire, long items).</summary>
    bool HasDrainHolds { get; }

    /// <summary>Adds a worker while below the target; false at the target, at the limit, or when creation failed.</summary>
    bool TryAddWorker(ThreadInjectionReason reason);

    /// <summary>
    /// Adds a worker for an enqueue that found nobody free, only below the target without the starvation boost
    /// (<see cref="WorkerRoster.IsBelowDemandTarget"/>): a ramp's threads are the ramp's to start.
    /// </summary>
    bool TryAddWorkerBelowDemandTarget();

    /// <summary>Whether a refused thread start is waiting for its retry (no thread can be added before it).</summary>
    bool CreationRetryPending { get; }

    /// <summary>The calling worker asks to retire; true when it must exit now (its thread count was given back).</summary>
    bool TryRetire(Worker worker, ThreadInjectionReason reason);

    /// <summary>The calling worker asks to exit because the pool is shutting down and nothing it could run is left.</summary>
    bool TryExitForShutdown(Worker worker);

    /// <summary>
    /// An enqueue that raced with the stop: true when the entry was accepted to run before the pool stops (the caller
    /// then queues it), false when it must be refused.
    /// </summary>
    bool TryAcceptBeforeStop(Scheduler scheduler, in WorkItemEntry entry);

    /// <summary>The calling worker continues the start-up ramp (adds the next threads, one or two, if the ramp asks for them).</summary>
    void ContinueRamp(Worker worker);

    /// <summary>The worker's thread is about to end: its count and slot are given back.</summary>
    void OnWorkerExited(Worker worker);

    /// <summary>The calling worker enters a blocking region (the thread target is raised while it lasts).</summary>
    void EnterBlockingRegion(Worker worker);

    /// <summary>The calling worker leaves its blocking region.</summary>
    void ExitBlockingRegion(Worker worker);

    /// <summary>An item returned with a blocking region still open: the region is closed for it.</summary>
    void CloseAbandonedRegion(Worker worker);
}
