using System;
using System.Globalization;
using System.Threading;
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
}
