using System.Threading;
using Spindle.Lanes;
using Spindle.Primitives;
using Spindle.Queues;

namespace Spindle.Scheduling;

// A worker's state, grouped by concern into structs that the worker embeds (one field each, no indirection). A
// struct's fields are the worker's to guard: only Worker's own code reads or writes them, and what another component
// needs goes through the worker's methods. Each field says who writes it.

/// <summary>The pool's components a worker calls: the same for every worker of a pool, set once at creation.</summary>
internal readonly struct WorkerServices(
    IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, IWorkerThreads threads,
    IWorkerTimers timers, ItemRunner runner)
{
    public readonly IPoolHost Pool = pool;
    public readonly WorkerPoolOptions Options = options;
    public readonly Scheduler Scheduler = scheduler;
    public readonly IdleCoordinator Idle = idle;
    public readonly IWorkerThreads Threads = threads;
    public readonly IWorkerTimers Timers = timers;
    public readonly ItemRunner Runner = runner;
    public readonly UrgentQueue Urgent = scheduler.Urgent;
    public readonly LaneSet Lanes = scheduler.Lanes;
    public readonly WorkerRoster Roster = threads.Roster;
}

/// <summary>What other components ask of a worker: flags and marks they set and the worker clears (see Worker.Requests.cs).</summary>
internal struct WorkerRequests()
{
    // Set by a waker (the idle coordinator, before it signals the blocker) when it counted this worker in the searching
    // count on its behalf; cleared by this worker's search. See Worker.MarkWokenAsSearcher.
    public volatile bool WokenAsSearcher;

    // The stall monitor's deferral protocol (see Worker.OpenDeferral): this worker's completed count when it queued a
    // lone local item without waking anyone; the monitor clears it (CAS, TryCloseDeferral) once the count has moved on,
    // or wakes a helper if it has not within a tick. -1: nothing deferred.
    public long DeferredAt = -1;

    // Set by the stall monitor when it finds outside work waiting in the global queue while no worker is parked; cleared
    // by this worker at its next look outside (LookOutside) or when it takes outside work any other way
    // (TryTakeGlobalBatch). The look comes at its next dispatch of the pool's own queue whatever its item count says,
    // so a look interval learned from short items cannot hold outside work behind dozens of long ones: the wait is
    // bounded by two of the monitor's ticks plus the item in progress. A lost race (the monitor sets the flag just after
    // a look cleared it) costs one early look, never a missed one.
    public volatile bool LookOutside;

    // Set by the stall monitor when this worker has held local work (its LIFO slot or ring) for StrandedAfterMs without
    // completing an item: it is blocked or running a long item, and the work it queued to itself waits for it. Other
    // workers that keep feeding themselves never run out of work and so never steal on their own (the pool is at its
    // thread target and nobody is parked, so the queueing woke nobody); the monitor therefore also asks every worker to
    // look outside, and a requested look steals from a stranded worker (LookOutside). Cleared by the monitor once the
    // worker completes an item or its local queues are empty (see Worker.MarkStranded); the monitor keeps its own
    // record of how long it has seen the worker so.
    public volatile bool Stranded;
}

/// <summary>A worker's pacing countdowns (owner only): telemetry samples, looks outside, timer work.</summary>
internal struct WorkerPacing()
{
    /// <summary>The pace of the items timed for the run-time histogram.</summary>
    public SamplePacer Duration;

    /// <summary>The pace of this worker's enqueues sampled for the queue-wait histogram (see Worker.ShouldSampleWait).</summary>
    public SamplePacer Wait;

    /// <summary>The pacing of looks outside (see Worker.LookOutside).</summary>
    public LookPacer Looks = LookPacer.Create();

    /// <summary>The pacing of timer work (see Worker.CheckTimers).</summary>
    public TimerPacer Timers = TimerPacer.Create();
}

/// <summary>A worker's thread and lifetime: set once by the creating thread before the thread starts (see Worker.Attach), then the exit mark.</summary>
internal struct WorkerLife
{
    public Thread? Thread;
    public ThreadInjectionReason InjectedFor;

    // Owner only: set before the stop hook runs. By then the worker may have left the worker list (a retirement), so
    // nobody would look at its local queues again: what the hook queues goes to the shared queue instead.
    public bool Exiting;
}

/// <summary>What the worker's current item is inside (this worker's thread writes; others read snapshots).</summary>
internal struct ItemScope
{
    // The lane whose item the worker is running (or has just taken), null for the pool's own queue. Set when the lane
    // set hands out a lane item (EnterLane), cleared after the item; read by other threads only as a snapshot.
    public Lane? Lane;

    // On this thread only: nesting depth of blocking regions (the thread controller counts the outermost ones).
    public int RegionDepth;
}
