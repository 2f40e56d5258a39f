using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Where a method has the built-in pool's signature it behaves like the built-in pool: the queue it uses, and what the
/// pool's <see cref="TaskScheduler"/> tells <see cref="Parallel"/> about its concurrency.
/// </summary>
public sealed class WorkerPoolParityTests
{
    private static WorkerPool NewPool(int minThreads, int maxThreads) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolParityTests),
        MinThreads = minThreads,
        MaxThreads = maxThreads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void QueueUserWorkItemWithWaitCallback_FromAWorker_UsesTheGlobalQueue_AsTheBuiltInPoolDoes()
    {
        using WorkerPool pool = NewPool(1, 1);
        using var done = new CountdownEvent(3);
        long globalWithState = -1, globalWithoutState = -1, globalUnsafe = -1;
        pool.QueueUserWorkItem(_ =>
        {
            // The only worker is here, so whatever is queued now stays where it was put until this item returns.
            pool.QueueUserWorkItem(_ => done.Signal(), null);
            globalWithState = pool.GlobalQueueCount;
            pool.QueueUserWorkItem(_ => done.Signal());
            globalWithoutState = pool.GlobalQueueCount;
            pool.UnsafeQueueUserWorkItem(_ => done.Signal(), null);
            globalUnsafe = pool.GlobalQueueCount;
        }, null);
        Waits.For(done, "the queued items");
        Assert.Equal(1, globalWithState);
        Assert.Equal(2, globalWithoutState);
        Assert.Equal(3, globalUnsafe);
    }

    [Fact]
    public void PreferLocalOverloads_FromAWorker_StillUseTheWorkersLocalQueue()
    {
        using WorkerPool pool = NewPool(1, 1);
        using var done = new CountdownEvent(2);
        long global = -1;
        pool.QueueUserWorkItem(_ =>
        {
            pool.QueueUserWorkItem(static (CountdownEvent d) => d.Signal(), done, preferLocal: true);
            pool.QueueUserWorkItem(static (CountdownEvent d) => d.Signal(), done, WorkItemOptions.PreferLocal);
            global = pool.GlobalQueueCount;
        }, null);
        Waits.For(done, "the queued items");
        Assert.Equal(0, global);
    }

    [Theory]
    [InlineData(1, 1)]
    [InlineData(1, 3)]
    [InlineData(2, WorkerPoolOptions.MaxThreadLimit)]
    [InlineData(64, WorkerPoolOptions.MaxThreadLimit)]
    public void TaskSchedulerMaximumConcurrencyLevel_IsWhatThePoolRunsAtOnce(int minThreads, int maxThreads)
    {
        using WorkerPool pool = NewPool(minThreads, maxThreads);
        int expected = Math.Min(maxThreads, Math.Max(minThreads, Environment.ProcessorCount));
        Assert.Equal(expected, pool.TaskScheduler.MaximumConcurrencyLevel);
        Assert.True(pool.TaskScheduler.MaximumConcurrencyLevel <= pool.MaxThreads);
    }

    [Fact]
    public void TaskSchedulerMaximumConcurrencyLevel_FollowsSetThreadLimits()
    {
        using WorkerPool pool = NewPool(1, WorkerPoolOptions.MaxThreadLimit);
        pool.SetThreadLimits(1, 1);
        Assert.Equal(1, pool.TaskScheduler.MaximumConcurrencyLevel);
        pool.SetThreadLimits(Environment.ProcessorCount + 3, WorkerPoolOptions.MaxThreadLimit);
        Assert.Equal(Environment.ProcessorCount + 3, pool.TaskScheduler.MaximumConcurrencyLevel);
    }

    [Fact]
    public void ParallelFor_OverThePoolsScheduler_RunsEveryIterationOnce()
    {
        using WorkerPool pool = NewPool(1, WorkerPoolOptions.MaxThreadLimit);
        var hits = new int[100_000];
        int onPool = 0;
        Parallel.For(0, hits.Length, new ParallelOptions { TaskScheduler = pool.TaskScheduler }, i =>
        {
            Interlocked.Increment(ref hits[i]);
            if (WorkerPool.Current == pool)
            {
                Interlocked.Increment(ref onPool);
            }
        });
        Assert.All(hits, hit => Assert.Equal(1, hit));
        Assert.True(onPool > 0, "the pool's workers took part");
    }
}
