namespace Spindle.Scheduling;

/// <summary>
/// The pool's I/O driver as the workers see it: readiness that busy workers collect themselves, so that the driver's
/// poller need not be woken for each event while none of them is parked.
/// </summary>
/// <remarks>
/// The protocol (the driver owns its state; see <c>Polling.EpollDriver</c>): while some worker is parked, none exists,
/// or every one runs long items (<see cref="Scheduler.WorkersAwaitWakeUp"/>), the poller waits on the kernel and
/// delivers each event at once; otherwise it sleeps and polls once per millisecond, and a worker collects what has
/// arrived before it takes from the shared queue (<see cref="HarvestIfDue"/>: a batch when its own queues are empty,
/// or one item at a look outside). A worker that parks tells the driver (<see cref="OnWorkerParked"/>) after it is on the
/// idle stack, and the poller looks at the idle count after it has let the workers harvest, so at least one of them
/// sees the other: a parked worker never waits a poll period for an event.
/// </remarks>
internal interface IIoReadiness
{
    /// <summary>
    /// A worker, before it takes from the shared queue: collects the readiness events that have arrived, without
    /// waiting, when the workers harvest (the poller sleeps between polls) and a harvest is due: more often for a
    /// <paramref name="searching"/> worker, which has no work of its own. Never throws.
    /// </summary>
    void HarvestIfDue(bool searching);

    /// <summary>A worker has pushed itself on the idle stack: the poller waits on the kernel again from now on.</summary>
    void OnWorkerParked();
}
