namespace Spindle.Scheduling;

/// <summary>
/// What the scheduling layer tells the thread layer's stall monitor: a worker deferred a wake (the monitor checks that
/// the deferred work is taken in time), and no worker may be parked any more (the monitor must then watch on its own).
/// </summary>
internal interface IStallWatch
{
    /// <summary>The enqueueing worker deferred waking a peer for the item it queued (see the monitor's deferral protocol).</summary>
    void OpenDeferral(Worker worker);

    /// <summary>A worker left the parked set: if none is parked now, the monitor's own timed watch must be on.</summary>
    void EnsureMonitorIfNoneIdle();
}
