using System;
using System.Globalization;
using System.IO;
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
        Assert.Equal(2_500_000, ThreadSchedule.ParseWait("1200000 2500000 41\n"u8));
        Assert.Null(ThreadSchedule.ParseWait("1200000\n"u8));
        Assert.Null(ThreadSchedule.ParseWait("a b c\n"u8));
    }

    [Fact]
    public void Sched_GivesTheMigrations_OrNothingWithoutTheLine()
    {
        ReadOnlySpan<byte> sched =
            "worker #1 (4242, #threads: 12)\n"u8 +
            "-------------------------------------------------------------------\n"u8 +
            "se.exec_start                                :       3253733.248140\n"u8 +
            "se.sum_exec_runtime                          :             0.270523\n"u8 +
            "se.nr_migrations                             :                   17\n"u8 +
            "nr_switches                                  :                    9\n"u8;
        Assert.Equal(17, ThreadSchedule.ParseMigrations(sched));
        Assert.Null(ThreadSchedule.ParseMigrations("se.exec_start : 1.0\nnr_switches : 9\n"u8));
        Assert.Null(ThreadSchedule.ParseMigrations("se.nr_migrations : many\n"u8));
    }

    [Fact]
    public void ADifference_SumsTheThreadsAliveAtItsEnd()
    {
        var start = new ThreadSchedule.Snapshot(
        [
            new(10, 1_000_000, 3),
            new(11, 5_000_000, 1), // exits before the end: not counted
        ]);
        var end = new ThreadSchedule.Snapshot(
        [
            new(10, 4_000_000, 5),
            new(12, 2_000_000, 4), // started in between: counts from zero
        ]);
        (double? wait, long? migrations) = ThreadSchedule.Between(start, end);
        Assert.Equal(5.0, wait);
        Assert.Equal(6, migrations);
    }

    [Fact]
    public void ADifference_WithoutMigrationsOrASnapshot_IsUnavailable()
    {
        var start = new ThreadSchedule.Snapshot([new(10, 1_000_000, null)]);
        var end = new ThreadSchedule.Snapshot([new(10, 3_000_000, null)]);
        Assert.Equal((2.0, (long?)null), ThreadSchedule.Between(start, end));
        Assert.Equal(((double?)null, (long?)null), ThreadSchedule.Between(null, end));
        Assert.Equal(((double?)null, (long?)null), ThreadSchedule.Between(start, null));
    }

    [Fact]
    public void OnLinux_ASnapshotHoldsTheProcessThreads_AndTimeOnlyGrows()
    {
        ThreadSchedule.Snapshot? before = ThreadSchedule.Take();
        if (!OperatingSystem.IsLinux() || !Environment.Is64BitProcess)
        {
            Assert.Null(before);
            return;
        }
        Assert.NotNull(before);
        int tid = OwnThreadId();
        Assert.Contains(before.Threads, thread => thread.Tid == tid);
        Thread.Sleep(5);
        (double? wait, long? migrations) = ThreadSchedule.Between(before, ThreadSchedule.Take());
        Assert.NotNull(wait);
        Assert.True(wait >= 0, $"Waiting time went backwards: {wait} ms.");
        Assert.True(migrations is null or >= 0, $"Migrations went backwards: {migrations}.");
    }

    [Fact]
    public void OnLinux_ASnapshotHoldsEveryThread_BeyondItsFirstBuffer()
    {
        if (!OperatingSystem.IsLinux() || !Environment.Is64BitProcess)
        {
            return;
        }
        // More threads than a snapshot's first buffer holds (64), each kept alive until the snapshot has been taken.
        const int count = 80;
        var tids = new int[count];
        using var started = new CountdownEvent(count);
        using var release = new ManualResetEventSlim();
        var threads = new Thread[count];
        for (int i = 0; i < count; i++)
        {
            int index = i;
            var thread = new Thread(() =>
            {
                tids[index] = OwnThreadId();
                started.Signal();
                release.Wait();
            });
            thread.IsBackground = true;
            threads[i] = thread;
            thread.Start();
        }
        try
        {
            Assert.True(started.Wait(TimeSpan.FromSeconds(30)), "The threads did not start.");
            ThreadSchedule.Snapshot? snapshot = ThreadSchedule.Take();
            Assert.NotNull(snapshot);
            foreach (int tid in tids)
            {
                Assert.Contains(snapshot.Threads, thread => thread.Tid == tid);
            }
        }
        finally
        {
            release.Set();
            foreach (Thread thread in threads)
            {
                thread.Join();
            }
        }
    }

    /// <summary>The calling thread's kernel id: /proc/thread-self links to "&lt;pid&gt;/task/&lt;tid&gt;".</summary>
    private static int OwnThreadId()
    {
        string self = new FileInfo("/proc/thread-self").LinkTarget!;
        return int.Parse(self[(self.LastIndexOf('/') + 1)..], CultureInfo.InvariantCulture);
    }
}
