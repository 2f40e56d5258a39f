using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// Bounded lanes (wait, reject, try, async with cancellation: nothing dropped silently) and the lane's lifetime
/// (drain and cancel with exact counts, without touching other lanes; the pool's shutdown shuts its lanes down).
/// </summary>
public sealed class LaneLifetimeTests
{
    private static WorkerPool NewPool(string name, int threads = 2) => new(new WorkerPoolOptions
    {
        Name = name,
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    /// <summary>Occupies the only slot of a serial lane until the returned gate is set.</summary>
    private static ManualResetEventSlim OccupySlot(WorkerPoolLane serial)
    {
        var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        serial.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(started, "the item holding the lane's slot");
        return gate;
    }

    [Fact]
    public async Task ABoundedRejectingLane_RefusesWhenFull_AndRunsEverythingItAccepted()
    {
        using WorkerPool pool = NewPool(nameof(ABoundedRejectingLane_RefusesWhenFull_AndRunsEverythingItAccepted));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 2, FullMode = LaneFullMode.Reject });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;

        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        Assert.True(lane.TryQueueUserWorkItem(_ => Interlocked.Increment(ref ran), 0, preferLocal: false));
        Assert.Equal(2, lane.PendingWorkItemCount);

        WorkRejectedException rejected = Assert.Throws<WorkRejectedException>(() => lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran)));
        Assert.Contains("bounded", rejected.Message, StringComparison.Ordinal);
        Assert.False(lane.TryQueueUserWorkItem(_ => Interlocked.Increment(ref ran), 0, preferLocal: false));
        Assert.Throws<WorkRejectedException>(() => { _ = lane.Run(() => Interlocked.Increment(ref ran)); });
        Assert.Equal(2, lane.PendingWorkItemCount);

        // The async form waits for room whatever the mode.
        ValueTask waiting = lane.QueueUserWorkItemAsync(_ => Interlocked.Increment(ref ran), 0);
        Assert.False(waiting.IsCompleted);

        gate.Set();
        await waiting.AsTask().WaitAsync(Waits.MustHappen);
        Waits.Until(() => Volatile.Read(ref ran) == 3, "every accepted item");
        Waits.Until(() => lane.CompletedWorkItemCount == 4, "the lane's completed count (the slot holder and three items)");
        Assert.Equal(0, lane.PendingWorkItemCount);
    }

    [Fact]
    public void ABoundedWaitingLane_BlocksTheCallerUntilThereIsRoom()
    {
        using WorkerPool pool = NewPool(nameof(ABoundedWaitingLane_BlocksTheCallerUntilThereIsRoom));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 1 });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));

        Task blocked = Task.Factory.StartNew(() => lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran)), TaskCreationOptions.LongRunning);
        Assert.False(blocked.Wait(Waits.MustNotHappen), "the queueing call waits while the lane is full");
        Assert.False(lane.TryQueueUserWorkItem(_ => Interlocked.Increment(ref ran), 0, preferLocal: false));

        gate.Set();
        Assert.True(blocked.Wait(Waits.MustHappen), "the queueing call returned once there was room");
        Waits.Until(() => Volatile.Read(ref ran) == 2, "both items");
    }

    [Fact]
    public async Task Run_OnAFullWaitingLane_ReturnsACancelledTaskWhenItsTokenIsCancelledDuringTheWait()
    {
        using WorkerPool pool = NewPool(nameof(Run_OnAFullWaitingLane_ReturnsACancelledTaskWhenItsTokenIsCancelledDuringTheWait));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 1 });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        using var cts = new CancellationTokenSource();

        Task<Task<int>> call = Task.Factory.StartNew(
            () => lane.Run(() => Interlocked.Increment(ref ran), cts.Token), CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
        Assert.False(call.Wait(Waits.MustNotHappen), "Run waits for room while the lane is full");
        cts.Cancel();
        Assert.True(call.Wait(Waits.MustHappen), "the cancelled token ended Run's wait for room");
        Assert.Equal(0, lane.CompletedWorkItemCount); // it did not wait for room: the slot holder still runs
        Task<int> run = await call;
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => run.WaitAsync(Waits.MustHappen));
        Assert.True(run.IsCanceled);
        Assert.Equal(1, lane.PendingWorkItemCount);

        gate.Set();
        Waits.Until(() => lane.CompletedWorkItemCount == 2, "the slot holder and the one accepted item");
        Waits.Never(() => Volatile.Read(ref ran) > 1, "the cancelled run's delegate running");
        // The bound is whole again: the cancelled wait took no room.
        Assert.True(lane.TryQueueUserWorkItem(_ => { }, 0, preferLocal: false));
    }

    [Fact]
    public async Task RunAsValueTask_OnAFullWaitingLane_IsCancelledWhenItsTokenIsCancelledDuringTheWait()
    {
        using WorkerPool pool = NewPool(nameof(RunAsValueTask_OnAFullWaitingLane_IsCancelledWhenItsTokenIsCancelledDuringTheWait));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 1 });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        using var cts = new CancellationTokenSource();

        Task<Task> call = Task.Factory.StartNew(
            () => lane.RunAsValueTask(() => { Interlocked.Increment(ref ran); }, cts.Token).AsTask(), CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
        Assert.False(call.Wait(Waits.MustNotHappen), "RunAsValueTask waits for room while the lane is full");
        cts.Cancel();
        Assert.True(call.Wait(Waits.MustHappen), "the cancelled token ended the wait for room");
        Assert.Equal(0, lane.CompletedWorkItemCount); // it did not wait for room: the slot holder still runs
        Task run = await call;
        OperationCanceledException cancelled = await Assert.ThrowsAnyAsync<OperationCanceledException>(() => run.WaitAsync(Waits.MustHappen));
        Assert.Equal(cts.Token, cancelled.CancellationToken);

        gate.Set();
        Waits.Until(() => lane.CompletedWorkItemCount == 2, "the slot holder and the one accepted item");
        Waits.Never(() => Volatile.Read(ref ran) > 1, "the cancelled run's delegate running");
        Assert.True(lane.TryQueueUserWorkItem(_ => { }, 0, preferLocal: false));
    }

    [Fact]
    public async Task QueueUserWorkItemAsync_CancelledWhileWaitingForRoom_QueuesNothing()
    {
        using WorkerPool pool = NewPool(nameof(QueueUserWorkItemAsync_CancelledWhileWaitingForRoom_QueuesNothing));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 1, FullMode = LaneFullMode.Reject });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        using var cts = new CancellationTokenSource();

        ValueTask waiting = lane.QueueUserWorkItemAsync(_ => Interlocked.Increment(ref ran), 0, cts.Token);
        Assert.False(waiting.IsCompleted);
        cts.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting.AsTask().WaitAsync(Waits.MustHappen));
        Assert.True(lane.QueueUserWorkItemAsync(_ => { }, 0, new CancellationToken(canceled: true)).IsCanceled);

        gate.Set();
        Waits.Until(() => lane.CompletedWorkItemCount == 2, "the slot holder and the one accepted item");
        Waits.Never(() => Volatile.Read(ref ran) > 1, "the cancelled item running");
        Assert.Equal(1, Volatile.Read(ref ran));
    }

    [Fact]
    public void AnItemOfACappedLane_CannotBlockWaitingForRoomInItsOwnLane()
    {
        using WorkerPool pool = NewPool(nameof(AnItemOfACappedLane_CannotBlockWaitingForRoomInItsOwnLane));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "mailbox", MaxConcurrency = 1, QueueLimit = 1 });
        Exception? error = null;
        Exception? runError = null;
        bool triedAndFailed = false;
        using var done = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            lane.QueueUserWorkItem(_ => { });
            triedAndFailed = !lane.TryQueueUserWorkItem(_ => { }, 0, preferLocal: false);
            try
            {
                lane.QueueUserWorkItem(_ => { });
            }
            catch (InvalidOperationException e)
            {
                error = e;
            }
            try
            {
                _ = lane.Run(() => { });
            }
            catch (InvalidOperationException e)
            {
                runError = e;
            }
            done.Set();
        });
        Waits.For(done, "the item");

        Assert.True(triedAndFailed);
        Assert.IsType<InvalidOperationException>(error);
        Assert.Contains("wait for itself", error!.Message, StringComparison.Ordinal);
        // Run refuses the same way as the queueing call (not as a lane that rejects).
        Assert.IsType<InvalidOperationException>(runError);
        Assert.Contains("wait for itself", runError!.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void ContinuationsOfALanesWork_AreNeverRefusedByItsBound()
    {
        using WorkerPool pool = NewPool(nameof(ContinuationsOfALanesWork_AreNeverRefusedByItsBound));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 1, FullMode = LaneFullMode.Reject });
        ManualResetEventSlim gate = OccupySlot(lane);
        lane.QueueUserWorkItem(_ => { });
        using var posted = new CountdownEvent(5);

        for (int i = 0; i < 5; i++)
        {
            lane.SynchronizationContext.Post(_ => posted.Signal(), null);
        }
        Assert.Equal(6, lane.PendingWorkItemCount);

        gate.Set();
        Waits.For(posted, "the posts");
        Waits.Until(() => lane.PendingWorkItemCount == 0, "the lane emptied");
        // The bound is whole again: one item fits, the next is refused while nothing runs it.
        Assert.True(lane.TryQueueUserWorkItem(_ => { }, 0, preferLocal: false));
    }

    [Fact]
    public void Shutdown_Drain_RunsTheLanesQueuedWork_WaitsForIt_AndLeavesOtherLanesOpen()
    {
        using WorkerPool pool = NewPool(nameof(Shutdown_Drain_RunsTheLanesQueuedWork_WaitsForIt_AndLeavesOtherLanesOpen));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "draining", MaxConcurrency = 1 });
        WorkerPoolLane other = pool.CreateLane(new LaneOptions { Name = "other" });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        for (int i = 0; i < 10; i++)
        {
            lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }

        Task<int> shutdown = Task.Run(() => lane.Shutdown(ShutdownMode.Drain));
        Waits.Until(() => lane.IsShutdownStarted, "the lane's shutdown began");
        Assert.False(shutdown.Wait(Waits.MustNotHappen), "the drain waits for the lane's running item");
        Assert.Throws<ObjectDisposedException>(() => lane.QueueUserWorkItem(_ => { }));
        Assert.Throws<ObjectDisposedException>(() => { _ = lane.Run(() => { }); });
        Assert.False(pool.IsShutdownStarted);
        Assert.True(other.Run(() => { }).Wait(Waits.MustHappen), "another lane still runs work");
        Assert.True(pool.Run(() => { }).Wait(Waits.MustHappen), "the pool still runs work");

        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen));
        Assert.Equal(0, shutdown.Result);
        Assert.Equal(10, Volatile.Read(ref ran));
        Assert.Equal(11, lane.CompletedWorkItemCount);
        Assert.Equal(0, lane.CancelledWorkItemCount);
        Assert.DoesNotContain(lane, pool.Lanes);
        Assert.Contains(other, pool.Lanes);
        lane.Dispose(); // idempotent
        // A stopped lane leaves the dispatch rule: the pool's workers are back on the path without lanes.
        Waits.Until(() => !pool.SchedulerCore.Lanes.AnyReady, "no lane counted ready once the lanes are idle or stopped");
    }

    [Fact]
    public async Task ShutdownAsync_CancelPending_CancelsExactlyTheLanesQueuedWork()
    {
        using WorkerPool pool = NewPool(nameof(ShutdownAsync_CancelPending_CancelsExactlyTheLanesQueuedWork));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "cancelled", MaxConcurrency = 1 });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        for (int i = 0; i < 7; i++)
        {
            lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }
        Task<int> runItem = lane.Run(() => 1);
        int poolItems = 0;
        for (int i = 0; i < 5; i++)
        {
            pool.QueueUserWorkItem(_ => Interlocked.Increment(ref poolItems));
        }

        Task<int> shutdown = lane.ShutdownAsync(ShutdownMode.CancelPending);
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => runItem.WaitAsync(Waits.MustHappen));
        Assert.False(shutdown.IsCompleted, "the lane's running item has not finished");
        gate.Set();

        Assert.Equal(8, await shutdown.WaitAsync(Waits.MustHappen));
        Assert.Equal(0, Volatile.Read(ref ran));
        Assert.Equal(8, lane.CancelledWorkItemCount);
        Assert.Equal(1, lane.CompletedWorkItemCount);
        Assert.Equal(0, pool.CancelledWorkItemCount); // the lane's shutdown is not the pool's
        Waits.Until(() => Volatile.Read(ref poolItems) == 5, "the pool's own work");
    }

    [Fact]
    public async Task AContinuationArrivingWhileALaneDrains_Runs_AndOneArrivingAfterItStopped_RunsOnThePool()
    {
        using WorkerPool pool = NewPool(nameof(AContinuationArrivingWhileALaneDrains_Runs_AndOneArrivingAfterItStopped_RunsOnThePool));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "draining", MaxConcurrency = 1 });
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        WorkerPoolLane? resumedOn = null;
        bool resumedOnPool = false;

        Task work = lane.Run(async () =>
        {
            await release.Task;
            resumedOn = WorkerPoolLane.Current;
            resumedOnPool = WorkerPool.Current == pool;
        });
        Task<int> shutdown = lane.ShutdownAsync(ShutdownMode.Drain);
        Assert.False(shutdown.Wait(Waits.MustNotHappen), "the drain waits for the lane's async Run delegate");

        release.SetResult();
        await work.WaitAsync(Waits.MustHappen);
        Assert.Equal(0, await shutdown.WaitAsync(Waits.MustHappen));
        Assert.Same(lane, resumedOn);
        Assert.True(resumedOnPool);

        // The lane has stopped: a post to its context still runs, as the pool's own work.
        using var posted = new ManualResetEventSlim();
        WorkerPoolLane? postedOn = lane;
        lane.SynchronizationContext.Post(_ => { postedOn = WorkerPoolLane.Current; posted.Set(); }, null);
        Waits.For(posted, "a post after the lane stopped");
        Assert.Null(postedOn);
    }

    [Fact]
    public async Task DisposingThePool_DrainsAndStopsItsLanes()
    {
        WorkerPool pool = NewPool(nameof(DisposingThePool_DrainsAndStopsItsLanes), threads: 1);
        WorkerPoolLane first = pool.CreateLane(new LaneOptions { Name = "first", MaxConcurrency = 1 });
        WorkerPoolLane second = pool.CreateLane(new LaneOptions { Name = "second", Priority = LanePriority.Low });
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        int ran = 0;
        for (int i = 0; i < 5; i++)
        {
            first.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
            second.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }

        Task disposed = Task.Run(pool.Dispose);
        Waits.Until(() => first.IsShutdownStarted && second.IsShutdownStarted, "the lanes see the pool's shutdown");
        Assert.Throws<ObjectDisposedException>(() => first.QueueUserWorkItem(_ => { }));
        gate.Set();

        Assert.True(disposed.Wait(Waits.MustHappen));
        Assert.Equal(10, Volatile.Read(ref ran));
        Assert.Equal(0, await first.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen));
        Assert.Equal(0, await second.ShutdownAsync(ShutdownMode.CancelPending).WaitAsync(Waits.MustHappen));
        Assert.Equal(5, second.CompletedWorkItemCount);
    }

    [Fact]
    public void ThePoolsCancelPendingShutdown_CancelsLaneWork_CountedByBoth()
    {
        WorkerPool pool = NewPool(nameof(ThePoolsCancelPendingShutdown_CancelsLaneWork_CountedByBoth), threads: 1);
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "lane" });
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        int ran = 0;
        for (int i = 0; i < 6; i++)
        {
            lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }

        Task<int> shutdown = Task.Run(() => pool.Shutdown(ShutdownMode.CancelPending));
        Waits.Until(() => pool.CancelledWorkItemCount == 6, "the lane's items cancelled at once");
        gate.Set();

        Assert.True(shutdown.Wait(Waits.MustHappen));
        Assert.Equal(6, shutdown.Result);
        Assert.Equal(6, lane.CancelledWorkItemCount);
        Assert.Equal(0, Volatile.Read(ref ran));
    }

    /// <summary>
    /// A worker that finds a lane runnable takes a slot before it looks at the queue, and gives the slot back when the
    /// queue turns out empty. A shutdown whose stop check sees such a slot held must still stop the lane once it is given
    /// back: here two threads keep taking from an empty lane while it shuts down, so most shutdowns see a slot held.
    /// </summary>
    [Fact]
    public void DrainingShutdown_RacingTakersThatFindTheQueueEmpty_StillStopsTheLane()
    {
        using WorkerPool pool = NewPool(nameof(DrainingShutdown_RacingTakersThatFindTheQueueEmpty_StillStopsTheLane));
        for (int round = 0; round < 200; round++)
        {
            WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = $"racing{round}", MaxConcurrency = round % 2 == 0 ? null : 2 });
            Spindle.Lanes.Lane core = lane.LaneCore!;
            int stop = 0;
            int attempts = 0;
            var takers = new Thread[2];
            for (int t = 0; t < takers.Length; t++)
            {
                takers[t] = new Thread(() =>
                {
                    while (Volatile.Read(ref stop) == 0)
                    {
                        Assert.False(core.TryTake(out _), "the lane holds no item");
                        Interlocked.Increment(ref attempts);
                    }
                });
                takers[t].Start();
            }
            Waits.Until(() => Volatile.Read(ref attempts) > 100, "the takers to start");

            Task<int> shutdown = lane.ShutdownAsync(ShutdownMode.Drain);
            Volatile.Write(ref stop, 1);
            foreach (Thread taker in takers)
            {
                taker.Join();
            }

            Assert.True(shutdown.Wait(Waits.MustHappen), $"round {round}: the drained lane stopped once the takers gave their slots back");
            Assert.Equal(0, shutdown.Result);
            Assert.Equal(0, lane.RunningWorkItemCount);
        }
    }

    /// <summary>
    /// Producers that keep queueing while the lane shuts down: every call either queues (and its item runs) or throws
    /// <see cref="ObjectDisposedException"/>, and the lane stops.
    /// </summary>
    [Fact]
    public void DrainingShutdown_RacingProducers_StopsTheLane_AndRunsWhatItAccepted()
    {
        using WorkerPool pool = NewPool(nameof(DrainingShutdown_RacingProducers_StopsTheLane_AndRunsWhatItAccepted));
        for (int round = 0; round < 100; round++)
        {
            WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = $"racing{round}", MaxConcurrency = round % 2 == 0 ? null : 1 });
            long accepted = 0;
            long ran = 0;
            var producers = new Thread[2];
            for (int p = 0; p < producers.Length; p++)
            {
                producers[p] = new Thread(() =>
                {
                    try
                    {
                        while (true)
                        {
                            lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
                            Interlocked.Increment(ref accepted);
                        }
                    }
                    catch (ObjectDisposedException)
                    {
                        // The lane is shutting down: the producer stops.
                    }
                });
                producers[p].Start();
            }
            Waits.Until(() => Volatile.Read(ref accepted) > 50, "the producers to start");

            Task<int> shutdown = lane.ShutdownAsync(ShutdownMode.Drain);
            foreach (Thread producer in producers)
            {
                Assert.True(producer.Join(Waits.MustHappen), $"round {round}: a producer saw the shutdown");
            }
            Assert.True(shutdown.Wait(Waits.MustHappen), $"round {round}: the drained lane stopped");
            Assert.Equal(0, shutdown.Result);
            Assert.Equal(Volatile.Read(ref accepted), Volatile.Read(ref ran));
        }
    }

    /// <summary>
    /// While the pool drains, a continuation of a serial lane's async item still goes to the lane: it runs after the
    /// lane's item in progress, never beside it (the pool's own queue would have run it on another worker at once).
    /// </summary>
    [Fact]
    public async Task PoolDrain_ASerialLanesContinuation_KeepsTheLanesCapAndOrder()
    {
        WorkerPool pool = NewPool(nameof(PoolDrain_ASerialLanesContinuation_KeepsTheLanesCapAndOrder));
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        var resume = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        int running = 0;
        int overlaps = 0;
        var order = new System.Collections.Concurrent.ConcurrentQueue<string>();
        void Enter(string name)
        {
            if (Interlocked.Increment(ref running) != 1)
            {
                Interlocked.Increment(ref overlaps);
            }
            order.Enqueue(name);
        }
        void Leave() => Interlocked.Decrement(ref running);

        Task asyncItem = serial.Run(async () =>
        {
            Enter("first part");
            Leave();
            await resume.Task;
            Enter("continuation");
            Leave();
        });
        using var blockerStarted = new ManualResetEventSlim();
        using var releaseBlocker = new ManualResetEventSlim();
        serial.QueueUserWorkItem(_ =>
        {
            Enter("blocker");
            blockerStarted.Set();
            releaseBlocker.Wait(Waits.MustHappen);
            Leave();
        });
        Waits.For(blockerStarted, "the lane's second item");

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain);
        resume.SetResult(); // the continuation is posted to the lane while the pool drains and the lane's slot is held
        Thread.Sleep(Waits.MustNotHappen);
        Assert.Equal(["first part", "blocker"], order.ToArray());
        releaseBlocker.Set();

        await asyncItem.WaitAsync(Waits.MustHappen);
        Assert.True(shutdown.Wait(Waits.MustHappen), "the pool drained");
        Assert.Equal(["first part", "blocker", "continuation"], order.ToArray());
        Assert.Equal(0, overlaps);
        pool.Dispose();
    }

    [Fact]
    public void ALanesRetiredSegments_SurviveFullCollectionsAfterABacklog_AndAreGivenBackOnceIdle()
    {
        using WorkerPool pool = NewPool(nameof(ALanesRetiredSegments_SurviveFullCollectionsAfterABacklog_AndAreGivenBackOnceIdle));
        pool.SchedulerCore.SegmentTrimIdleMs = 5_000; // instead of 10 s
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "strand", MaxConcurrency = 1 });
        Spindle.Lanes.Lane core = lane.LaneCore!;

        // A backlog of twelve segments' worth behind the slot holder: drained, it leaves its segments in the free list.
        ManualResetEventSlim gate = OccupySlot(lane);
        const int Items = 12 * 1024;
        using var done = new CountdownEvent(Items);
        for (int i = 0; i < Items; i++)
        {
            lane.QueueUserWorkItem(static countdown => countdown.Signal(), done, preferLocal: false);
        }
        gate.Set();
        Waits.For(done, "the backlog");
        Assert.True(core.RetiredSegmentCount > Spindle.Lanes.Lane.SegmentsKeptByTrim,
            $"{core.RetiredSegmentCount} retired segments after a backlog of twelve");

        int retired = core.RetiredSegmentCount;

        // Full collections right after a backlog keep what it retired (backlogs that come back reuse their segments
        // instead of allocating them again), twice in a row too, as code that collects "fully" does.
        for (int i = 0; i < 2; i++)
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
        }
        Assert.Equal(retired, core.RetiredSegmentCount);

        // No backlog uses them now: once that has lasted the idle time, a full collection leaves the lane its few.
        Waits.Until(() =>
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            return core.RetiredSegmentCount == Spindle.Lanes.Lane.SegmentsKeptByTrim;
        }, "the lane's free list trimmed after full collections");

        // The lane works on: a new backlog reuses what was kept, in order.
        gate = OccupySlot(lane);
        int next = 0;
        int outOfOrder = 0;
        using var again = new CountdownEvent(Items);
        for (int i = 0; i < Items; i++)
        {
            int sequence = i;
            lane.QueueUserWorkItem(_ =>
            {
                if (next++ != sequence)
                {
                    outOfOrder++;
                }
                again.Signal();
            });
        }
        gate.Set();
        Waits.For(again, "the second backlog");
        Assert.Equal(0, outOfOrder);
    }
}
