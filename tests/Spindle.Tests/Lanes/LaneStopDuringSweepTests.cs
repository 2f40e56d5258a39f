using System.Collections.Generic;
using Spindle.Lanes;
using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Lanes;

/// <summary>
/// A lane's cancel sweep takes the entries that must run anyway out of its queue and puts them back. The pool's stop
/// does not wait for that (a drain of the pool can end while the lane's owner cancels the lane), and a stopped lane
/// takes nothing from its queue: what the sweep keeps must then go where continuations of a stopped lane go, or it
/// would never run. A sweep of a lane that has already stopped (a later shutdown call of a stopped pool) leaves the
/// lane's after-stop entries to the drive that serves them.
/// </summary>
public sealed class LaneStopDuringSweepTests
{
    [Fact]
    public void PoolStopsDuringTheSweepOfAnUncappedLane_TheKeptEntriesGoToThePool_InTheirOrder()
    {
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("swept");
        for (int i = 1; i <= 3; i++)
        {
            lane.EnqueueContinuation(Numbered(i));
        }
        host.OnFirstDecision = lane.OnPoolStopped; // the pool's drain ends while the sweep holds what it took

        Assert.True(lane.BeginShutdown(ShutdownMode.CancelPending));

        Assert.True(lane.HasStopped);
        Assert.Equal([1, 2, 3], host.HandedOnNumbers());
        Assert.Equal(0, lane.QueuedCount);
    }

    [Fact]
    public void PoolStopsDuringTheSweepOfASerialLane_KeptAndLateEntriesRunOneAtATime_InOrder()
    {
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("swept", cap: 1);
        lane.EnqueueContinuation(Numbered(1));
        lane.EnqueueContinuation(Numbered(2));
        host.OnFirstDecision = () =>
        {
            lane.OnPoolStopped();
            lane.EnqueueContinuation(Numbered(3)); // arrives during the sweep: held behind what the sweep keeps
        };

        Assert.True(lane.BeginShutdown(ShutdownMode.CancelPending));

        // The lane's cap still holds after its stop: one entry handed on at a time, the next when it has run.
        var ran = new List<int>();
        while (host.TryTakeHandedOn(out WorkItemEntry handedOn))
        {
            Assert.Empty(host.HandedOn); // never two at once
            ran.Add(NumberOf(RecordingLaneHost.Unwrapped(handedOn)));
            handedOn.Invoke();
        }
        Assert.Equal([1, 2, 3], ran);
        Assert.Equal(0, lane.QueuedCount);
        Assert.Equal(0, lane.RunningCount);
    }

    [Fact]
    public void SweepOfAStoppedSerialLane_TakesNothing_AndItsAfterStopDriveRunsWhatIsQueued()
    {
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("swept", cap: 1);
        lane.CloseForPool();
        lane.OnPoolStopped();
        lane.EnqueueContinuation(Numbered(1)); // handed on at once, holding the lane's slot
        lane.EnqueueContinuation(Numbered(2)); // waits in the lane's queue for that slot
        Assert.True(host.TryTakeHandedOn(out WorkItemEntry first));
        Assert.Equal(1, NumberOf(RecordingLaneHost.Unwrapped(first)));
        host.IsCancelling = true; // a later shutdown call of the stopped pool
        int decisions = host.Decisions;

        lane.CancelQueuedNow();

        Assert.Equal(decisions, host.Decisions);
        Assert.Equal(1, lane.QueuedCount);
        Assert.Empty(host.HandedOn);
        first.Invoke(); // gives the slot back: the drive takes the queued entry, deciding on it as it takes it
        Assert.True(host.TryTakeHandedOn(out WorkItemEntry second));
        Assert.Equal(2, NumberOf(RecordingLaneHost.Unwrapped(second)));
        Assert.Equal(decisions + 1, host.Decisions);
        second.Invoke();
        Assert.Equal(0, lane.RunningCount);
    }
}
