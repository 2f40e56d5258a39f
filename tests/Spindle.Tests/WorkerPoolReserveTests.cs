using System;
using System.Collections.Concurrent;
using System.Linq;
using System.Threading;
using Spindle.Primitives;
using Spindle.Scheduling;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The reserve: workers retired as surplus keep their threads parked for reuse until the idle timeout, the next thread
/// the pool adds is taken from there instead of started, and shutdown and a lowered maximum end them.
/// </summary>
public sealed class WorkerPoolReserveTests
{
    /// <summary>More blocked items than the pool's target, so the stall monitor must add threads for them.</summary>
    private static readonly int s_burst = Environment.ProcessorCount + 6;

    private sealed class Observed : IDisposable
    {
        private long _workerStarts;

        public Observed(TimeSpan idleTimeout, int maxThreads = 64)
        {
            var options = new WorkerPoolOptions
            {
                Name = nameof(WorkerPoolReserveTests),
                MinThreads = 1,
                MaxThreads = maxThreads,
                IdleTimeout = idleTimeout,
                ExceptionPolicy = UnhandledExceptionPolicy.Report,
                // The relief thread runs the hooks too: only workers' threads are collected.
                OnWorkerStarted = () =>
                {
                    if (Worker.Current is not null)
                    {
                        WorkerThreads.Add(Thread.CurrentThread);
                    }
                },
                OnThreadStarting = kind =>
                {
                    if (kind == PoolThreadKind.Worker)
                    {
                        Interlocked.Increment(ref _workerStarts);
                    }
                },
            };
            Pool = new WorkerPool(options);
        }

        public WorkerPool Pool { get; }

        /// <summary>Every worker thread the pool started (each once).</summary>
        public ConcurrentBag<Thread> WorkerThreads { get; } = [];

        /// <summary>Worker threads the pool asked the OS to start.</summary>
        public long WorkerStarts => Interlocked.Read(ref _workerStarts);

        /// <summary>Workers the pool put in service (started or taken from the reserve).</summary>
        public long Added => Pool.GetThreadInjectionCount(ThreadInjectionReason.Demand)
            + Pool.GetThreadInjectionCount(ThreadInjectionReason.Starvation)
            + Pool.GetThreadInjectionCount(ThreadInjectionReason.BlockingRegion)
            + Pool.GetThreadInjectionCount(ThreadInjectionReason.MinimumRaised);

        /// <summary>
        /// Runs <paramref name="count"/> items that all block until every one of them is running (the stall monitor adds
        /// the threads), then lets them finish, and waits until the pool is back at its target.
        /// </summary>
        public void BlockingBurst(int count)
        {
            using var running = new CountdownEvent(count);
            using var gate = new ManualResetEventSlim();
            using var finished = new CountdownEvent(count);
            for (int i = 0; i < count; i++)
            {
                Pool.QueueUserWorkItem(_ =>
                {
                    running.Signal();
                    gate.Wait(Waits.MustHappen);
                    finished.Signal();
                });
            }
            Waits.For(running, $"{count} blocked items to run at once (threads: {Pool.ThreadCount}, reserved: {Pool.ReservedThreadCount})");
            gate.Set();
            Waits.For(finished, $"{count} released items");
            Waits.Until(() => Pool.ThreadCount <= Pool.ThreadTarget && Pool.ThreadTarget == Math.Max(1, Environment.ProcessorCount),
                $"the pool back at its target after the burst (threads {Pool.ThreadCount}, target {Pool.ThreadTarget})");
        }

        public void Dispose() => Pool.Dispose();
    }

