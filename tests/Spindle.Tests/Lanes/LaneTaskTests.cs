using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// A lane's <see cref="WorkTarget.TaskScheduler"/>, <see cref="WorkTarget.SynchronizationContext"/> and <c>Run</c> keep
/// work in the lane: child tasks, continuations and awaits come back to it, under its cap.
/// </summary>
public sealed class LaneTaskTests
{
    private static WorkerPool NewPool(string name) => new(new WorkerPoolOptions { Name = name, MinThreads = 4 });

    [Fact]
    public async Task TasksOfALanesScheduler_AndTheirChildrenAndContinuations_RunInTheLane()
    {
        using WorkerPool pool = NewPool(nameof(TasksOfALanesScheduler_AndTheirChildrenAndContinuations_RunInTheLane));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "tasks", MaxConcurrency = 2 });
        var factory = new TaskFactory(lane.TaskScheduler);

        (WorkerPoolLane? Parent, WorkerPoolLane? Child, WorkerPoolLane? AfterYield) seen = await factory.StartNew(async () =>
        {
            WorkerPoolLane? parent = WorkerPoolLane.Current;
            WorkerPoolLane? child = await Task.Factory.StartNew(() => WorkerPoolLane.Current); // TaskScheduler.Current is the lane's
            await Task.Yield();
            return (parent, child, WorkerPoolLane.Current);
        }).Unwrap().WaitAsync(Waits.MustHappen);

        Assert.Same(lane, seen.Parent);
        Assert.Same(lane, seen.Child);
        Assert.Same(lane, seen.AfterYield);

        WorkerPoolLane? continuedOn = await factory.StartNew(() => { })
            .ContinueWith(_ => WorkerPoolLane.Current, lane.TaskScheduler)
            .WaitAsync(Waits.MustHappen);
        Assert.Same(lane, continuedOn);
    }

    [Fact]
    public async Task AwaitsInsideALanesRun_ResumeInTheLane()
    {
        using WorkerPool pool = NewPool(nameof(AwaitsInsideALanesRun_ResumeInTheLane));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "async", Priority = LanePriority.High, MaxConcurrency = 1 });

        WorkerPoolLane?[] seen = await lane.Run(async () =>
        {
            var found = new WorkerPoolLane?[3];
            found[0] = WorkerPoolLane.Current;
            await Task.Delay(5);
            found[1] = WorkerPoolLane.Current;
            await Task.Yield();
            found[2] = WorkerPoolLane.Current;
            return found;
        }).WaitAsync(Waits.MustHappen);

        Assert.All(seen, current => Assert.Same(lane, current));
        Assert.Equal(7, await lane.RunAsValueTask(() => 7).AsTask().WaitAsync(Waits.MustHappen));
    }

    [Fact]
    public void PostsToALanesContext_RunInTheLane_AndSendRunsThereToo()
    {
        using WorkerPool pool = NewPool(nameof(PostsToALanesContext_RunInTheLane_AndSendRunsThereToo));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "context" });
        WorkerPoolLane? postedOn = null;
        SynchronizationContext? postedContext = null;
        using var posted = new ManualResetEventSlim();

        lane.SynchronizationContext.Post(_ =>
        {
            postedOn = WorkerPoolLane.Current;
            postedContext = SynchronizationContext.Current;
            posted.Set();
        }, null);
        Waits.For(posted, "the post");
        WorkerPoolLane? sentOn = null;
        lane.SynchronizationContext.Send(_ => sentOn = WorkerPoolLane.Current, null);

        Assert.Same(lane, postedOn);
        Assert.Same(lane.SynchronizationContext, postedContext);
        Assert.Same(lane, sentOn);
        Assert.NotEqual<SynchronizationContext>(pool.SynchronizationContext, lane.SynchronizationContext);
    }

    [Fact]
    public void ParallelOnACappedLanesScheduler_NeverExceedsTheCap()
    {
        using WorkerPool pool = NewPool(nameof(ParallelOnACappedLanesScheduler_NeverExceedsTheCap));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "parallel", MaxConcurrency = 2 });
        int running = 0;
        int maxRunning = 0;
        int outsideLane = 0;

        Task loop = Task.Factory.StartNew(() =>
        {
            Parallel.For(0, 200, new ParallelOptions { TaskScheduler = lane.TaskScheduler }, _ =>
            {
                int now = Interlocked.Increment(ref running);
                int max = Volatile.Read(ref maxRunning);
                while (now > max && Interlocked.CompareExchange(ref maxRunning, now, max) != max)
                {
                    max = Volatile.Read(ref maxRunning);
                }
                if (WorkerPoolLane.Current != lane)
                {
                    Interlocked.Increment(ref outsideLane);
                }
                Thread.SpinWait(1_000);
                Interlocked.Decrement(ref running);
            });
        }, CancellationToken.None, TaskCreationOptions.None, lane.TaskScheduler);

        Assert.True(loop.Wait(Waits.MustHappen));
        Assert.InRange(maxRunning, 1, 2);
        Assert.Equal(0, outsideLane);
    }

    [Fact]
    public void ALanesScheduler_InlinesInsideTheLane()
    {
        // Not disposed on failure: a failed inline leaves the lane's only slot waiting forever, and the drain with it.
        var pool = NewPool(nameof(ALanesScheduler_InlinesInsideTheLane));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "inline", MaxConcurrency = 1 });

        // Waiting (without a timeout, the form Task.Wait inlines) inside the lane's only slot for a task of the same
        // lane: only inlining lets it finish.
        Task<WorkerPoolLane?> outer = Task.Factory.StartNew(() =>
        {
            var inner = new Task<WorkerPoolLane?>(() => WorkerPoolLane.Current);
            inner.Start(lane.TaskScheduler);
            inner.Wait();
            return inner.Result;
        }, CancellationToken.None, TaskCreationOptions.None, lane.TaskScheduler);

        Assert.True(outer.Wait(Waits.MustHappen), "the inner task was inlined in the lane's slot");
        Assert.Same(lane, outer.Result);
        pool.Dispose();
    }
}
