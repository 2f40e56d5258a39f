using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// 1,000 async tasks, each doing 1,000 <c>await Task.Yield()</c> (the runtime's <c>Perf_AsyncMethods.Yield</c>, widened).
/// <c>scheduler</c>: tasks of the pool's TaskScheduler, so the yields come back through it (for Spindle its
/// TaskScheduler; for the built-in pool <c>Task.Run</c> and the default one). <c>context</c>: started with
/// <c>Run(async () => …)</c>, under the pool's SynchronizationContext (Spindle's Run installs it; the built-in pool has
/// none, so its column is its <c>scheduler</c> run of the same round, see <see cref="SameRunAs"/>).
/// </summary>
internal sealed class AsyncYieldScenario : IScenario
{
    private const int Tasks = 1_000;
    private const int QuickYields = 1_000;
    private const int FullYields = 5_000;

    /// <summary>
    /// The warm-up's minimum. After the default 500 ms, Spindle's timed run of <c>scheduler</c> compiled 60-270 methods
    /// (the process table's <c>jit</c> column: its scheduler and continuation paths were still being promoted) and ran
    /// at 2.4-3.8M yields/s; warmed for 2 s or more it compiled 1-8 and ran at 4.0-4.7M (4 interleaved pairs each, 2
    /// cores). Both pools get the same minimum.
    /// </summary>
    private static readonly TimeSpan s_warmupMinimum = TimeSpan.FromSeconds(2);

    public string Id => "async-yield";

    public string Description => $"{Tasks:N0} tasks x {QuickYields:N0} await Task.Yield() ({FullYields:N0} with --full)";

    public IReadOnlyList<string> Variants { get; } = ["scheduler", "context"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("yields", "yields/s", Better.Higher),
        new("alloc", "B/yield", Better.Lower, NoiseFloor: 0.5),
    ];

    public string HeadlineMetric => "yields";

    // Three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    /// <summary>
    /// The built-in pool's <c>context</c> column is its <c>scheduler</c> run: it installs no context, and both start the
    /// tasks with <c>Task.Run</c>, so the two children would run the same code.
    /// </summary>
    public string? SameRunAs(string variant, PoolKind pool) => variant == "context" && pool == PoolKind.BuiltIn ? "scheduler" : null;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        bool useContext = variant switch
        {
            "scheduler" => false,
            "context" => true,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(pool, useContext, QuickYields / 10), s_warmupMinimum);
        return RunOnce(pool, useContext, full ? FullYields : QuickYields);
    }

    private static Measurement RunOnce(IPoolUnderTest pool, bool useContext, int yields)
    {
        var tasks = new Task[Tasks];
        SynchronizationContext? context = useContext ? pool.Context : null;
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < Tasks; i++)
        {
            Func<Task> body = async () =>
            {
                if (context is not null)
                {
                    SynchronizationContext.SetSynchronizationContext(context);
                }
                for (int y = 0; y < yields; y++)
                {
                    await Task.Yield();
                }
            };
            tasks[i] = useContext ? pool.Run(body) : pool.RunOnScheduler(body);
        }
        if (!Task.WhenAll(tasks).Wait(Waits.Stuck))
        {
            throw new TimeoutException("The yielding tasks did not complete.");
        }
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        long total = (long)Tasks * yields;
        return new Measurement { Items = total }
            .Set("yields", total / Stopwatch.GetElapsedTime(start, end).TotalSeconds)
            .Set("alloc", (double)used.AllocatedBytes / total);
    }
}
