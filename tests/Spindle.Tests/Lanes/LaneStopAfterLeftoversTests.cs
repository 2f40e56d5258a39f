using System;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Primitives;
using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Lanes;

/// <summary>
/// A lane's stop (<see cref="WorkerPoolLane.Shutdown(ShutdownMode)"/>, <see cref="WorkerPoolLane.ShutdownAsync"/>,
/// <see cref="WorkerPoolLane.Dispose"/>) means that every item the lane accepted has run, also when no worker ran them:
/// in a pool that cannot start a worker, the pool's shutdown runs the lane's items itself (the leftover sweep of the
/// thread that waits for the stop, before or after the stop) or hands them to the built-in pool after the stop. The
/// lane reports its stop once the last of them has run: not at the pool's stop while they still wait or run, and not
/// only at the pool's stop when they ran long before it.
/// </summary>
public sealed class LaneStopAfterLeftoversTests
{
    /// <summary>
    /// A pool that cannot start a worker or its relief thread (either would run the lane's items on the pool), but may
    /// start a dedicated thread for a long-running item.
    /// </summary>
    private static WorkerPool PoolWithoutWorkers(string name) => new(new WorkerPoolOptions
    {
        Name = $"{name}-{Guid.NewGuid():N}",
        MinThreads = 0,
        MaxThreads = 2,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
        OnThreadStarting = kind =>
        {
            if (kind is PoolThreadKind.Worker or PoolThreadKind.Relief)
            {
                throw new OutOfMemoryException("refused by the test");
            }
        },
    });

