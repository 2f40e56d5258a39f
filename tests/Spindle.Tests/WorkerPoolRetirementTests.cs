using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>Idle retirement: threads above the minimum exit after the idle timeout, and new work still runs.</summary>
public sealed class WorkerPoolRetirementTests
{
    private static WorkerPool NewPool(int minThreads, TimeSpan idleTimeout) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolRetirementTests),
        MinThreads = minThreads,
        MaxThreads = 8,
        IdleTimeout = idleTimeout,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    private static void RunConcurrently(WorkerPool pool, int count)
    {
        using var all = new CountdownEvent(count);
        using var finished = new CountdownEvent(count);
        for (int i = 0; i < count; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                all.Signal();
                all.Wait(Waits.MustHappen);
                finished.Signal();
            });
        }
        Waits.For(finished, $"{count} concurrent items");
    }

    [Fact]
    public void IdleThreadsAboveTheMinimum_Retire_AndALaterBurstStillRuns()
    {
        // As many items as the pool's target (ProcessorCount), so the threads are not surplus: they retire by idling.
        int threads = Environment.ProcessorCount;
        using var pool = NewPool(minThreads: 1, TimeSpan.FromMilliseconds(50));
        RunConcurrently(pool, threads);
        Waits.Until(() => pool.ThreadCount == 1, $"idle threads to retire down to the minimum (threads: {pool.ThreadCount})");
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle)
            + pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredSurplus) >= threads - 1);
        Waits.Never(() => pool.ThreadCount < 1, "retiring below the minimum");

        RunConcurrently(pool, 4); // revival
        using var ledger = new ExactlyOnceLedger(1000);
        for (int i = 0; i < 1000; i++)
        {
            int index = i;
            pool.QueueUserWorkItem(_ => ledger.Hit(index));
        }
        ledger.WaitForAll("a burst after retirement");
        ledger.AssertExactlyOnce();
    }

    [Fact]
    public void MinimumZero_EveryThreadRetires_AndWorkStillRuns()
    {
        using var pool = NewPool(minThreads: 0, TimeSpan.FromMilliseconds(20));
        RunConcurrently(pool, 2);
        Waits.Until(() => pool.ThreadCount == 0, $"every idle thread to retire (threads: {pool.ThreadCount})");
        using var ran = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => ran.Set());
        Waits.For(ran, "an item queued to a pool with no threads");
    }

    [Fact]
    public void ItemsQueuedAroundTheIdleTimeout_AreNeverLost()
    {
        // The known retirement race: a worker times out just as an item arrives. Gaps straddle the timeout so that some
        // enqueues land while a worker is deciding to retire; every item must still run exactly once. A batch in which
        // no worker happened to retire by the idle timeout (on a loaded machine a timed-out worker may be scheduled only
        // after the next item has woken it) did not exercise the race, so batches go on until one did, up to ten.
        const int rounds = 60;
        using var pool = NewPool(minThreads: 0, TimeSpan.FromMilliseconds(5));
        var random = new Random(42);
        for (int batch = 0; batch < 10 && pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle) == 0; batch++)
        {
            using var ledger = new ExactlyOnceLedger(rounds * 2);
            for (int round = 0; round < rounds; round++)
            {
                int index = round * 2;
                pool.QueueUserWorkItem(_ => ledger.Hit(index));
                pool.UnsafeQueueUserWorkItem(_ => ledger.Hit(index + 1), null);
                Thread.Sleep(random.Next(3, 9));
            }
            ledger.WaitForAll("items queued around the idle timeout");
            ledger.AssertExactlyOnce();
        }
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle) >= 1, "no worker retired by the idle timeout in ten batches");
    }

    [Fact]
    public void InfiniteIdleTimeout_KeepsThreads()
    {
        int threads = Environment.ProcessorCount;
        using var pool = NewPool(minThreads: 0, System.Threading.Timeout.InfiniteTimeSpan);
        RunConcurrently(pool, threads);
        Waits.Until(() => pool.ThreadTarget == threads, "a starvation boost from the concurrent items (if any) to decay");
        Waits.Until(() => pool.ThreadCount == threads, "surplus threads (if any) to retire");
        Waits.Never(() => pool.ThreadCount < threads, "a thread retiring with an infinite idle timeout");
        Assert.Equal(0, pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle));
    }

    [Fact]
    public void Dispose_AfterRetirements_LeavesNoThreadRunning()
    {
        var pool = NewPool(minThreads: 0, TimeSpan.FromMilliseconds(10));
        RunConcurrently(pool, 4);
        Waits.Until(() => pool.ThreadCount == 0, "every thread to retire");
        pool.Dispose();
        Assert.Equal(0, pool.ThreadCount);
    }
}
