using System;
using System.Globalization;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Primitives;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Work accepted while no worker could ever start is run (or cancelled) by the thread that shuts the pool down: exactly
/// once, with the policy applied, and without leaking the items' thread state into the caller.
/// </summary>
public sealed class WorkerPoolLeftoverTests
{
    private static WorkerPool PoolThatCannotStartThreads(UnhandledExceptionPolicy policy) =>
        new(new WorkerPoolOptions
        {
            MinThreads = 1,
            MaxThreads = 1,
            ExceptionPolicy = policy,
            ThreadFactory = static (_, _) => throw new OutOfMemoryException("no threads today"),
        });

    [Fact]
    public void UnderFailProcess_AThrowingLeftover_IsRethrownFromDisposeAfterTheOthersRan()
    {
        var pool = PoolThatCannotStartThreads(UnhandledExceptionPolicy.FailProcess);
        int ran = 0;
        pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("leftover failed"));
        pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));

        var thrown = Assert.Throws<InvalidOperationException>(pool.Dispose);

        Assert.Equal("leftover failed", thrown.Message);
        Assert.Equal(2, ran);
        Assert.Equal(3, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
    }

    [Fact]
    public void UnderReport_AThrowingLeftover_ReachesTheHandlerAndDisposeReturns()
    {
        var pool = PoolThatCannotStartThreads(UnhandledExceptionPolicy.Report);
        Exception? reported = null;
        pool.UnhandledException += (_, e) => reported = e.Exception;
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("reported"));

        pool.Dispose();

        Assert.IsType<InvalidOperationException>(reported);
        Assert.Equal(1, pool.CompletedWorkItemCount);
    }

    [Fact]
    public void LeftoversCannotChangeTheDisposingThreadsState()
    {
        var pool = PoolThatCannotStartThreads(UnhandledExceptionPolicy.Report);
        CultureInfo before = CultureInfo.CurrentCulture;
        SynchronizationContext? syncBefore = SynchronizationContext.Current;
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            CultureInfo.CurrentCulture = CultureInfo.GetCultureInfo("fr-FR");
            SynchronizationContext.SetSynchronizationContext(new SynchronizationContext());
        }, null);

        pool.Dispose();

        Assert.Same(before, CultureInfo.CurrentCulture);
        Assert.Same(syncBefore, SynchronizationContext.Current);
    }

    /// <summary>
    /// A pool that cannot start a worker or its relief thread, but may start a dedicated thread for a long-running item
    /// (through <paramref name="threadFactory"/> when given).
    /// </summary>
    private static WorkerPool PoolWithoutWorkers(Func<ThreadStart, int, Thread>? threadFactory = null) => new(new WorkerPoolOptions
    {
        MinThreads = 0,
        MaxThreads = 2,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
        OnThreadStarting = static kind =>
        {
            if (kind is PoolThreadKind.Worker or PoolThreadKind.Relief)
            {
                throw new OutOfMemoryException("refused by the test");
            }
        },
        ThreadFactory = threadFactory,
    });

    /// <summary>
    /// Queues a long-running item (on a dedicated thread) that keeps the pool from stopping until
    /// <paramref name="holdOpen"/> is set; it has started on return.
    /// </summary>
    private static void HoldOpenUntil(WorkerPool pool, ManualResetEventSlim holdOpen)
    {
        using var holding = new ManualResetEventSlim();
        pool.QueueUserWorkItem(static events =>
        {
            events.Holding.Set();
            events.HoldOpen.Wait();
        }, (Holding: holding, HoldOpen: holdOpen), WorkItemOptions.LongRunning);
        Assert.True(holding.Wait(TimeSpan.FromSeconds(30)), "The long-running item never started.");
    }

    /// <summary>
    /// A pool with one long-running item (on a dedicated thread, blocked on <paramref name="holdOpen"/>, which keeps the
    /// pool from stopping) and one ordinary item (<paramref name="leftover"/>) that no worker can run: workers cannot
    /// be started. The owner then gives up its wait for the shutdown at once (as a host whose shutdown timeout
    /// fired does) and hands the rest to the pool's background finisher, which runs the leftover itself.
    /// </summary>
    private static WorkerPool PoolWhoseFinisherRunsALeftover(ManualResetEventSlim holdOpen, WaitCallback leftover)
    {
        WorkerPool pool = PoolWithoutWorkers();
        HoldOpenUntil(pool, holdOpen);
        pool.QueueUserWorkItem(leftover);
        // The enqueue asked for a worker and was refused (the stall monitor retries later, and each retry counts a
        // thread for a moment, so the thread count is no fact to assert here).
        Waits.Until(() => pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed) > 0, "a refused worker start");

        HandTheShutdownToTheFinisher(pool);
        return pool;
    }

    /// <summary>
    /// The owner's wait for the shutdown, given up at once (the pool does not stop meanwhile: a long-running item holds
    /// it), and the rest handed to the pool's background finisher.
    /// </summary>
    private static void HandTheShutdownToTheFinisher(WorkerPool pool)
    {
        Task<int> gaveUp = pool.ShutdownAsync(ShutdownMode.Drain, ShutdownMode.Drain, new CancellationToken(canceled: true));
        Assert.ThrowsAny<OperationCanceledException>(() => gaveUp.GetAwaiter().GetResult());
        pool.LeaveRunningItemsOnDispose();
    }

    [Fact]
    public void Shutdown_WaitsForALeftoverThatTheBackgroundFinisherRuns()
    {
        using var holdOpen = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        int finished = 0;
        var pool = PoolWhoseFinisherRunsALeftover(holdOpen, _ =>
        {
            started.Set();
            gate.Wait();
            Volatile.Write(ref finished, 1);
        });
        Assert.True(started.Wait(TimeSpan.FromSeconds(30)), "The background finisher never ran the leftover.");

        int finishedWhenShutdownReturned = -1;
        var shutdown = new Thread(() =>
        {
            pool.Shutdown(ShutdownMode.Drain);
            Volatile.Write(ref finishedWhenShutdownReturned, Volatile.Read(ref finished));
        });
        shutdown.IsBackground = true; // a call that never returns fails the test below, not the test run
        shutdown.Start();
        holdOpen.Set(); // the long-running item returns and the pool stops
        // A call that does not wait for the finisher returns now, with the leftover still at the gate: give it the time to.
        shutdown.Join(TimeSpan.FromMilliseconds(300));
        gate.Set();

        Assert.True(shutdown.Join(TimeSpan.FromSeconds(30)), "Shutdown did not return after the leftover finished.");
        Assert.Equal(1, Volatile.Read(ref finishedWhenShutdownReturned));
        Assert.Equal(2, pool.CompletedWorkItemCount);
    }

    [Fact]
    public void ALeftoverThatTheBackgroundFinisherRuns_CanCallShutdownWithoutWaitingForItself()
    {
        using var holdOpen = new ManualResetEventSlim();
        using var returnedInside = new ManualResetEventSlim();
        WorkerPool? pool = null;
        using var poolKnown = new ManualResetEventSlim();
        int cancelledInside = -1;
        bool asyncCallReturned = false;
        using var started = new ManualResetEventSlim();
        pool = PoolWhoseFinisherRunsALeftover(holdOpen, _ =>
        {
            started.Set();
            poolKnown.Wait();
            cancelledInside = pool!.Shutdown(ShutdownMode.Drain);
            asyncCallReturned = pool.ShutdownAsync(ShutdownMode.Drain).Wait(TimeSpan.FromSeconds(30));
            returnedInside.Set();
        });
        Assert.True(started.Wait(TimeSpan.FromSeconds(30)), "The background finisher never ran the leftover.");
        poolKnown.Set();
        holdOpen.Set(); // the long-running item returns and the pool stops: the leftover's calls wait for that

        Assert.True(returnedInside.Wait(TimeSpan.FromSeconds(30)), "A leftover's shutdown call waited for the sweep that runs it.");
        Assert.Equal(0, cancelledInside);
        Assert.True(asyncCallReturned);
        Assert.Equal(0, pool.Shutdown(ShutdownMode.Drain));
        Assert.Equal(2, pool.CompletedWorkItemCount);
    }
    [Fact]
    public void AStoppedSerialLanesEntryOnTheBuiltInPool_CanCallShutdownWhileTheFinisherWaitsForItsSlot()
    {
        // The pool's dedicated thread outlives its item until this is set, so that the background finisher, which waits
        // for the pool's threads to exit before its last sweep, is held there while the lane's entries start.
        using var keepAlive = new ManualResetEventSlim();
        WorkerPool pool = PoolWithoutWorkers((start, stackSize) => new Thread(() =>
        {
            start();
            keepAlive.Wait();
        }, stackSize));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        using var holdOpen = new ManualResetEventSlim();
        HoldOpenUntil(pool, holdOpen);

        // Two items for the serial lane that no worker can run: the pool's stop leaves them in the lane's queue.
        using var firstStarted = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        using var shutdownReturned = new ManualResetEventSlim();
        using var secondRan = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            firstStarted.Set();
            gate.Wait();
            pool.Shutdown(ShutdownMode.Drain);
            shutdownReturned.Set();
        });
        lane.QueueUserWorkItem(_ => secondRan.Set());
        HandTheShutdownToTheFinisher(pool);
        holdOpen.Set();
        Assert.True(SpinWait.SpinUntil(() => pool.HasStopped, TimeSpan.FromSeconds(30)), "The pool never stopped.");

        // A task for the stopped lane drives its queue through its one slot: the first item runs on the built-in pool
        // with the slot, and the finisher's last sweep, once the dedicated thread is let go, waits for the slot to take
        // the second. (The finisher may also have run the first item itself before the stop; then nothing waits.)
        Task third = Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, lane.TaskScheduler);
        Assert.True(firstStarted.Wait(TimeSpan.FromSeconds(30)), "The lane's first item never started.");
        Assert.False(secondRan.IsSet, "The serial lane ran its second item beside the first.");
        keepAlive.Set();
        gate.Set();

        Assert.True(shutdownReturned.Wait(TimeSpan.FromSeconds(30)), "The lane's item's shutdown call waited for the sweep that waits for it.");
        Assert.True(secondRan.Wait(TimeSpan.FromSeconds(30)), "The lane's second item never ran.");
        Assert.True(third.Wait(TimeSpan.FromSeconds(30)), "The task for the stopped lane never ran.");
        Assert.Equal(0, pool.Shutdown(ShutdownMode.Drain));
    }

    [Fact]
    public void AWaitFiringLeftAtTheStop_IsNotCountedAsRedirected_ForItRunsNoCallback()
    {
        // The firing waits in the queue of a pool without workers while a long-running item holds the drain; the stop
        // then hands the leftovers to the built-in pool. A firing runs no callback once shutdown has begun, so it is
        // not counted as a callback that ran there; the plain item queued after it is.
        WorkerPool pool = PoolWithoutWorkers();
        using var release = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        pool.QueueUserWorkItem<int>(_ =>
        {
            started.Set();
            release.Wait(Waits.MustHappen);
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(started, "the long-running item that holds the drain");
        int callbacks = 0;
        var signal = new PoolSignal(false, PoolSignalMode.ManualReset);
        pool.RegisterWait(signal, (_, _) => Interlocked.Increment(ref callbacks), null, Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        signal.Set();
        Waits.Until(() => pool.PendingWorkItemCount == 1, "the firing waits in the queue");
        using var markerRan = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => markerRan.Set());

        using var stopWaiting = new CancellationTokenSource();
        stopWaiting.Cancel();
        Task<int> call = pool.ShutdownAsync(ShutdownMode.Drain, ShutdownMode.Drain, stopWaiting.Token);
        Waits.Until(() => call.IsCanceled, "the shutdown call stops waiting for the stop");
        release.Set(); // the pool stops once the long-running item returns, and hands on what is left

        Waits.For(markerRan, "the plain item queued after the firing, on the built-in pool");
        Thread.Sleep(200); // the firing was handed on before the marker: it has started by now, if ever
        Assert.Equal(0, Volatile.Read(ref callbacks));
        Assert.Equal(1, pool.RedirectedCallbackCount);
        Waits.RunBounded(pool.Dispose, "the pool's dispose");
    }
}
