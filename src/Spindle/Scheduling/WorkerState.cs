using System.Runtime.InteropServices;
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
    public readonly WorkSources Sources = scheduler.Sources;
    public readonly LaneSet Lanes = scheduler.Lanes;
    public readonly WorkerRoster Roster = threads.Roster;
}

/// <summary>A worker's pacing countdowns (owner only): telemetry samples, looks outside, timer work.</summary>
/// <remarks>
/// The owner counts these down for every item, while other threads read the worker's other fields (a thief its
/// <see cref="Worker.Local"/> and <see cref="Worker.Record"/>, a waker its blocker, the stall monitor its requests): the
/// pads keep those reads off the lines these writes invalidate.
/// </remarks>
[StructLayout(LayoutKind.Sequential)]
internal struct WorkerPacing()
{
    private CacheLinePad _before;

    /// <summary>The pace of the items timed for the run-time histogram.</summary>
    public SamplePacer Duration;

    /// <summary>The pace of this worker's enqueues sampled for the queue-wait histogram (see Worker.ShouldSampleWait).</summary>
    public SamplePacer Wait;

    /// <summary>The pacing of looks outside (see Worker.TryBeginLook and WorkSources.TakeForLook).</summary>
    public LookPacer Looks = LookPacer.Create();

    /// <summary>The pacing of timer work (see Worker.CheckTimers).</summary>
    public TimerPacer Timers = TimerPacer.Create();

    private CacheLinePad _after;
}

/// <summary>A worker's thread and lifetime: set once by the creating thread before the thread starts (see Worker.Attach), then the exit mark.</summary>
internal struct WorkerLife
{
    public Thread? Thread;
    public ThreadInjectionReason InjectedFor;
    private CacheLineGuard? _threadGuard;

    /// <summary>The creating thread, right after it made <paramref name="thread"/>: see Worker.Attach.</summary>
    public void Attach(Thread thread, ThreadInjectionReason reason)
    {
        Thread = thread;
        InjectedFor = reason;
        // The thread object is read on every item (PoolThreadState.Reset): its lines must not be shared with what the
        // creating thread allocates next, the next worker's parts, which that worker writes on every item. A guard
        // allocated now sits between them.
        _threadGuard = new CacheLineGuard();
    }

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
}
