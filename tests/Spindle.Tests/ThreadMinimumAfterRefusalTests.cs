using System;
using System.Threading;
using Spindle.Primitives;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The pool gets back to its minimum after refused worker starts: a start that raising the minimum made, and one whose
/// listing let an idle worker retire while the start was in flight.
/// </summary>
public sealed class ThreadMinimumAfterRefusalTests
{
    private static void RunOne(WorkerPool pool)
    {
        using var ran = new ManualResetEventSlim();
        pool.QueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), ran);
        Waits.For(ran, "an item");
    }

    /// <summary>
    /// SetThreadLimits raises the minimum; the first start it makes is refused once (a transient OOM). The refusal is
    /// counted, and the retry after its backoff brings the idle pool up to its new minimum.
    /// </summary>
    [Fact]
    public void ARaisedMinimum_WithOneRefusedStart_IsMetAfterTheRetry()
    {
        int refuseNext = 0;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            MinThreads = 1,
            MaxThreads = 4,
            IdleTimeout = Timeout.InfiniteTimeSpan,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnThreadStarting = kind =>
            {
                if (kind == PoolThreadKind.Worker && Interlocked.Exchange(ref refuseNext, 0) == 1)
                {
                    throw new OutOfMemoryException();
                }
            },
        });
        RunOne(pool);
        Assert.Equal(1, pool.ThreadCount);
        Volatile.Write(ref refuseNext, 1);
        pool.SetThreadLimits(3, 4);
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed));
        // Backoff is 1 ms after one refusal: a retry, if any, is long done within 10 s.
        Assert.True(Waits.Poll(() => pool.ThreadCount >= 3, Waits.MustHappen),
            $"ThreadCount {pool.ThreadCount} stays below the raised MinThreads {pool.MinThreads} after one transient refusal; " +
            $"MinimumRaised injections {pool.GetThreadInjectionCount(ThreadInjectionReason.MinimumRaised)}; {pool.DescribeInjectionState()}");
    }

    /// <summary>
    /// A worker listed for a start that is then refused counts toward the idle-retirement floor while its start is in
    /// flight: a parked worker retires because of it (RetiredIdle), the start fails, and the pool is left with no
    /// thread; the retry after the refusal's backoff restores the minimum.
    /// </summary>
    [Fact]
    public void AnIdleRetirementBesideAStartThatIsRefused_LeavesThePoolAtItsMinimumAfterTheRetry()
    {
        Assert.SkipWhen(Environment.ProcessorCount < 2, "a second worker is listed only with a target of 2: MaxThreads 2 on two cores or more");
        int armed = 0;
        using var entered = new ManualResetEventSlim();
        using var refuse = new ManualResetEventSlim();
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            MinThreads = 1,
            MaxThreads = 2,
            IdleTimeout = TimeSpan.FromMilliseconds(100),
            OutsideWorkReliefDelay = Timeout.InfiniteTimeSpan,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnThreadStarting = kind =>
            {
                if (kind == PoolThreadKind.Worker && Interlocked.Exchange(ref armed, 0) == 1)
                {
                    entered.Set();
                    refuse.Wait();
                    throw new OutOfMemoryException();
                }
            },
        });
        using var gateA = new ManualResetEventSlim();
        using var startedA = new ManualResetEventSlim();
        using var ranB = new ManualResetEventSlim();
        try
        {
            RunOne(pool);
            Assert.Equal(1, pool.ThreadCount);
            pool.QueueUserWorkItem(_ => { startedA.Set(); gateA.Wait(); }, null);
            Waits.For(startedA, "item A on the only worker");
            // RunOne returns while its item is still finishing, so A's enqueue may have found nobody free and added a
            // second worker: that one retires after the idle timeout (2 > MinThreads 1), leaving A's worker alone.
            Waits.Until(() => pool.ThreadCount == 1, "a single worker, the one running A");
            long retiredBefore = pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle);
            Volatile.Write(ref armed, 1);
            // This enqueue finds nobody free, lists a second worker and blocks in its (to be refused) start.
            TestThread enqueuer = Waits.Start(() => pool.QueueUserWorkItem(_ => ranB.Set(), null), "enqueuer");
            Assert.True(entered.Wait(Waits.MustHappen),
                $"No second worker's start within {Waits.MustHappen.TotalSeconds} s: ThreadCount {pool.ThreadCount}, B ran {ranB.IsSet}, {pool.DescribeInjectionState()}");
            Assert.Equal(2, pool.ThreadCount);
            gateA.Set();
            Waits.For(ranB, "item B on the first worker");
            // The first worker parks, times out and retires: the pool counts 2 > MinThreads 1, one of them unstarted.
            bool retired = Waits.Poll(() => pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle) == retiredBefore + 1, Waits.MustHappen);
            Assert.True(retired, $"No idle retirement within {Waits.MustHappen.TotalSeconds} s: {pool.DescribeInjectionState()}");
            refuse.Set();
            enqueuer.Join();
        }
        finally
        {
            // A failed step must not leave the refused start blocked: the pool's disposal would wait for it for ever.
            gateA.Set();
            refuse.Set();
        }
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed));
        Assert.True(Waits.Poll(() => pool.ThreadCount >= pool.MinThreads, Waits.MustHappen),
            $"ThreadCount {pool.ThreadCount} below MinThreads {pool.MinThreads} after an idle retirement counted an unstarted worker; {pool.DescribeInjectionState()}");
    }
}
