using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// 200 items queued at once from outside, each blocking 100 ms: the ideal, with a thread per item, is 100 ms. Variants:
/// <c>sleep</c> (<see cref="Thread.Sleep(int)"/>, which no pool can see), <c>task-wait</c> (a synchronous wait on
/// <see cref="Task.Delay(int)"/>, which the built-in pool recognises and compensates for), and <c>region</c> (the sleep
/// inside Spindle's <c>WorkerPool.EnterBlockingRegion()</c>; the built-in pool has no such API and just sleeps, so its
/// column is its <c>sleep</c> run of the same round, see <see cref="SameRunAs"/>). The
/// warm-up runs the same items with a zero block, so neither pool injects threads before the timed run.
/// </summary>
/// <remarks>
/// The quick form stops waiting <see cref="QuickCutOff"/> after the burst: the built-in pool's <c>task-wait</c> runs
/// took 15-24 s each (it needs a pool thread to fire the timers its blocked workers wait on, and adds about two a
/// second), a tenth of the quick comparison's ten minutes in two runs. A run cut off reports the cut-off as
/// <c>complete</c> (a lower bound, so its ratio is a lower bound of the real one) and the items still blocked then as
/// <c>unfinished</c>, as <c>http/starved</c> reports the requests unanswered at its deadline; the child exits with them
/// still blocked. <c>--full</c> waits for every item, as before.
/// </remarks>
internal sealed class BlockingBurstScenario : IScenario
{
    private const int Items = 200;
    private const int BlockMs = 100;

    /// <summary>How long the quick form waits for the burst to complete (see the remarks).</summary>
    internal static readonly TimeSpan QuickCutOff = TimeSpan.FromSeconds(6);

    public string Id => "blocking-burst";

    public string Description => $"{Items} items each blocking {BlockMs} ms, queued at once: time until all complete (ideal {BlockMs} ms)";

    public IReadOnlyList<string> Variants { get; } = ["sleep", "task-wait", "region"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("complete", "ms", Better.Lower),
        new("vs ideal", "x", Better.Lower),
        new("peak threads", "threads", Better.Lower),
        new("time to peak", "ms", Better.Lower),
        new("unfinished", "items", Better.Lower),
    ];

    public string HeadlineMetric => "complete";

    // The built-in runs take 3.5-6 s each (up to the cut-off): two runs per pool keep the quick comparison under its time
    // budget (Spindle's runs spread by a few percent, the built-in pool's by seconds whatever the count).
    public int? MaxDefaultRuns => 2;

    /// <summary>
    /// The built-in pool's <c>region</c> column is its <c>sleep</c> run: without a blocking region to enter it just
    /// sleeps (<see cref="IPoolUnderTest.RunBlocking"/>), so the two children would run the same code.
    /// </summary>
    public string? SameRunAs(string variant, PoolKind pool) => variant == "region" && pool == PoolKind.BuiltIn ? "sleep" : null;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant is not ("sleep" or "task-wait" or "region"))
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        using (SeriesRecorder.Start(pool, Stopwatch.GetTimestamp())) // its sampling reaches its final tier here (see SeriesRecorder)
        {
            Warmup.Repeat(() => RunOnce(pool, variant, blockMs: 0, cutOff: null));
        }
        return RunOnce(pool, variant, BlockMs, full ? null : QuickCutOff);
    }

    /// <summary>One burst; <paramref name="cutOff"/>: how long to wait for it (null: until every item completes).</summary>
    private static Measurement RunOnce(IPoolUnderTest pool, string variant, int blockMs, TimeSpan? cutOff)
    {
        var run = new BurstRun(pool, variant, blockMs);
        long start = Stopwatch.GetTimestamp();
        using SeriesRecorder? recorder = blockMs == 0 ? null : SeriesRecorder.Start(pool, start);
        for (int i = 0; i < Items; i++)
        {
            pool.UnsafeQueue(s_block, run, preferLocal: false);
        }
        int unfinished = 0;
        if (cutOff is TimeSpan wait && !run.Done.Wait(wait))
        {
            unfinished = Volatile.Read(ref run.Remaining);
        }
        if (unfinished == 0)
        {
            // Every item (at once if they are done; a cut-off may have caught the last between its count and its signal).
            Waits.OrThrow(run.Done, $"{Items} blocking items to complete");
        }
        if (blockMs == 0)
        {
            return new Measurement();
        }
        List<double[]> series = recorder!.Finish();
        // Items still blocked at the cut-off go on completing while the child reports: the figures are those of the cut-off.
        double complete = unfinished == 0
            ? Stopwatch.GetElapsedTime(start, Volatile.Read(ref run.CompletedAt)).TotalMilliseconds
            : cutOff!.Value.TotalMilliseconds;
        return new Measurement { Series = series, Items = Items }
            .Set("complete", complete)
            .Set("vs ideal", complete / blockMs)
            .Set("peak threads", recorder.PeakThreads)
            .Set("time to peak", recorder.TimeToPeakMs)
            .Set("unfinished", unfinished);
    }

    private static readonly Action<object?> s_block = static boxed =>
    {
        var run = (BurstRun)boxed!;
        switch (run.Variant)
        {
            case "sleep":
                Thread.Sleep(run.BlockMs);
                break;
            case "task-wait":
                Task.Delay(run.BlockMs).Wait();
                break;
            default:
                run.Pool.RunBlocking(run.Sleep);
                break;
        }
        if (Interlocked.Decrement(ref run.Remaining) == 0)
        {
            run.CompletedAt = Stopwatch.GetTimestamp();
            run.Done.Set();
        }
    };

    private sealed class BurstRun
    {
        public readonly IPoolUnderTest Pool;
        public readonly string Variant;
        public readonly int BlockMs;
        public readonly Action Sleep;
        public readonly ManualResetEventSlim Done = new(false);
        public int Remaining = Items;
        public long CompletedAt;

        public BurstRun(IPoolUnderTest pool, string variant, int blockMs)
        {
            Pool = pool;
            Variant = variant;
            BlockMs = blockMs;
            Sleep = () => Thread.Sleep(blockMs);
        }
    }
}
