using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A cancelling shutdown completes the tasks of the Run items it drops on the thread that shuts down, and those tasks'
/// synchronous continuations are the caller's code. That code may dispose the pool or the lane, or shut it down and wait
/// for its stop: it runs after the sweep has let go of what keeps the stop off (the pool's drain, a lane's hold and
/// slot), so the wait ends, and the tasks are still complete when the shutdown call returns.
/// </summary>
public sealed class CancelSweepCompletionTests
{
    public enum RunForm
    {
        /// <summary><c>Run(Action)</c> without a token: the lean item.</summary>
        Action,

        /// <summary><c>Run(Func)</c> with a token that can be cancelled: the general item.</summary>
        FuncWithToken,

        /// <summary><c>RunAsValueTask(Action)</c>: the pooled value-task item.</summary>
        ValueTask,
    }

    private static WorkerPool NewPool(string name, int threads) => new(new WorkerPoolOptions
    {
        Name = $"{name}-{Guid.NewGuid():N}",
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    private static Task Queue(WorkTarget target, RunForm form, CancellationToken token) => form switch
    {
        RunForm.Action => target.Run(() => { }, CancellationToken.None), // a token that cannot be cancelled: the lean item
        RunForm.FuncWithToken => target.Run(() => 42, token),
        _ => target.RunAsValueTask(() => { }, CancellationToken.None).AsTask(),
    };

    [Theory]
    [InlineData(RunForm.Action)]
    [InlineData(RunForm.FuncWithToken)]
    [InlineData(RunForm.ValueTask)]
    public void ContinuationOfARunTheSweepCancels_CanDisposeThePool(RunForm form)
    {
        WorkerPool pool = NewPool(nameof(ContinuationOfARunTheSweepCancels_CanDisposeThePool), threads: 1);
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        using var tokenSource = new CancellationTokenSource();
        Task queued = Queue(pool, form, tokenSource.Token); // stays queued: the only worker is held
        using var continuationStarted = new ManualResetEventSlim();
        int continuationThread = 0;
        Task continuation = queued.ContinueWith(_ =>
        {
            continuationThread = Environment.CurrentManagedThreadId;
            continuationStarted.Set();
            pool.Dispose(); // the awaiting method's using block, say: waits for the stop
        }, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);

        int shutdownThread = 0;
        var shutdown = new Thread(() =>
        {
            shutdownThread = Environment.CurrentManagedThreadId;
            pool.Shutdown(ShutdownMode.CancelPending);
        })
        { IsBackground = true, Name = "shutdown" };
        shutdown.Start();
        Waits.For(continuationStarted, "the cancelled task's continuation");
        Assert.True(queued.IsCanceled);
        gate.Set(); // the worker's item ends: nothing else keeps the pool from stopping now

        Assert.True(shutdown.Join(Waits.MustHappen),
            "Shutdown(CancelPending) never returned: the continuation's Dispose waited for a stop the sweep kept off");
        Assert.Equal(shutdownThread, continuationThread); // it did run on the shutting-down thread, after the sweep
        Assert.True(continuation.Wait(Waits.MustHappen));
        Assert.True(pool.HasStopped);
    }

    [Fact]
    public void TasksTheSweepCancels_AreCompleteWhenShutdownReturns()
    {
        using WorkerPool pool = NewPool(nameof(TasksTheSweepCancels_AreCompleteWhenShutdownReturns), threads: 1);
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        using var tokenSource = new CancellationTokenSource();
        Task lean = Queue(pool, RunForm.Action, tokenSource.Token);
        Task general = Queue(pool, RunForm.FuncWithToken, tokenSource.Token);
        Task pooled = Queue(pool, RunForm.ValueTask, tokenSource.Token);
        Task<int> shutdown = Task.Run(() => pool.Shutdown(ShutdownMode.CancelPending));
        // The sweep runs on the calling thread before the shutdown waits for the worker: the tasks end first.
        Assert.True(Task.WhenAll(lean.ContinueWith(_ => { }), general.ContinueWith(_ => { }), pooled.ContinueWith(_ => { }))
            .Wait(Waits.MustHappen));
        Assert.True(lean.IsCanceled);
        Assert.True(general.IsCanceled);
        Assert.True(pooled.IsCanceled);
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the shutdown did not return");
        Assert.Equal(3, shutdown.Result); // the three cancelled, counted as the sweep met them
    }

    [Fact]
    public void CodeResumedByALanesCancelSweep_CanWaitForTheLanesStop()
    {
        using WorkerPool pool = NewPool(nameof(CodeResumedByALanesCancelSweep_CanWaitForTheLanesStop), threads: 2);
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "capped", MaxConcurrency = 1 });
        using var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(started, "the item holding the lane's only slot");
        Task queued = lane.Run(() => { });
        bool? stoppedInTime = null;
        bool resumedOnTheSweepingThread = false;

        Waits.RunBounded(() =>
        {
            // A plain thread: no SynchronizationContext, so the await resumes inline where the task completes.
            Thread sweeper = Thread.CurrentThread;
            async Task AwaitThenWaitForTheStop()
            {
                await queued.ContinueWith(_ => { }, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
                resumedOnTheSweepingThread = Thread.CurrentThread == sweeper;
                gate.Set(); // the running item ends now
                stoppedInTime = lane.ShutdownAsync(ShutdownMode.Drain).Wait(Waits.MustHappen);
            }
            Task awaiter = AwaitThenWaitForTheStop();
            lane.Shutdown(ShutdownMode.CancelPending);
            Assert.True(awaiter.IsCompleted);
        }, "the lane's cancelling shutdown");

        Assert.True(queued.IsCanceled);
        Assert.True(resumedOnTheSweepingThread, "the await resumed elsewhere: the test shows nothing");
        Assert.True(stoppedInTime, "the lane did not stop while code resumed by its cancel sweep waited for it");
    }

    [Fact]
    public void CodeResumedByThePoolsCancelSweepOfALane_CanWaitForThePoolsStop()
    {
        WorkerPool pool = NewPool(nameof(CodeResumedByThePoolsCancelSweepOfALane_CanWaitForThePoolsStop), threads: 2);
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "capped", MaxConcurrency = 1 });
        using var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(started, "the item holding the lane's only slot");
        Task queued = lane.Run(() => { });
        bool? stoppedInTime = null;
        bool resumedOnTheSweepingThread = false;

        Waits.RunBounded(() =>
        {
            Thread sweeper = Thread.CurrentThread;
            async Task AwaitThenWaitForTheStop()
            {
                await queued.ContinueWith(_ => { }, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
                resumedOnTheSweepingThread = Thread.CurrentThread == sweeper;
                gate.Set();
                stoppedInTime = pool.ShutdownAsync(ShutdownMode.Drain).Wait(Waits.MustHappen);
            }
            Task awaiter = AwaitThenWaitForTheStop();
            pool.Shutdown(ShutdownMode.CancelPending);
            Assert.True(awaiter.IsCompleted);
        }, "the pool's cancelling shutdown");

        Assert.True(queued.IsCanceled);
        Assert.True(resumedOnTheSweepingThread, "the await resumed elsewhere: the test shows nothing");
        Assert.True(stoppedInTime, "the pool did not stop while code resumed by its cancel sweep waited for it");
        pool.Dispose();
    }
}
