using System.Diagnostics.Metrics;
using System.Runtime.CompilerServices;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Telemetry;

namespace Spindle.Scheduling;

// What the lanes, one layer below, ask of the scheduler (see ILaneHost): each member forwards to the component that
// owns the state or the decision.
internal sealed partial class Scheduler : ILaneHost
{
    Instrument ILaneHost.WaitInstrument => _metrics.WaitInstrument;

    Lane? ILaneHost.LaneOfCurrentThread => Worker.LaneOfCurrentThread;

    bool ILaneHost.AnyWorkerParked => _idle.IdleCount != 0;

    [MethodImpl(MethodImplOptions.NoInlining)]
    WorkItemEntry ILaneHost.SampleWaitIfDue(in WorkItemEntry entry, Lane lane)
    {
        Worker? worker = Worker.Current;
        return PoolMetrics.ShouldSampleWait(worker) ? _metrics.SampleWait(entry, lane, worker) : entry;
    }

    bool ILaneHost.CancelsInstead(in WorkItemEntry entry, Lane lane) => _runner.CancelsInstead(entry, lane, IsCancelling);

    void ILaneHost.WakeWorkerForOutsideWork() => _idle.WakeWorkerForOutsideWork();

    void ILaneHost.WakeWorkerIfNeeded() => _idle.WakeWorkerIfNeeded();

    void ILaneHost.OnWorkUnattended() => _idle.OnWorkUnattended();
}
