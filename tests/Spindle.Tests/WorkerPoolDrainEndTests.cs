using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A drain ends: work that keeps arriving during the drain without being accepted work (a periodic timer's firings)
/// must not keep a shutting-down pool alive by replacing each worker that leaves with a new one.
/// </summary>
public sealed class WorkerPoolDrainEndTests
{
    /// <summary>
    /// Every worker's way out is slow (its stop hook sleeps 20 ms) and a timer fires every millisecond. Were a firing that
    /// finds no worker free to add one, each worker on its way out would have a successor before it left, and the pool
    /// would never be without a worker, which is when it stops. The drain must end, and the firings run meanwhile.
    /// </summary>
    [Theory]
    [InlineData(ShutdownMode.Drain)]
    [InlineData(ShutdownMode.CancelPending)]
    public void APeriodicTimer_AndSlowWorkerExits_DoNotKeepTheShutdownFromEnding(ShutdownMode mode)
    {
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolDrainEndTests),
            MinThreads = 0,
            MaxThreads = 4,
            OnWorkerStopping = static () => Thread.Sleep(20),
        });
        int firings = 0;
        using ITimer timer = pool.CreateTimer(_ => Interlocked.Increment(ref firings), null, TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(1));
        // Some ordinary work, so that more than one worker exists when the shutdown begins.
        for (int i = 0; i < 64; i++)
        {
            pool.QueueUserWorkItem(static _ => Thread.SpinWait(2000), null);
        }
        Assert.True(Waits.Poll(() => Volatile.Read(ref firings) >= 5, Waits.MustHappen), "the timer did not fire");

        Task<int> shutdown = Task.Factory.StartNew(() => pool.Shutdown(mode), TaskCreationOptions.LongRunning);
        Assert.True(shutdown.Wait(Waits.MustHappen),
            $"{mode} did not return within {Waits.MustHappen.TotalSeconds} s while a periodic timer kept firing: {pool.DescribeInjectionState()}");
        Assert.Equal(0, pool.ThreadCount);
    }
}
