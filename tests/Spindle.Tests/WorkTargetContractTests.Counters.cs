using System.Threading;
using Xunit;

namespace Spindle.Tests;

// Counters: what the target reports (completed, pending, cancelled, running for a lane) matches what the test knows
// whenever nothing is queueing or dispatching.
public abstract partial class WorkTargetContractTests
{
    [Fact]
    public void Counters_OfAnUnusedTarget_AreZero()
    {
        Assert.Equal(0, CompletedCount);
        Assert.Equal(0, PendingCount);
        Assert.Equal(0, CancelledCount);
        Assert.Equal(0, TargetLane?.RunningWorkItemCount ?? 0);
    }

    [Fact]
    public void Counters_MatchWhatTheTestKnows_WhileWorkWaits_AndOnceItHasRun()
    {
        const int items = 3 * Forms;
        using var ledger = new ExactlyOnceLedger(items);
        using (HoldWorkers())
        {
            for (int i = 0; i < items; i++)
            {
                QueueAnyWay(new LedgerItem(ledger, i), i);
            }
            // Every worker is held: nothing is dispatching, so the counts are exact.
            Assert.Equal(items, PendingCount);
            Assert.Equal(0, CompletedCount);
            Assert.Equal(0, TargetLane?.RunningWorkItemCount ?? 0);
            Waits.Never(() => ledger.Total > 0, "an item of the target ran while every worker was held");
        }
        ledger.WaitForAll("the items behind the held workers");
        long expected = items + PoolItemsCounted(WorkerHold.ItemCount);
        Waits.Until(() => CompletedCount == expected, $"the completed count to reach {expected}");
        Assert.Equal(0, PendingCount);
        Assert.Equal(0, CancelledCount);
        AwaitNoneRunning();
        ledger.AssertExactlyOnce();
    }

    [Fact]
    public void Counters_CountRunsAndTheirRunningItem()
    {
        using var started = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        var running = Target.Run(() =>
        {
            started.Set();
            release.Wait(Waits.MustHappen);
        });
        Waits.For(started, "the run to start");
        Assert.Equal(1, TargetLane?.RunningWorkItemCount ?? 1);
        Assert.Equal(0, CompletedCount);
        for (int i = 0; i < 5; i++)
        {
            _ = Target.Run(() => { });
        }
        release.Set();
        Assert.True(running.Wait(Waits.MustHappen));
        Waits.Until(() => CompletedCount == 6, "the completed count to include every run");
        Assert.Equal(0, PendingCount);
        AwaitNoneRunning();
    }

    /// <summary>
    /// A lane's running count drops once its last item has given its slot back, which may come just after the item
    /// counts as completed: wait for it rather than catch it on the way.
    /// </summary>
    private void AwaitNoneRunning() =>
        Waits.Until(() => (TargetLane?.RunningWorkItemCount ?? 0) == 0, "the lane's running count back to zero");
}
