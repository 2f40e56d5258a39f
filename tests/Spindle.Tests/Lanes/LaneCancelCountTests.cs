using System.Diagnostics.Metrics;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Lanes;

/// <summary>
/// Who counts a lane's item that a cancelling shutdown drops: the lane always, and the pool whenever the pool is
/// cancelling, even when the caller read the pool's state just before the pool began to cancel.
/// </summary>
public sealed class LaneCancelCountTests
{
    [Fact]
    public void AnItemDroppedBecauseThePoolBeganCancelling_IsCountedByThePool_ThoughTheCallersReadWasStale()
    {
        var host = new FakeLaneHost();
        Lane lane = NewLane(host);
        var runner = new ItemRunner(pool: null!);

        bool poolCancellingAsReadByTheCaller = host.IsCancelling; // false
        host.IsCancelling = true; // the pool's shutdown begins to cancel between the caller's read and the lane's

        Assert.True(runner.CancelsInstead(Numbered(1), lane, poolCancellingAsReadByTheCaller));
        Assert.Equal(1, lane.CancelledCount);
        Assert.Equal(1, runner.CancelledCount);
    }

    [Fact]
    public void AnItemDroppedByTheLanesOwnCancel_IsCountedByTheLaneAlone()
    {
        var host = new FakeLaneHost();
        Lane lane = NewLane(host);
        var runner = new ItemRunner(pool: null!);
        Assert.True(lane.BeginShutdown(ShutdownMode.CancelPending)); // the lane alone: its queue is empty

        Assert.True(runner.CancelsInstead(Numbered(2), lane, poolCancelling: false));
        Assert.Equal(1, lane.CancelledCount);
        Assert.Equal(0, runner.CancelledCount);
    }

    [Fact]
    public void NothingIsDroppedWhileNeitherCancels()
    {
        var host = new FakeLaneHost();
        Lane lane = NewLane(host);
        var runner = new ItemRunner(pool: null!);

        Assert.False(runner.CancelsInstead(Numbered(3), lane, poolCancelling: false));
        Assert.False(runner.CancelsInstead(Numbered(4), lane: null, poolCancelling: false));
        Assert.Equal(0, lane.CancelledCount);
        Assert.Equal(0, runner.CancelledCount);
    }

    private static Lane NewLane(FakeLaneHost host) =>
        new(new LaneSet(host, starvationIntervalMs: null), host, new LaneOptions { Name = "counted" });

    /// <summary>A pool as a lane sees it, with only its cancelling state to set.</summary>
    private sealed class FakeLaneHost : ILaneHost
    {
        private static readonly Meter s_meter = new("Spindle.Tests.LaneCancelCount");
        private static readonly Instrument s_instrument = s_meter.CreateHistogram<double>("wait");

        public bool IsShutdownStarted => IsCancelling;

        public bool IsCancelling { get; set; }

        public Instrument WaitInstrument => s_instrument;

        public Lane? LaneOfCurrentThread => null;

        public bool AnyWorkerParked => false;

        public void EnqueueContinuation(in WorkItemEntry entry, bool preferLocal) => throw new System.NotSupportedException();

        public void RunElsewhere(in WorkItemEntry entry) => throw new System.NotSupportedException();

        public bool CancelsInstead(in WorkItemEntry entry, Lane lane) => throw new System.NotSupportedException();

        public WorkItemEntry SampleWaitIfDue(in WorkItemEntry entry, Lane lane) => entry;

        public void WakeWorkerForOutsideWork()
        {
        }

        public void WakeWorkerIfNeeded()
        {
        }

        public void OnWorkUnattended()
        {
        }
    }
}
