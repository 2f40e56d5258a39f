using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// <see cref="WorkerPool.CreateLane(LaneOptions)"/> validates its options at the call, before any state changes, copies
/// them, and refuses to create a lane once the pool is shutting down.
/// </summary>
public sealed class LaneOptionsTests
{
    public static TheoryData<Action<LaneOptions>, string> BadOptions => new()
    {
        { o => o.Name = "", nameof(LaneOptions.Name) },
        { o => o.Priority = (LanePriority)7, nameof(LaneOptions.Priority) },
        { o => o.Share = 0, nameof(LaneOptions.Share) },
        { o => o.Share = LaneOptions.MaxShare + 1, nameof(LaneOptions.Share) },
        { o => o.MaxConcurrency = 0, nameof(LaneOptions.MaxConcurrency) },
        { o => o.MaxConcurrency = -1, nameof(LaneOptions.MaxConcurrency) },
        { o => o.QueueLimit = 0, nameof(LaneOptions.QueueLimit) },
        { o => o.FullMode = (LaneFullMode)3, nameof(LaneOptions.FullMode) },
    };

    [Theory]
    [MemberData(nameof(BadOptions))]
    public void CreateLane_RejectsBadOptionsNamingTheProperty_AndCreatesNothing(Action<LaneOptions> spoil, string property)
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LaneOptionsTests) });
        var options = new LaneOptions();
        spoil(options);

        ArgumentException error = Assert.ThrowsAny<ArgumentException>(() => pool.CreateLane(options));

        Assert.Equal(property, error.ParamName);
        Assert.Empty(pool.Lanes);
    }

    [Fact]
    public void CreateLane_RejectsNullOptionsAndNullName()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LaneOptionsTests) });

        Assert.Throws<ArgumentNullException>(() => pool.CreateLane(null!));
        Assert.Throws<ArgumentNullException>(() => pool.CreateLane(new LaneOptions { Name = null! }));
    }

    [Fact]
    public void CreateLane_CopiesTheOptions_AndTheLaneReportsThem()
    {
        // At least four threads, so that the lane's cap of 2 is what bounds its scheduler's concurrency on any machine.
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LaneOptionsTests), MinThreads = 4 });
        var options = new LaneOptions
        {
            Name = "ingest",
            Priority = LanePriority.Low,
            Share = 4,
            MaxConcurrency = 2,
            QueueLimit = 100,
            FullMode = LaneFullMode.Reject,
        };

        WorkerPoolLane lane = pool.CreateLane(options);
        options.Name = "changed";
        options.MaxConcurrency = 9;

        Assert.Equal("ingest", lane.Name);
        Assert.Equal(LanePriority.Low, lane.Priority);
        Assert.Equal(4, lane.Share);
        Assert.Equal(2, lane.MaxConcurrency);
        Assert.Equal(100, lane.QueueLimit);
        Assert.Equal(LaneFullMode.Reject, lane.FullMode);
        Assert.Same(pool, lane.Pool);
        Assert.Same(pool, lane.TaskScheduler.Pool);
        Assert.Same(lane, lane.TaskScheduler.Lane);
        Assert.Same(lane, lane.SynchronizationContext.Lane);
        Assert.Null(pool.TaskScheduler.Lane);
        Assert.Equal(2, lane.TaskScheduler.MaximumConcurrencyLevel);
        Assert.Equal([lane], pool.Lanes);
        Assert.Contains("ingest", lane.ToString(), StringComparison.Ordinal);
    }

    [Fact]
    public void CreateLane_OnAPoolThatIsShuttingDown_Throws()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LaneOptionsTests) });
        pool.Dispose();

        Assert.Throws<ObjectDisposedException>(() => pool.CreateLane(new LaneOptions()));
    }

    /// <summary>
    /// A refusal by shutdown is visible as shutdown: a caller whose <see cref="WorkerPool.CreateLane"/> threw reads
    /// <see cref="WorkerPool.IsShutdownStarted"/> as true. The shutdown closes the lane set first and publishes its
    /// state after; the test performs the first step alone, as a shutdown preempted between the two would leave it, and
    /// completes the shutdown only once the call has had time to end.
    /// </summary>
    [Fact]
    public void CreateLane_RefusedBetweenTheCloseAndTheShutdownState_WaitsUntilIsShutdownStartedReadsTrue()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LaneOptionsTests), MinThreads = 1, MaxThreads = 1 });
        pool.SchedulerCore.Lanes.Close();
        bool refused = false;
        bool sawRunning = false;
        var creator = new Thread(() =>
        {
            try
            {
                pool.CreateLane(new LaneOptions());
            }
            catch (ObjectDisposedException)
            {
                refused = true;
                sawRunning = !pool.IsShutdownStarted;
            }
        });
        creator.Start();
        bool endedBeforeTheState = creator.Join(Waits.MustNotHappen);
        pool.Shutdown(ShutdownMode.CancelPending);

        Assert.True(creator.Join(Waits.MustHappen), "the call ends once the shutdown has published its state");
        Assert.True(refused, "the closed lane set refused the lane");
        Assert.False(sawRunning, "the refused caller read IsShutdownStarted as false");
        Assert.False(endedBeforeTheState, "the refusal waited for the shutdown's state");
    }

    [Fact]
    public void QueueingOnALane_RejectsNullCallbacks()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LaneOptionsTests) });
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions());

        Assert.Throws<ArgumentNullException>(() => lane.QueueUserWorkItem(null!));
        Assert.Throws<ArgumentNullException>(() => lane.TryQueueUserWorkItem<int>(null!, 1, preferLocal: false));
        Assert.Throws<ArgumentNullException>(() => lane.TryQueueUserWorkItem(null!, preferLocal: false));
        Assert.Throws<ArgumentNullException>(() => { _ = lane.QueueUserWorkItemAsync((IWorkItem)null!); });
        Assert.Throws<ArgumentNullException>(() => { _ = lane.Run((Action)null!); });
        Assert.Throws<ArgumentOutOfRangeException>(() => lane.QueueUserWorkItem(_ => { }, 0, (WorkItemOptions)64));
        Assert.Throws<ArgumentOutOfRangeException>(() => lane.Shutdown((ShutdownMode)5));
        Assert.Equal(0, lane.PendingWorkItemCount);
    }
}
