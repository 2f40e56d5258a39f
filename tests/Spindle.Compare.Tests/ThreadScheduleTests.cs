using System;
using System.Collections.Generic;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>
/// The comparison program's per-thread scheduler figures (ThreadSchedule): the kernel's files are parsed as they are
/// written, a difference sums the threads alive at its end (a new thread from zero, an exited one not at all), and on
/// Linux a snapshot of the process holds the calling thread.
/// </summary>
public sealed class ThreadScheduleTests
{
    [Fact]
    public void Schedstat_GivesTheWaitingTime()
    {
        Assert.Equal(2_500_000, ThreadSchedule.ParseWait("1200000 2500000 41\n"));
        Assert.Null(ThreadSchedule.ParseWait("1200000\n"));
        Assert.Null(ThreadSchedule.ParseWait("a b c\n"));
    }

    [Fact]
    public void Sched_GivesTheMigrations_OrNothingWithoutTheLine()
    {
        const string Sched =
            "worker #1 (4242, #threads: 12)\n" +
            "-------------------------------------------------------------------\n" +
            "se.exec_start                                :       3253733.248140\n" +
            "se.sum_exec_runtime                          :             0.270523\n" +
            "se.nr_migrations                             :                   17\n" +
            "nr_switches                                  :                    9\n";
        Assert.Equal(17, ThreadSchedule.ParseMigrations(Sched));
        Assert.Null(ThreadSchedule.ParseMigrations("se.exec_start : 1.0\nnr_switches : 9\n"));
    }

    [Fact]
    public void ADifference_SumsTheThreadsAliveAtItsEnd()
    {
        var start = new ThreadSchedule.Snapshot(new Dictionary<int, (long, long?)>
        {
            [10] = (1_000_000, 3),
            [11] = (5_000_000, 1), // exits before the end: not counted
        });
        var end = new ThreadSchedule.Snapshot(new Dictionary<int, (long, long?)>
        {
            [10] = (4_000_000, 5),
            [12] = (2_000_000, 4), // started in between: counts from zero
        });
        (double? wait, long? migrations) = ThreadSchedule.Between(start, end);
        Assert.Equal(5.0, wait);
        Assert.Equal(6, migrations);
    }

    [Fact]
    public void ADifference_WithoutMigrationsOrASnapshot_IsUnavailable()
    {
        var start = new ThreadSchedule.Snapshot(new Dictionary<int, (long, long?)> { [10] = (1_000_000, null) });
        var end = new ThreadSchedule.Snapshot(new Dictionary<int, (long, long?)> { [10] = (3_000_000, null) });
        Assert.Equal((2.0, (long?)null), ThreadSchedule.Between(start, end));
        Assert.Equal(((double?)null, (long?)null), ThreadSchedule.Between(null, end));
        Assert.Equal(((double?)null, (long?)null), ThreadSchedule.Between(start, null));
    }

    [Fact]
    public void OnLinux_ASnapshotHoldsTheProcessThreads_AndTimeOnlyGrows()
    {
        ThreadSchedule.Snapshot? before = ThreadSchedule.Take();
        if (!OperatingSystem.IsLinux())
        {
            Assert.Null(before);
            return;
        }
        Assert.NotNull(before);
        Assert.NotEmpty(before.Threads);
        Thread.Sleep(5);
        (double? wait, long? migrations) = ThreadSchedule.Between(before, ThreadSchedule.Take());
        Assert.NotNull(wait);
        Assert.True(wait >= 0, $"Waiting time went backwards: {wait} ms.");
        Assert.True(migrations is null or >= 0, $"Migrations went backwards: {migrations}.");
    }
}
