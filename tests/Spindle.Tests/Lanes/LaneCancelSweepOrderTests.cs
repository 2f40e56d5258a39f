using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// A serial lane's cancel sweep takes the entries that must run anyway (continuations, posts) out of the queue and
/// queues them again at its end. An enqueue that a producer has claimed but not yet published when the sweep reaches it
/// must not end up ahead of them.
/// </summary>
public sealed class LaneCancelSweepOrderTests
{
    /// <summary>An entry that a cancelling shutdown keeps (as it keeps a post), recording its id when it runs.</summary>
    private sealed class KeptEntry(int id, ConcurrentQueue<int> order, CountdownEvent ran) : IShutdownAware
    {
        private static readonly Action<object?> s_run = static state => ((KeptEntry)state!).Run();

        public object? QueuedCallback => s_run;

        public WorkItemEntry Entry => new(s_run, this, null);

        public ShutdownOutcome OnCancelPending() => ShutdownOutcome.Run;

        private void Run()
        {
            order.Enqueue(id);
            ran.Signal();
        }
    }

    [Fact]
    public async Task CancelSweepOfASerialLane_WaitsForAnEnqueueInFlight_AndKeepsTheOlderEntriesAheadOfIt()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = $"sweep-order-{Guid.NewGuid():N}",
            MinThreads = 2,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        Spindle.Lanes.Lane core = lane.LaneCore!;

        // An item holds the lane's only slot, so that what follows stays queued.
        using var holding = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            holding.Set();
            release.Wait(4 * Waits.MustHappen);
        });
        Waits.For(holding, "the item holding the lane's slot");

        var order = new ConcurrentQueue<int>();
        using var ran = new CountdownEvent(2);
        core.EnqueueContinuation(new KeptEntry(1, order, ran).Entry);
        // The second entry's producer has claimed its position and stopped before publishing it.
        (object Segment, long Position) claim = core.QueueForTests.ClaimForTests();

        Task<int>? shutdown = null;
        var sweeper = new Thread(() => shutdown = lane.ShutdownAsync(ShutdownMode.CancelPending)) { IsBackground = true };
        sweeper.Start();
        // The sweep has nothing to wait for but the publish below; a sweep that ended without it left the first entry
        // behind the claimed position.
        bool sweepEndedBeforePublish = sweeper.Join(Waits.MustNotHappen);
        GlobalQueue.PublishClaimedForTests(claim, new KeptEntry(2, order, ran).Entry);
        Assert.True(sweeper.Join(Waits.MustHappen), "the sweep ends once the claimed position is published");
        release.Set();

        Waits.For(ran, "both kept entries to run");
        await shutdown!.WaitAsync(Waits.MustHappen);
        Assert.Equal([1, 2], order.ToArray());
        Assert.False(sweepEndedBeforePublish, "the sweep waited for the enqueue in flight");
    }
}