    /// <summary>
    /// A long-running item that holds the pool's drain until the returned gate is set (or for four times the
    /// must-happen bound, so that what a test waits for with that bound cannot be the hold's release); it has started on
    /// return.
    /// </summary>
    private static ManualResetEventSlim HoldTheDrain(WorkerPool pool)
    {
        var release = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        pool.QueueUserWorkItem<int>(_ =>
        {
            started.Set();
            release.Wait(4 * Waits.MustHappen);
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(started, "the long-running item that holds the pool's drain");
        Assert.Equal(0, pool.ThreadCount); // the lane's items have no worker to run on
        return release;
    }

    /// <summary>
    /// Queues two items to <paramref name="lane"/>, the first of which waits for a gate, and lets
    /// <paramref name="stopThePool"/> stop the pool, which runs them after its stop (no worker ran them, see
    /// <paramref name="where"/>). A shutdown of the lane begun while the first item runs must not return until both
    /// have run.
    /// </summary>
    private static void AssertTheLanesStopWaitsForItsLeftovers(WorkerPool pool, WorkerPoolLane lane, Action stopThePool, string where)
    {
        using var started = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        int ran = 0;
        lane.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(Waits.MustHappen);
            Interlocked.Increment(ref ran);
        });
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));

        Task<int> laneStop;
        try
        {
            stopThePool();
            Waits.For(started, $"the first item, {where}");
            Assert.True(pool.HasStopped);
            laneStop = lane.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None);
            Assert.False(laneStop.IsCompleted, "the lane reported its stop while an item it accepted was still running");
        }
        finally
        {
            gate.Set();
        }

        Assert.True(laneStop.Wait(Waits.MustHappen), "the lane did not report its stop once its items had run");
        Assert.Equal(2, Volatile.Read(ref ran));
        Assert.Equal(2, lane.CompletedWorkItemCount);
    }

    [Theory]
    [InlineData(null)]
    [InlineData(1)]
    public void ALanesStop_AfterThePoolsStop_WaitsForTheLeftoversTheDisposingThreadRuns(int? cap)
    {
        // No worker and no drain hold: the pool's shutdown stops it at once, and the disposing thread then runs the
        // lane's items (the leftover sweep). The lane's stop must wait for them, though the pool has stopped.
        WorkerPool pool = PoolWithoutWorkers(nameof(ALanesStop_AfterThePoolsStop_WaitsForTheLeftoversTheDisposingThreadRuns));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        TestThread? dispose = null;

        AssertTheLanesStopWaitsForItsLeftovers(pool, lane, () => dispose = Waits.Start(pool.Dispose, "the pool's dispose"),
            "run by the disposing thread after the pool's stop");

        dispose!.Join();
    }

    [Theory]
    [InlineData(null)]
    [InlineData(1)]
    public void ALanesStop_AfterThePoolsStop_WaitsForTheLeftoversHandedToTheBuiltInPool(int? cap)
    {
        // The pool stops when the long-running item that holds its drain ends, with nobody waiting for the stop (the
        // only shutdown call stopped waiting at once): the thread that released the hold hands the lane's items to the
        // built-in pool. The lane's stop must wait for them.
        WorkerPool pool = PoolWithoutWorkers(nameof(ALanesStop_AfterThePoolsStop_WaitsForTheLeftoversHandedToTheBuiltInPool));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        using ManualResetEventSlim hold = HoldTheDrain(pool);

        AssertTheLanesStopWaitsForItsLeftovers(pool, lane, () =>
        {
            using var cancelled = new CancellationTokenSource();
            cancelled.Cancel();
            Task<int> poolStop = pool.ShutdownAsync(ShutdownMode.Drain, ShutdownMode.Drain, cancelled.Token);
            Waits.Until(() => poolStop.IsCanceled, "the shutdown call stops waiting");
            hold.Set();
        }, "handed to the built-in pool at the pool's stop");

        Waits.RunBounded(pool.Dispose, "the pool's dispose");
    }

    [Theory]
    [InlineData(null)]
    [InlineData(1)]
    public void ALaneDrainingOnItsOwn_ReportsItsStop_OnceTheShutdownsWaitHasRunItsItems_BeforeThePoolStops(int? cap)
    {
        // The pool drains without a worker while a long-running item holds it; its waiting shutdown call runs what is
        // queued on its own thread meanwhile, the draining lane's items among them. The lane has then stopped: its
        // stop must be reported then, not when the pool stops.
        WorkerPool pool = PoolWithoutWorkers(nameof(ALaneDrainingOnItsOwn_ReportsItsStop_OnceTheShutdownsWaitHasRunItsItems_BeforeThePoolStops));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        ManualResetEventSlim hold = HoldTheDrain(pool);
        int ran = 0;
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        Task<int> laneStop = lane.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None);
        Assert.False(laneStop.IsCompleted); // its items wait for a worker

        Task<int> poolStop;
        try
        {
            poolStop = pool.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None);
            Waits.Until(() => Volatile.Read(ref ran) == 2, "the lane's items, run by the pool's waiting shutdown call");
            Assert.True(laneStop.Wait(Waits.MustHappen), "the lane did not report its stop while the pool drained on");
            Assert.False(pool.HasStopped);
            Assert.Equal(2, lane.CompletedWorkItemCount);
        }
        finally
        {
            hold.Set();
        }

        Assert.True(poolStop.Wait(Waits.MustHappen), "the pool did not stop once its drain hold was released");
        hold.Dispose();
    }

    [Theory]
    [InlineData(null)]
    [InlineData(1)]
    public void ALeftoverThatDisposesItsOwnLane_DoesNotWaitForItself(int? cap)
    {
        // The disposing thread runs the item after the pool's stop; the lane's stop waits for that item, so the item's
        // own Dispose of the lane must not wait (as on a worker).
        WorkerPool pool = PoolWithoutWorkers(nameof(ALeftoverThatDisposesItsOwnLane_DoesNotWaitForItself));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        using var disposed = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            lane.Dispose();
            disposed.Set();
        });

        Waits.RunBounded(pool.Dispose, "the pool's dispose, whose leftover disposes its own lane");

        Assert.True(disposed.IsSet);
        Assert.True(lane.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None).Wait(Waits.MustHappen), "the lane did not stop");
    }

    [Theory]
    [InlineData(null)]
    [InlineData(1)]
    public void APositionAProducerLeavesInAStoppedLane_DoesNotKeepTheStopUnreported(int? cap)
    {
        // A producer claims a position before the pool's close and, refused by the close, publishes it empty only after
        // the pool's stop (it was descheduled in between). The queue reads non-empty until a taker passes that position,
        // and no worker visits a stopped lane: the refused producer passes it itself, and the stop is reported.
        var host = new RecordingLaneHost();
        Lane lane = host.NewLane("lane", cap);
        (object Segment, long Position) claim = lane.QueueForTests.ClaimForTests();
        lane.CloseForPool();
        host.IsCancelling = true; // the pool's shutdown has begun (the host keeps every entry all the same)
        lane.OnPoolStopped();
        Assert.True(lane.HasStopped);
        Assert.False(lane.Stopped.IsCompleted, "the lane reported its stop with a position still claimed in its queue");

        GlobalQueue.PublishClaimedForTests(claim, default);
        Assert.Equal(EnqueueStatus.ShutDown, lane.TryEnqueue(Numbered(1), mayWaitForRoom: false, CancellationToken.None));

        Assert.True(lane.Stopped.IsCompleted, "the lane's stop stayed unreported");
        Assert.Equal(0, lane.RunningCount);
        Assert.Empty(host.HandedOn);
    }

    [Theory]
    [InlineData(null)]
    [InlineData(1)]
    public void ALeftoverThatShutsThePoolDown_DoesNotWaitForTheLeftoversBehindIt(int? cap)
    {
        // The disposing thread runs the lane's first item after the pool's stop, holding one of the lane's slots; the
        // item shuts the pool down once more. That call must not wait for the lane's second item, which the first one's
        // slot keeps back until it returns: the sweep that runs it takes the second item afterwards.
        WorkerPool pool = PoolWithoutWorkers(nameof(ALeftoverThatShutsThePoolDown_DoesNotWaitForTheLeftoversBehindIt));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        int ran = 0;
        lane.QueueUserWorkItem(_ =>
        {
            pool.Shutdown(ShutdownMode.Drain);
            Interlocked.Increment(ref ran);
        });
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));

        Waits.RunBounded(pool.Dispose, "the pool's dispose, whose leftover shuts the pool down");

        Assert.Equal(2, Volatile.Read(ref ran));
        Assert.True(lane.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None).Wait(Waits.MustHappen), "the lane did not stop");
    }

    [Theory]
    [InlineData(null)]
    [InlineData(4)]
    public void ARunItemTheLeftoverSweepCancels_CompletesAfterItsSlotIsGivenBack(int? cap)
    {
        // The pool's own item, swept first, asks for a cancelling shutdown once the pool has stopped: the lane has
        // stopped with it, so the cancel of queued items passes it by and the sweep decides the lane's Run item itself.
        // The task's synchronous continuation is the caller's code (what `await lane.Run(...); lane.Dispose();` runs),
        // and it must find the item's slot given back, or its wait for the lane's stop waits for itself.
        WorkerPool pool = PoolWithoutWorkers(nameof(ARunItemTheLeftoverSweepCancels_CompletesAfterItsSlotIsGivenBack));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        pool.QueueUserWorkItem(_ => pool.Shutdown(ShutdownMode.CancelPending));
        Task run = lane.Run(() => { });
        int runningSeen = -1;
        bool laneStopped = false;
        Task continuation = run.ContinueWith(_ =>
        {
            runningSeen = lane.RunningWorkItemCount;
            laneStopped = lane.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None).Wait(Waits.MustHappen);
        }, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);

        Waits.RunBounded(pool.Dispose, "the pool's dispose, whose leftover cancels the lane's Run item");

        Assert.True(continuation.Wait(Waits.MustHappen), "the cancelled task's continuation did not run");
        Assert.True(run.IsCanceled, $"the Run item's task is {run.Status}");
        Assert.Equal(0, runningSeen);
        Assert.True(laneStopped, "the continuation's wait for the lane's stop waited for the slot of the item it continues");
    }

    [Theory]
    [InlineData(null)]
    [InlineData(4)]
    public void ARunItemTheLeftoverSweepCancels_InALaneAlreadyDraining_LetsItsContinuationSeeTheStop(int? cap)
    {
        // As above, but the lane's own drain began first: the continuation's wait begins no shutdown of its own (which
        // would look at the lane's state itself), so the sweep must make the stop check once the slot is given back.
        WorkerPool pool = PoolWithoutWorkers(nameof(ARunItemTheLeftoverSweepCancels_InALaneAlreadyDraining_LetsItsContinuationSeeTheStop));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane", MaxConcurrency = cap });
        pool.QueueUserWorkItem(_ => pool.Shutdown(ShutdownMode.CancelPending));
        Task run = lane.Run(() => { });
        Task<int> laneStop = lane.ShutdownAsync(ShutdownMode.Drain, CancellationToken.None);
        Assert.False(laneStop.IsCompleted); // no worker: the lane's Run item waits
        bool laneStopped = false;
        Task continuation = run.ContinueWith(_ => laneStopped = laneStop.Wait(Waits.MustHappen),
            CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);

        Waits.RunBounded(pool.Dispose, "the pool's dispose, whose leftover cancels the lane's Run item");

        Assert.True(continuation.Wait(Waits.MustHappen), "the cancelled task's continuation did not run");
        Assert.True(run.IsCanceled, $"the Run item's task is {run.Status}");
        Assert.True(laneStopped, "the continuation's wait for the lane's stop saw no stop");
    }
}
