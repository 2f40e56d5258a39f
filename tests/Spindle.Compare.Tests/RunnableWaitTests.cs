using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The process table's runnable wait (RunnableWait): parsing schedstat, the wait between two readings, and this machine's reading.</summary>
public sealed class RunnableWaitTests
{
    [Fact]
    public void TryParseWait_takes_the_second_field_of_the_schedstat_line()
    {
        Assert.True(RunnableWait.TryParseWait("180477544 8153835 430\n", out long wait));
        Assert.Equal(8153835, wait);
    }

    [Theory]
    [InlineData("")]
    [InlineData("180477544")]
    [InlineData("180477544 -5 430")]
    [InlineData("180477544 x 430")]
    public void TryParseWait_refuses_a_line_without_a_wait(string text) =>
        Assert.False(RunnableWait.TryParseWait(text, out _));

    [Fact]
    public void Between_sums_each_live_threads_growth_and_counts_new_and_reused_ids_from_zero()
    {
        var start = new Dictionary<int, long> { [1] = 5_000_000, [2] = 1_000_000, [3] = 9_000_000 };
        // 1 waited 2 ms more; 2 exited; 3's id now belongs to a new thread that waited 1 ms; 4 started and waited 0.5 ms.
        var end = new Dictionary<int, long> { [1] = 7_000_000, [3] = 1_000_000, [4] = 500_000 };

        Assert.Equal(3.5, RunnableWait.Between(start, end));
    }

    [Fact]
    public void Between_is_unknown_without_two_readings()
    {
        Assert.Null(RunnableWait.Between(null, new Dictionary<int, long> { [1] = 1 }));
        Assert.Null(RunnableWait.Between(new Dictionary<int, long> { [1] = 1 }, null));
    }

    [Fact]
    public void Read_sees_threads_wait_when_they_outnumber_the_cores()
    {
        if (!OperatingSystem.IsLinux() || !File.Exists("/proc/self/schedstat"))
        {
            Assert.Null(RunnableWait.Read());
            return;
        }
        Dictionary<int, long>? before = RunnableWait.Read();
        Assert.NotNull(before);

        // Three spinning threads a core, read while they spin: the kernel must queue two of every three at any moment,
        // so over 300 ms the process's threads wait for a core for a good part of that time.
        var spinners = new Thread[Environment.ProcessorCount * 3];
        var stop = new ManualResetEventSlim();
        for (int i = 0; i < spinners.Length; i++)
        {
            spinners[i] = new Thread(() =>
            {
                while (!stop.IsSet)
                {
                    Thread.SpinWait(100);
                }
            });
            spinners[i].Start();
        }
        Dictionary<int, long>? during;
        try
        {
            Thread.Sleep(300);
            during = RunnableWait.Read();
        }
        finally
        {
            stop.Set();
            foreach (Thread spinner in spinners)
            {
                spinner.Join();
            }
        }

        Assert.NotNull(during);
        double? waited = RunnableWait.Between(before, during);
        Assert.NotNull(waited);
        Assert.True(waited > 0, $"waited {waited} ms");
    }
}
