using System;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>
/// The comparison program's scheduling counts (SchedulingCounts): a thread that sleeps is a voluntary switch, and a
/// Spindle pool's worker that runs dry and parks shows in the pool figures, which stay unavailable while no pool of
/// the process publishes them.
/// </summary>
public sealed class SchedulingCountsTests
{
    private static readonly TimeSpan s_patience = TimeSpan.FromSeconds(30);

    [Fact]
    public void ASleep_CountsAVoluntarySwitch()
    {
        if (!(OperatingSystem.IsLinux() || OperatingSystem.IsMacOS()))
        {
            Assert.Null(SchedulingCounts.Take().VoluntarySwitches);
            return;
        }
        SchedulingCounts.Snapshot before = SchedulingCounts.Take();
        Thread.Sleep(5);
        SchedulingCounts.Snapshot used = SchedulingCounts.Take() - before;
        Assert.NotNull(used.VoluntarySwitches);
        Assert.True(used.VoluntarySwitches >= 1, $"A 5 ms sleep counted {used.VoluntarySwitches} voluntary switches.");
        Assert.True(used.InvoluntarySwitches >= 0);
    }

    [Fact]
    public void AWorkerThatRunsDry_CountsAPark()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "scheduling-counts", MinThreads = 1, MaxThreads = 1 });
        SchedulingCounts.Snapshot before = SchedulingCounts.Take();
        Assert.NotNull(before.Parks);
        Assert.NotNull(before.Steals);

        using var ran = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(static state => ((ManualResetEventSlim)state!).Set(), ran);
        Assert.True(ran.Wait(s_patience), "The item did not run.");

        // The worker parks once it finds nothing more; its count is published when the park begins.
        var clock = Stopwatch.StartNew();
        long? parks = 0;
        while ((parks = (SchedulingCounts.Take() - before).Parks) < 1 && clock.Elapsed < s_patience)
        {
            Thread.Sleep(10);
        }
        Assert.True(parks >= 1, $"The worker's park was not counted within {s_patience.TotalSeconds} s (parks {parks}).");
    }

    [Fact]
    public void APoolsFirstThread_CountsAsAThreadAdded()
    {
        SchedulingCounts.Snapshot before = SchedulingCounts.Take();
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "scheduling-counts-threads", MinThreads = 1, MaxThreads = 1 });
        using var ran = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(static state => ((ManualResetEventSlim)state!).Set(), ran);
        Assert.True(ran.Wait(s_patience), "The item did not run.");

        // Other tests' pools may start threads meanwhile: this pool's own start is at least one of those counted.
        long? added = (SchedulingCounts.Take() - before).ThreadsAdded;
        Assert.True(added >= 1, $"The pool's thread was not counted as added (threads added: {added}, null meaning unknown).");
    }

    [Fact]
    public void ADifference_FromBeforeThePoolExisted_CountsThePoolsFiguresFromZero()
    {
        var beforeAnyPool = new SchedulingCounts.Snapshot(10, 4, null, null);
        var later = new SchedulingCounts.Snapshot(15, 6, 7, 3, 2);
        Assert.Equal(new SchedulingCounts.Snapshot(5, 2, 7, 3, 2), later - beforeAnyPool);
        // No pool at either end (the built-in pool's child): the pool figures stay unknown.
        Assert.Equal(new SchedulingCounts.Snapshot(5, 2, null, null), new SchedulingCounts.Snapshot(15, 6, null, null) - beforeAnyPool);
        // A process without the kernel's switch counts: those stay unknown.
        Assert.Equal(new SchedulingCounts.Snapshot(null, null, 2, 1),
            new SchedulingCounts.Snapshot(null, null, 9, 4) - new SchedulingCounts.Snapshot(null, null, 7, 3));
    }
}
