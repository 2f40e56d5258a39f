using System;
using System.Threading;
using Spindle.Primitives;
using Spindle.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// OS thread limits: the default maximum derived from the headroom (<see cref="ThreadLimits"/>, through the
/// <see cref="WorkerPoolOptions.ThreadHeadroom"/> seam), the cgroup files' parsing, and refusals of every kind of
/// thread (through the <see cref="WorkerPoolOptions.OnThreadStarting"/> seam) losing nothing.
/// </summary>
public sealed class WorkerPoolThreadLimitTests
{
    [Theory]
    [InlineData(null, WorkerPoolOptions.MaxThreadLimit)]
    [InlineData(0L, ThreadLimits.Floor)]
    [InlineData(7L, ThreadLimits.Floor)]
    [InlineData(52L, 26)]
    [InlineData(281L, 140)]
    [InlineData(10_000_000L, WorkerPoolOptions.MaxThreadLimit)]
    public void DeriveMaxThreads_TakesHalfTheHeadroom_BetweenTheFloorAndTheLimit(long? headroom, int expected) =>
        Assert.Equal(expected, ThreadLimits.DeriveMaxThreads(headroom));

    [Fact]
    public void UnsetMaximum_IsDerivedFromTheHeadroom_AndAnUnsetMinimumComesDownToIt()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { ThreadHeadroom = static () => 6 });
        Assert.Equal(ThreadLimits.Floor, pool.MaxThreads);
        Assert.Equal(Math.Min(Environment.ProcessorCount, ThreadLimits.Floor), pool.MinThreads);

        using var roomy = new WorkerPool(new WorkerPoolOptions { ThreadHeadroom = static () => 100 });
        Assert.Equal(50, roomy.MaxThreads);

        using var unknown = new WorkerPool(new WorkerPoolOptions { ThreadHeadroom = static () => null });
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, unknown.MaxThreads);
    }

    [Fact]
    public void SetMaximum_StaysTheUsersChoice_AboveTheHeadroom_AndASetMinimumRaisesADerivedOne()
    {
        using var set = new WorkerPool(new WorkerPoolOptions { MaxThreads = 500, ThreadHeadroom = static () => 10 });
        Assert.Equal(500, set.MaxThreads);

        using var minimum = new WorkerPool(new WorkerPoolOptions { MinThreads = 9, ThreadHeadroom = static () => 10 });
        Assert.Equal(9, minimum.MaxThreads);
        Assert.Equal(9, minimum.MinThreads);
    }

    [Fact]
    public void UnsetOptions_ReadTheLimit_UntilAPoolDerivesItsOwn()
    {
        var options = new WorkerPoolOptions { ThreadHeadroom = static () => 10 };
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, options.MaxThreads);
        using var pool = new WorkerPool(options);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, options.MaxThreads); // the pool keeps its own copy
    }

    private const string MountinfoV1 =
        "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n" +
        "31 25 0:27 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,pids\n" +
        "32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";

    [Fact]
    public void PidsDirectories_FindTheV1PidsHierarchy_AndTheV2Unified()
    {
        string cgroup = "9:name=systemd:/\n8:pids:/app/web\n4:memory:/x\n0::/svc\n";
        Assert.Equal(
            [("/sys/fs/cgroup/pids", "/app/web"), ("/sys/fs/cgroup/unified", "/svc")],
            ThreadLimits.PidsDirectories(cgroup, MountinfoV1));
    }

    [Fact]
    public void PidsDirectories_StripTheMountedPartOfTheHierarchy_AndTheRootIsEmpty()
    {
        // A container's view: the hierarchy mounted from the container's own cgroup.
        string mountinfo = "40 35 0:30 /docker/abc /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n";
        Assert.Equal([("/sys/fs/cgroup/pids", "")], ThreadLimits.PidsDirectories("5:pids:/docker/abc\n", mountinfo));
        Assert.Equal([("/sys/fs/cgroup", "")], ThreadLimits.PidsDirectories("0::/\n",
            "25 1 0:24 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"));
        Assert.Empty(ThreadLimits.PidsDirectories("8:cpu:/a\n", MountinfoV1));
    }

    [Fact]
    public void ReadHeadroom_NeverThrows_AndIsNeverNegative()
    {
        long? headroom = ThreadLimits.ReadHeadroom();
        Assert.True(headroom is null or >= 0, $"headroom {headroom}");
    }

    /// <summary>Refuses the first <paramref name="workers"/> worker starts, and every start of the kinds in <paramref name="always"/>.</summary>
    private sealed class Refusals(int workers, params PoolThreadKind[] always)
    {
        private int _workerCalls;

        public void OnStarting(PoolThreadKind kind)
        {
            if (Array.IndexOf(always, kind) >= 0 || (kind == PoolThreadKind.Worker && Interlocked.Increment(ref _workerCalls) <= workers))
            {
                throw new OutOfMemoryException();
            }
        }
    }

    [Fact]
    public void RefusedWorkers_AndARefusedMonitor_LoseNothing_AndThePoolStaysUsable()
    {
        const int items = 500;
        var refusals = new Refusals(5, PoolThreadKind.Monitor, PoolThreadKind.Relief, PoolThreadKind.Timer);
        using var ledger = new ExactlyOnceLedger(items);
        WorkerPool pool = new(new WorkerPoolOptions
        {
            MaxThreads = 4,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnThreadStarting = refusals.OnStarting,
        });
        using (pool)
        {
            for (int i = 0; i < items; i++)
            {
                int index = i;
                Assert.True(pool.QueueUserWorkItem(_ =>
                {
                    Thread.Sleep(index % 50 == 0 ? 5 : 0);
                    ledger.Hit(index);
                }, null));
            }
            ledger.WaitForAll("items queued while workers and the monitor were refused");
            using var later = new ManualResetEventSlim();
            pool.QueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), later);
            Waits.For(later, "an item after the refusals");
            Assert.True(pool.CreationFailureCount >= 5, $"CreationFailureCount {pool.CreationFailureCount}");
            Assert.True(pool.ThreadCount >= 1);
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(0, pool.ThreadCount);
    }

    [Fact]
    public void ARefusedDedicatedThread_RunsTheLongRunningItemOnAWorker_Counted()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnThreadStarting = new Refusals(0, PoolThreadKind.Dedicated).OnStarting,
        });
        using var ran = new ManualResetEventSlim();
        int runsOn = -1;
        pool.QueueUserWorkItem<ManualResetEventSlim>(s =>
        {
            runsOn = pool.ThreadCount;
            s.Set();
        }, ran, WorkItemOptions.LongRunning);
        Waits.For(ran, "a long-running item whose dedicated thread was refused");
        Assert.Equal(0, pool.DedicatedThreadCount);
        Assert.True(runsOn >= 1);
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed));
    }

    [Fact]
    public void WhileTheMaximumIsDerived_DedicatedThreadsCountAgainstIt()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            MinThreads = 1,
            ThreadHeadroom = static () => 8, // a maximum of 4
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        using var release = new ManualResetEventSlim();
        using var done = new CountdownEvent(6);
        for (int i = 0; i < 6; i++)
        {
            pool.QueueUserWorkItem<CountdownEvent>(d =>
            {
                release.Wait();
                d.Signal();
            }, done, WorkItemOptions.LongRunning);
        }
        // The items beyond the maximum run on workers; dedicated threads never exceed it.
        Waits.Never(() => pool.DedicatedThreadCount > pool.MaxThreads, "dedicated threads beyond the derived maximum");
        release.Set();
        Waits.For(done, "every long-running item");
        Assert.InRange(pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning), 1, pool.MaxThreads);
    }

    [Fact]
    public void ARefusedWaitThread_FailsTheRegistration_Counted_AndALaterOneWorks()
    {
        int refuse = 1;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            OnThreadStarting = kind =>
            {
                if (kind == PoolThreadKind.Wait && Interlocked.Exchange(ref refuse, 0) == 1)
                {
                    throw new OutOfMemoryException();
                }
            },
        });
        using var handle = new ManualResetEvent(false);
        Assert.Throws<OutOfMemoryException>(() => pool.RegisterWaitForSingleObject(handle, static (_, _) => { }, null, -1, true));
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed));
        using var fired = new ManualResetEventSlim();
        RegisteredWait registration = pool.RegisterWaitForSingleObject(handle, (s, _) => ((ManualResetEventSlim)s!).Set(), fired, -1, true);
        handle.Set();
        Waits.For(fired, "a registration after a refused wait thread");
        registration.Unregister(null);
    }
}
