using System.Diagnostics.Metrics;
using Spindle.Queues;

namespace Spindle.Lanes;

/// <summary>
/// What lanes ask of the pool's scheduler, which sits above them: its shutdown state, a queue for entries that hold a
/// slot (the pool's continuations), the cancel-or-run decision for a queued entry, the queue-wait sampling, which lane
/// the calling thread serves, and wakes. Implemented by the scheduler; a lane holds it instead of the scheduler.
/// </summary>
internal interface ILaneHost
{
    /// <summary>Whether the pool's shutdown has begun.</summary>
    bool IsShutdownStarted { get; }

    /// <summary>Whether the pool's shutdown cancels queued work.</summary>
    bool IsCancelling { get; }

    /// <summary>
    /// The queue-wait histogram: while a listener has it enabled, a lane's enqueue asks <see cref="SampleWaitIfDue"/>. A
    /// lane reads its <see cref="Instrument.Enabled"/> on every enqueue, so it keeps the instrument, not a call to make.
    /// </summary>
    Instrument WaitInstrument { get; }

    /// <summary>The lane of the item the calling thread runs (a worker's or the relief thread's); null elsewhere.</summary>
    Lane? LaneOfCurrentThread { get; }

    /// <summary>Queues <paramref name="entry"/> as the pool's continuation: on the pool while it runs or drains, elsewhere after its stop.</summary>
    void EnqueueContinuation(in WorkItemEntry entry, bool preferLocal);

    /// <summary>
    /// The pool's one cancel-or-run decision for an entry of <paramref name="lane"/> that has not started: true when a
    /// cancelling shutdown (the lane's or the pool's) drops it instead of running it, counted and its owner told.
    /// </summary>
    bool CancelsInstead(in WorkItemEntry entry, Lane lane);

    /// <summary>
    /// The calling thread's wait pacer chooses whether this enqueue is sampled: returns the entry to queue (a wrapper
    /// that records its wait when it starts, or <paramref name="entry"/> itself).
    /// </summary>
    WorkItemEntry SampleWaitIfDue(in WorkItemEntry entry, Lane lane);

    /// <summary>A lane item was published and a slot is free: wake a worker if nobody looks (else tell the relief thread).</summary>
    void WakeWorkerForOutsideWork();

    /// <summary>Wakes a parked worker if nobody searches.</summary>
    void WakeWorkerIfNeeded();

    /// <summary>Whether some worker is parked (a snapshot).</summary>
    bool AnyWorkerParked { get; }

    /// <summary>Work waits that no worker was woken for: the relief thread may have to take it.</summary>
    void OnWorkUnattended();
}
