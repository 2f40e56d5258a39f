using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The injection controller: starvation detection (all workers blocked, items blocking on later items), blocking regions, surplus retirement
/// and runtime limits. Every bound is generous; nothing here measures speed.
/// </summary>
public sealed class WorkerPoolInjectionTests
{
    private static int BaseTarget => Environment.ProcessorCount;

    private static WorkerPool NewPool(Action<WorkerPoolOptions>? configure = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolInjectionTests),
            MinThreads = 1,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        configure?.Invoke(options);
        return new WorkerPool(options);
    }

    /// <summary>Occupies <paramref name="count"/> workers with items that block on <paramref name="gate"/>; returns once all are blocked.</summary>
    private static void BlockWorkers(WorkerPool pool, int count, ManualResetEventSlim gate, bool inRegion = false)
    {
        using var blocked = new CountdownEvent(count);
        for (int i = 0; i < count; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                blocked.Signal();
                if (inRegion)
                {
                    using (WorkerPool.EnterBlockingRegion())
                    {
                        gate.Wait(Waits.MustHappen);
                    }
                }
                else
                {
                    gate.Wait(Waits.MustHappen);
                }
            }, null);
        }
        Waits.For(blocked, "the blocking items to start");
    }

    [Fact]
    public void AllWorkersBlocked_OneMoreItemStartsByStarvationInjection()
    {
        // Starvation injection reacts within milliseconds (the stall monitor); the bound here is generous.
        using var pool = NewPool();
        using var gate = new ManualResetEventSlim();
        BlockWorkers(pool, BaseTarget, gate);
        using var release = new Releaser(gate); // a failed assertion must not leave the workers blocked for 30 s

        using var ran = new ManualResetEventSlim();
        int threadsWhenRan = 0;
        pool.QueueUserWorkItem(_ =>
        {
            threadsWhenRan = pool.ThreadCount; // this thread cannot retire while it runs the item
            ran.Set();
        });
        Assert.True(ran.Wait(Waits.MustHappen),
            $"An item queued while every worker is blocked did not start: {pool.DescribeInjectionState()}");
        Assert.False(gate.IsSet);
        Assert.True(threadsWhenRan > BaseTarget);
        // The monitor raises the target and adds the thread; an enqueue racing it may add that thread first, which
        // the pool records as demand.
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.Starvation)
            + pool.GetThreadInjectionCount(ThreadInjectionReason.Demand) > BaseTarget);
        gate.Set();
    }

    [Fact]
    public void StarvationEpisodeEnds_SurplusThreadsRetireToTheTarget()
    {
        using var pool = NewPool();
        using var gate = new ManualResetEventSlim();
        BlockWorkers(pool, BaseTarget, gate);
        using var release = new Releaser(gate);
        using var extra = new CountdownEvent(4);
        for (int i = 0; i < 4; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                extra.Signal();
                gate.Wait(Waits.MustHappen);
            });
        }
        Waits.For(extra, "items queued behind blocked workers to start");
        Assert.True(pool.ThreadCount >= BaseTarget + 4);
        gate.Set();
        Waits.Until(() => pool.ThreadCount <= BaseTarget, $"surplus threads to retire (threads: {pool.ThreadCount})");
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredSurplus) >= 4);

        // The pool still works at its normal size.
        using var after = new CountdownEvent(100);
        for (int i = 0; i < 100; i++)
        {
            pool.QueueUserWorkItem(_ => after.Signal());
        }
        Waits.For(after, "items after the episode");
    }

    [Fact]
    public void ItemsBlockingOnATaskCompletedByALaterItem_AllComplete()
    {
        // Sync-over-async completes: every waiter holds a worker; only injection lets the completing item run.
        const int waiters = 24;
        using var pool = NewPool();
        var source = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var done = new CountdownEvent(waiters);
        for (int i = 0; i < waiters; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                source.Task.Wait();
                done.Signal();
            });
        }
        pool.QueueUserWorkItem(_ => source.SetResult());
        Waits.For(done, "items waiting on a task completed by a later item");
    }

    [Fact]
    public void StarvationNeverExceedsMaxThreads()
    {
        const int max = 3;
        using var pool = NewPool(o => o.MaxThreads = max);
        using var gate = new ManualResetEventSlim();
        int running = 0;
        int peak = 0;
        using var started = new CountdownEvent(max);
        for (int i = 0; i < 10; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                int now = Interlocked.Increment(ref running);
                InterlockedMax(ref peak, now);
                if (!started.IsSet)
                {
                    started.Signal();
                }
                gate.Wait(Waits.MustHappen);
                Interlocked.Decrement(ref running);
            });
        }
        Waits.For(started, "max items to start");
        Waits.Never(() => pool.ThreadCount > max || Volatile.Read(ref peak) > max, "more threads than MaxThreads");
        gate.Set();
        Waits.Until(() => pool.CompletedWorkItemCount == 10, "every item to run");
        Assert.True(peak <= max);
    }

    [Fact]
    public void BlockingRegion_LetsWaitingWorkRunAndRetiresTheReplacementAfterwards()
    {
        using var pool = NewPool();
        using var gate = new ManualResetEventSlim();
        BlockWorkers(pool, BaseTarget, gate, inRegion: true);
        using var release = new Releaser(gate);
        // Each region lends its place (a starvation boost from the start-up, if any, decays once nothing waits).
        Waits.Until(() => pool.ThreadTarget == BaseTarget * 2, $"the target to count the regions (target: {pool.ThreadTarget})");

        using var ran = new CountdownEvent(BaseTarget);
        for (int i = 0; i < BaseTarget; i++)
        {
            pool.QueueUserWorkItem(_ => ran.Signal());
        }
        Waits.For(ran, "items queued while every worker is inside a blocking region");
        Assert.True(pool.ThreadCount > BaseTarget);

        gate.Set();
        Waits.Until(() => pool.ThreadTarget == BaseTarget, "the target to drop when the regions end");
        Waits.Until(() => pool.ThreadCount <= BaseTarget, $"the replacements to retire (threads: {pool.ThreadCount})");
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredSurplus) >= 1);
    }

    [Fact]
    public void BlockingRegionBurst_RunsEveryItemAtOnce_WithoutThreadsBeyondWhatTheItemsNeed()
    {
        // A burst of items that each block inside a region: threads come ahead of the regions (a new worker starts more
        // while items wait), but never more than the waiting items need, give or take the creators that race.
        const int Items = 60;
        using var pool = NewPool(o => o.MaxThreads = 256);
        using var gate = new ManualResetEventSlim();
        using var inside = new CountdownEvent(Items);
        using var done = new CountdownEvent(Items);
        using var release = new Releaser(gate);
        for (int i = 0; i < Items; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                using (WorkerPool.EnterBlockingRegion())
                {
                    inside.Signal();
                    gate.Wait(Waits.MustHappen);
                }
                done.Signal();
            }, null);
        }
        Waits.For(inside, "every item of the burst to be inside its region at once");
        int threads = pool.ThreadCount;
        Assert.True(threads >= Items, $"{threads} threads for {Items} blocked items");
        Assert.True(threads <= BaseTarget + Items + Items / 4, $"{threads} threads for {Items} blocked items and a base target of {BaseTarget}");
        gate.Set();
        Waits.For(done, "the burst to complete");
        Waits.Until(() => pool.ThreadCount <= BaseTarget, $"the burst's threads to retire (threads: {pool.ThreadCount})");
    }

    [Fact]
    public void BlockingRegion_ThreadsStartedAheadForItemsThatDoNotBlock_Retire()
    {
        // Items that block inside a region, queued together with short items: the regions see work waiting, so threads
        // are started ahead of regions that never come; those run the short items, find the pool above its target, and
        // retire while the regions are still open.
        using var pool = NewPool(o => o.MaxThreads = 256);
        using var gate = new ManualResetEventSlim();
        using var release = new Releaser(gate);
        using var inside = new CountdownEvent(BaseTarget);
        using var ran = new CountdownEvent(500);
        for (int i = 0; i < BaseTarget; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                using (WorkerPool.EnterBlockingRegion())
                {
                    inside.Signal();
                    gate.Wait(Waits.MustHappen);
                }
            }, null);
        }
        for (int i = 0; i < 500; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                Thread.SpinWait(2_000);
                ran.Signal();
            }, null);
        }
        Waits.For(inside, "the blocking items to enter their regions");
        Waits.For(ran, "the short items queued with them");
        Waits.Until(() => pool.ThreadCount <= pool.ThreadTarget, $"the threads above the target to retire (threads: {pool.ThreadCount}, target: {pool.ThreadTarget})");
        gate.Set();
        Waits.Until(() => pool.ThreadCount <= BaseTarget, $"the replacements to retire (threads: {pool.ThreadCount})");
    }

    [Fact]
    public void BlockingRegion_NestsCountsOnceAndIsClosedWhenTheItemReturns()
    {
        using var pool = NewPool();
        int targetInOuter = 0, targetInInner = 0, targetAfterInner = 0;
        bool active = false;
        using var done = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            BlockingRegion outer = WorkerPool.EnterBlockingRegion();
            active = outer.IsActive;
            targetInOuter = pool.ThreadTarget;
            using (WorkerPool.EnterBlockingRegion())
            {
                targetInInner = pool.ThreadTarget;
            }
            targetAfterInner = pool.ThreadTarget;
            done.Set();
            // The outer region is left open on purpose: the pool closes it when the item returns.
        });
        Waits.For(done, "the item");
        Assert.True(active);
        Assert.Equal(BaseTarget + 1, targetInOuter);
        Assert.Equal(BaseTarget + 1, targetInInner);
        Assert.Equal(BaseTarget + 1, targetAfterInner);
        Waits.Until(() => pool.ThreadTarget == BaseTarget, "the abandoned region to be closed");
    }

    [Fact]
    public void BlockingRegion_OutsideAPoolIsInactiveAndDisposingItDoesNothing()
    {
        BlockingRegion region = WorkerPool.EnterBlockingRegion();
        Assert.False(region.IsActive);
        region.Dispose();
        region.Dispose();
        Assert.False(default(BlockingRegion).IsActive);
    }

    [Fact]
    public void BlockingRegion_DisposedOnAnotherThread_Throws()
    {
        using var pool = NewPool();
        BlockingRegion region = default;
        using var entered = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            region = WorkerPool.EnterBlockingRegion();
            entered.Set();
            release.Wait(Waits.MustHappen);
            region.Dispose();
        });
        Waits.For(entered, "the region to be entered");
        Assert.Throws<InvalidOperationException>(() => region.Dispose());
        Assert.Equal(BaseTarget + 1, pool.ThreadTarget); // the failed call changed nothing
        release.Set();
        Waits.Until(() => pool.ThreadTarget == BaseTarget, "the region to end");
    }

    [Fact]
    public void SetThreadLimits_RaisingTheMinimumStartsThreadsAtOnce()
    {
        using var pool = NewPool(o => o.MinThreads = 0);
        Assert.Equal(0, pool.ThreadCount);
        int min = BaseTarget + 3;
        pool.SetThreadLimits(min, min + 10);
        Assert.Equal(min, pool.MinThreads);
        Assert.Equal(min + 10, pool.MaxThreads);
        Assert.Equal(min, pool.ThreadCount); // started by the call itself, before any work arrives
        Assert.Equal(min, pool.GetThreadInjectionCount(ThreadInjectionReason.MinimumRaised));
    }

    [Fact]
    public void SetThreadLimits_LoweringTheMaximumRetiresSurplusAndSerializes()
    {
        using var pool = NewPool(o => o.MinThreads = 4);
        using var all = new CountdownEvent(4);
        for (int i = 0; i < 4; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                all.Signal();
                all.Wait(Waits.MustHappen);
            });
        }
        Waits.For(all, "four concurrent items");
        pool.SetThreadLimits(0, 1);
        Waits.Until(() => pool.ThreadCount <= 1, $"threads above the new maximum to retire (threads: {pool.ThreadCount})");

        int running = 0, overlap = 0;
        using var done = new CountdownEvent(50);
        for (int i = 0; i < 50; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                if (Interlocked.Increment(ref running) > 1)
                {
                    Interlocked.Increment(ref overlap);
                }
                Thread.SpinWait(1000);
                Interlocked.Decrement(ref running);
                done.Signal();
            });
        }
        Waits.For(done, "items after lowering the maximum");
        Assert.Equal(0, overlap);
        Assert.True(pool.ThreadCount <= 1);
    }

    [Theory]
    [InlineData(-1, 4, "minThreads")]
    [InlineData(5, 4, "minThreads")]
    [InlineData(0, 0, "maxThreads")]
    [InlineData(WorkerPoolOptions.MaxThreadLimit + 1, WorkerPoolOptions.MaxThreadLimit, "minThreads")]
    public void SetThreadLimits_InvalidValues_ThrowAndChangeNothing(int min, int max, string parameter)
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 7; });
        var exception = Assert.Throws<ArgumentOutOfRangeException>(() => pool.SetThreadLimits(min, max));
        Assert.Equal(parameter, exception.ParamName);
        Assert.Equal(1, pool.MinThreads);
        Assert.Equal(7, pool.MaxThreads);
    }

    [Fact]
    public void SetThreadLimits_AfterShutdown_ThrowsObjectDisposed()
    {
        var pool = NewPool();
        pool.Dispose();
        Assert.Throws<ObjectDisposedException>(() => pool.SetThreadLimits(1, 2));
    }

    [Fact]
    public void GetThreadInjectionCount_UnknownReason_Throws()
    {
        using var pool = NewPool();
        Assert.Throws<ArgumentOutOfRangeException>(() => pool.GetThreadInjectionCount((ThreadInjectionReason)99));
        Assert.Throws<ArgumentOutOfRangeException>(() => pool.GetThreadInjectionCount((ThreadInjectionReason)(-1)));
    }

    [Fact]
    public void InjectedCreationFailures_LoseNothing()
    {
        // Every other thread creation fails (OutOfMemoryException) while starvation injection is adding threads.
        int calls = 0;
        Thread Factory(ThreadStart start, int stackSize)
        {
            if (Interlocked.Increment(ref calls) % 2 == 0)
            {
                throw new OutOfMemoryException("injected");
            }
            return new Thread(start, stackSize);
        }
        const int items = 40;
        using var pool = NewPool(o => o.ThreadFactory = Factory);
        using var ledger = new ExactlyOnceLedger(items);
        using var gate = new ManualResetEventSlim();
        for (int i = 0; i < items; i++)
        {
            int index = i;
            pool.QueueUserWorkItem(_ =>
            {
                ledger.Hit(index);
                gate.Wait(TimeSpan.FromMilliseconds(20)); // blocks briefly: keeps the monitor injecting
            });
        }
        ledger.WaitForAll("items queued while thread creation keeps failing");
        ledger.AssertExactlyOnce();
        Assert.True(pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed) >= 1);
    }

    private sealed class Releaser(ManualResetEventSlim gate) : IDisposable
    {
        public void Dispose() => gate.Set();
    }

    private static void InterlockedMax(ref int location, int value)
    {
        int current = Volatile.Read(ref location);
        while (value > current)
        {
            int seen = Interlocked.CompareExchange(ref location, value, current);
            if (seen == current)
            {
                return;
            }
            current = seen;
        }
    }
}
