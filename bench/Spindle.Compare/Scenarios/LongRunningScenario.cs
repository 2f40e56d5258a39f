using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Clifton's counting test: 10 items, queued at once on a fresh pool, each spin counting until a shared flag is set by
/// a one-second <see cref="System.Threading.Timer"/>. A pool that waits for items to finish before adding threads
/// starts the last items late; the one-second timer is each pool's own (<see cref="System.Threading.Timer"/> on the
/// built-in pool, <c>WorkerPool.CreateTimer</c> on Spindle), and its callback needs a thread of that pool, so it fires
/// late too when the pool does not make room for it. <c>plain</c>: ordinary queueing; <c>long-running</c>: Spindle's <c>WorkItemOptions.LongRunning</c>
/// against <c>TaskCreationOptions.LongRunning</c>; <c>long-running-cold</c>: the same in a fresh process with no warm-up,
/// so no dedicated thread exists yet and the code is compiled as it runs (the built-in pool starts a thread per such
/// task anyway).
/// </summary>
/// <remarks>
/// The <c>plain</c> warm-up runs the same 10 items with the flag already set, so it compiles the code without making
/// either pool inject threads: the timed run starts cold, which is what Clifton measured. The <c>long-running</c>
/// warm-up sets the flag once all 10 items have started, so each pool holds 10 long-running items at once before the
/// timed run, as a service that uses the option would: Spindle keeps idle dedicated threads for its idle timeout and
/// reuses them, the built-in pool starts a new thread for every such task.
/// </remarks>
internal sealed class LongRunningScenario : IScenario
{
    private const int Items = 10;
    private static readonly TimeSpan s_timer = TimeSpan.FromSeconds(1);

    public string Id => "long-running";

    public string Description => $"{Items} items spin until a {s_timer.TotalSeconds:F0} s timer sets a flag (Clifton): time until all started";

    public IReadOnlyList<string> Variants { get; } = ["plain", "long-running", "long-running-cold"];

    public bool MeasuresColdProcess(string variant) => variant == "long-running-cold";

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("all started", "ms", Better.Lower),
        new("timer late", "ms", Better.Lower, NoiseFloor: 0.5),
        new("count", "M", Better.Higher),
        new("peak threads", "threads", Better.Lower),
    ];

    public string HeadlineMetric => "all started";

    // The built-in plain runs take 2-4 s each: two runs per pool keep the quick run of every scenario under 10 minutes.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        (bool longRunning, bool warm) = variant switch
        {
            "plain" => (false, true),
            "long-running" => (true, true),
            "long-running-cold" => (true, false),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        if (warm)
        {
            using (SeriesRecorder.Start(pool, Stopwatch.GetTimestamp())) // its sampling reaches its final tier here (see SeriesRecorder)
            {
                Warmup.Repeat(() => RunOnce(pool, longRunning, warmup: true));
            }
        }
        return RunOnce(pool, longRunning, warmup: false);
    }

    private static Measurement RunOnce(IPoolUnderTest pool, bool longRunning, bool warmup)
    {
        var run = new CountingRun(flagSet: warmup && !longRunning, releaseWhenAllStarted: warmup && longRunning);
        long start = Stopwatch.GetTimestamp();
        using SeriesRecorder? recorder = warmup ? null : SeriesRecorder.Start(pool, start);
        // Each pool's own timer: System.Threading.Timer on the built-in pool, WorkerPool.CreateTimer on Spindle.
        using ITimer timer = pool.CreateTimer(static state => ((CountingRun)state!).Fire(), run, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        if (!warmup)
        {
            run.TimerStart = Stopwatch.GetTimestamp();
            timer.Change(s_timer, Timeout.InfiniteTimeSpan);
        }
        for (int i = 0; i < Items; i++)
        {
            if (longRunning)
            {
                pool.QueueLongRunning(s_count, run);
            }
            else
            {
                pool.UnsafeQueue(s_count, run, preferLocal: false);
            }
        }
        Waits.OrThrow(run.Done, $"{Items} counting items to finish");
        if (warmup)
        {
            return new Measurement();
        }
        List<double[]> series = recorder!.Finish();
        return new Measurement { Series = series, Items = Items }
            .Set("all started", Stopwatch.GetElapsedTime(start, run.AllStartedAt).TotalMilliseconds)
            .Set("timer late", Stopwatch.GetElapsedTime(run.TimerStart, run.FiredAt).TotalMilliseconds - s_timer.TotalMilliseconds)
            .Set("count", Interlocked.Read(ref run.Count) / 1e6)
            .Set("peak threads", recorder.PeakThreads);
    }

    private static readonly Action<object?> s_count = static boxed =>
    {
        var run = (CountingRun)boxed!;
        if (Interlocked.Increment(ref run.Started) == Items)
        {
            run.AllStartedAt = Stopwatch.GetTimestamp();
            if (run.ReleaseWhenAllStarted)
            {
                Volatile.Write(ref run.Flag, true);
            }
        }
        long count = 0;
        while (!Volatile.Read(ref run.Flag))
        {
            count++;
        }
        Interlocked.Add(ref run.Count, count);
        if (Interlocked.Increment(ref run.Finished) == Items)
        {
            run.Done.Set();
        }
    };

    private sealed class CountingRun(bool flagSet, bool releaseWhenAllStarted)
    {
        public readonly bool ReleaseWhenAllStarted = releaseWhenAllStarted;
        public readonly ManualResetEventSlim Done = new(false);
        public bool Flag = flagSet;
        public int Started;
        public int Finished;
        public long Count;
        public long AllStartedAt;
        public long TimerStart;
        public long FiredAt;

        public void Fire()
        {
            FiredAt = Stopwatch.GetTimestamp();
            Volatile.Write(ref Flag, true);
        }
    }
}
