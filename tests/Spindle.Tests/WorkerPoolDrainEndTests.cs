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

    /// <summary>
    /// Periodic timers that ask for more than the pool can give (twenty timers every millisecond, each callback spinning
    /// for 200 µs, on one thread) keep the queue of fired timers from ever emptying. Fired timers do not keep a
    /// shutting-down pool: once its accepted work has run, it stops, and the timers go on firing on the built-in pool
    /// until they are disposed.
    /// </summary>
    [Theory]
    [InlineData(ShutdownMode.Drain)]
    [InlineData(ShutdownMode.CancelPending)]
    public void TimersThatSaturateThePool_DoNotKeepTheShutdownFromEnding(ShutdownMode mode)
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolDrainEndTests), MinThreads = 1, MaxThreads = 1 });
        int firings = 0;
        var timers = new ITimer[20];
        for (int i = 0; i < timers.Length; i++)
        {
            timers[i] = pool.CreateTimer(_ =>
            {
                Interlocked.Increment(ref firings);
                long until = System.Diagnostics.Stopwatch.GetTimestamp() + System.Diagnostics.Stopwatch.Frequency / 5000;
                while (System.Diagnostics.Stopwatch.GetTimestamp() < until)
                {
                }
            }, null, TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(1));
        }
        try
        {
            int ran = 0;
            pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), null);
            Assert.True(Waits.Poll(() => Volatile.Read(ref firings) >= 50, Waits.MustHappen), "the timers did not fire");

            Task<int> shutdown = Task.Factory.StartNew(() => pool.Shutdown(mode), TaskCreationOptions.LongRunning);
            Assert.True(shutdown.Wait(Waits.MustHappen),
                $"{mode} did not return within {Waits.MustHappen.TotalSeconds} s while the timers kept the pool busy: {pool.DescribeInjectionState()}");
            Assert.Equal(1, Volatile.Read(ref ran));
            Assert.Equal(0, pool.ThreadCount);
            int before = Volatile.Read(ref firings);
            Assert.True(Waits.Poll(() => Volatile.Read(ref firings) > before, Waits.MustHappen), "the timers stopped firing when the pool stopped");
        }
        finally
        {
            foreach (ITimer timer in timers)
            {
                timer.Dispose();
            }
        }
    }
}
