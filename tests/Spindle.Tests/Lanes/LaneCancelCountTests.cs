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
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("counted");
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
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("counted");
        var runner = new ItemRunner(pool: null!);
        Assert.True(lane.BeginShutdown(ShutdownMode.CancelPending)); // the lane alone: its queue is empty

        Assert.True(runner.CancelsInstead(Numbered(2), lane, poolCancelling: false));
        Assert.Equal(1, lane.CancelledCount);
        Assert.Equal(0, runner.CancelledCount);
    }

    [Fact]
    public void NothingIsDroppedWhileNeitherCancels()
    {
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("counted");
        var runner = new ItemRunner(pool: null!);

        Assert.False(runner.CancelsInstead(Numbered(3), lane, poolCancelling: false));
        Assert.False(runner.CancelsInstead(Numbered(4), lane: null, poolCancelling: false));
        Assert.Equal(0, lane.CancelledCount);
        Assert.Equal(0, runner.CancelledCount);
    }
}
