using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// 1,000,000 <c>Run(() => …)</c> (Spindle's <c>WorkerPool.Run</c>, the built-in <c>Task.Run</c>) queued from outside in
/// batches of 1,000, each batch awaited with <c>Task.WhenAll</c> before the next. Reports tasks per second and
/// allocated bytes per task.
/// </summary>
internal sealed class TaskRunScenario : IScenario
{
    private const int QuickTasks = 1_000_000;
    private const int FullTasks = 5_000_000;
    private const int Batch = 1_000;

    /// <summary>
    /// The warm-up's minimum. With the default 500 ms the timed run met Spindle's queueing path partly at tier 0 or
    /// instrumented: tracing the process's compiled-method count per warm-up round (<c>SPINDLE_COMPARE_WARMUP_TRACE=1</c>)
    /// on 2 cores showed tier-ups arriving in waves until about 2.2 s, and a child warmed for 500 ms compiled about
    /// 100 more methods during its timed run (the <c>jit</c> column of the process table) where one warmed for 3 s
    /// compiled 2. Both pools get the same minimum; the built-in pool, precompiled, gains less from it.
    /// </summary>
    private static readonly TimeSpan s_warmupMinimum = TimeSpan.FromMilliseconds(2500);

    public string Id => "task-run";

    public string Description => $"{QuickTasks:N0} Run(() => ...) in awaited batches of {Batch:N0} ({FullTasks:N0} with --full)";

    public IReadOnlyList<string> Variants { get; } = ["batches"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "tasks/s", Better.Higher),
        new("alloc", "B/task", Better.Lower, NoiseFloor: 0.5),
    ];

    public string HeadlineMetric => "throughput";

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "batches")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(pool, QuickTasks / 10), s_warmupMinimum);
        return RunOnce(pool, full ? FullTasks : QuickTasks);
    }

    private static Measurement RunOnce(IPoolUnderTest pool, int count)
    {
        var tasks = new Task[Batch];
        Action work = s_work;
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        for (int done = 0; done < count; done += Batch)
        {
            for (int i = 0; i < Batch; i++)
            {
                tasks[i] = pool.Run(work);
            }
            if (!Task.WhenAll(tasks).Wait(Waits.Stuck))
            {
                throw new TimeoutException("A batch of tasks did not complete.");
            }
        }
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        Array.Clear(tasks);
        return new Measurement { Items = count }
            .Set("throughput", count / Stopwatch.GetElapsedTime(start, end).TotalSeconds)
            .Set("alloc", (double)used.AllocatedBytes / count);
    }

    private static int s_sink;

    private static readonly Action s_work = static () => Interlocked.Increment(ref s_sink);
}