    [Fact]
    public void SurplusAfterABurst_WaitsInTheReserve_AndTheNextBurstTakesItBeforeStartingThreads()
    {
        using var observed = new Observed(TimeSpan.FromMinutes(5));
        WorkerPool pool = observed.Pool;
        observed.BlockingBurst(s_burst);
        Waits.Until(() => pool.ThreadCount + pool.ReservedThreadCount == observed.WorkerStarts,
            $"every started thread in service or in the reserve (started {observed.WorkerStarts}, in service {pool.ThreadCount}, reserved {pool.ReservedThreadCount})");
        int reserved = pool.ReservedThreadCount;
        Assert.True(reserved >= s_burst - pool.ThreadCount, $"{reserved} threads in the reserve after a burst of {s_burst} blocked items");
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredSurplus) >= reserved);
        Assert.Equal(0, pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle));

        long startsBefore = observed.WorkerStarts;
        long addedBefore = observed.Added;
        observed.BlockingBurst(s_burst);
        long started = observed.WorkerStarts - startsBefore;
        long reused = observed.Added - addedBefore - started;
        // A thread is started only once the reserve is empty, so either the burst started none, or it reused them all.
        Assert.True(started == 0 || reused == reserved,
            $"the second burst started {started} threads and reused {reused} of the {reserved} in the reserve");
        Assert.True(reused >= Math.Min(reserved, s_burst - Environment.ProcessorCount),
            $"the second burst of {s_burst} reused {reused} of the {reserved} reserved threads");
    }

    [Fact]
    public void ReservedThreads_ExitAfterTheIdleTimeout()
    {
        using var observed = new Observed(TimeSpan.FromMilliseconds(100));
        WorkerPool pool = observed.Pool;
        observed.BlockingBurst(s_burst);
        Waits.Until(() => pool.ReservedThreadCount == 0, $"the reserve to empty after the idle timeout ({pool.ReservedThreadCount} left)");
        Waits.Until(() => observed.WorkerThreads.Count(t => t.IsAlive) <= pool.ThreadCount,
            $"reserved threads to end (alive {observed.WorkerThreads.Count(t => t.IsAlive)}, in service {pool.ThreadCount})");

        using var ledger = new ExactlyOnceLedger(500);
        for (int i = 0; i < 500; i++)
        {
            int index = i;
            pool.QueueUserWorkItem(_ => ledger.Hit(index));
        }
        ledger.WaitForAll("items after the reserve emptied");
        ledger.AssertExactlyOnce();
    }

    [Fact]
    public void Dispose_WithThreadsInTheReserve_EndsThemAll()
    {
        var observed = new Observed(TimeSpan.FromMinutes(5));
        WorkerPool pool = observed.Pool;
        observed.BlockingBurst(s_burst);
        Waits.Until(() => pool.ReservedThreadCount > 0, "threads in the reserve");
        pool.Dispose();
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(0, pool.ReservedThreadCount);
        Thread[] alive = observed.WorkerThreads.Where(t => t.IsAlive).ToArray();
        Assert.True(alive.Length == 0, $"{alive.Length} worker threads still alive after Dispose: {string.Join(", ", alive.Select(t => t.Name))}");
    }

    [Fact]
    public void LoweringTheMaximum_EndsReservedThreadsAboveIt()
    {
        using var observed = new Observed(TimeSpan.FromMinutes(5));
        WorkerPool pool = observed.Pool;
        observed.BlockingBurst(s_burst);
        Waits.Until(() => pool.ReservedThreadCount > 0, "threads in the reserve");
        const int max = 2;
        pool.SetThreadLimits(1, max);
        Waits.Until(() => pool.ThreadCount + pool.ReservedThreadCount <= max,
            $"the threads held within the new maximum (in service {pool.ThreadCount}, reserved {pool.ReservedThreadCount})");
        Waits.Until(() => observed.WorkerThreads.Count(t => t.IsAlive) <= max,
            $"threads above the new maximum to end ({observed.WorkerThreads.Count(t => t.IsAlive)} alive)");
        Waits.Never(() => pool.ThreadCount + pool.ReservedThreadCount > max, "the pool holding more threads than its maximum");
    }

    [Fact]
    public void RepeatedBursts_ThroughTheReserve_RunEveryItemExactlyOnce()
    {
        // Blocked bursts fill and drain the reserve while short items keep arriving: the short items find workers that
        // retire into the reserve, workers taken back from it, and workers started when it is empty.
        using var observed = new Observed(TimeSpan.FromMilliseconds(50));
        WorkerPool pool = observed.Pool;
        const int rounds = 12;
        const int perRound = 300;
        using var ledger = new ExactlyOnceLedger(rounds * perRound);
        for (int round = 0; round < rounds; round++)
        {
            for (int i = 0; i < perRound; i++)
            {
                int index = round * perRound + i;
                if (i % 2 == 0)
                {
                    pool.QueueUserWorkItem(_ => ledger.Hit(index));
                }
                else
                {
                    pool.UnsafeQueueUserWorkItem(_ => ledger.Hit(index), null);
                }
            }
            observed.BlockingBurst(s_burst);
            if (round % 4 == 3)
            {
                Thread.Sleep(80); // past the idle timeout: the reserve empties and the next burst starts threads
            }
        }
        ledger.WaitForAll("short items queued between bursts");
        ledger.AssertExactlyOnce();
        Assert.True(observed.Added > observed.WorkerStarts, $"no worker was taken from the reserve (added {observed.Added}, started {observed.WorkerStarts})");
    }
}
