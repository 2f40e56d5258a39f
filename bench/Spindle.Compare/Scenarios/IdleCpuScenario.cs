using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// A trickle of work: an outside thread queues one trivial item every period (1 ms or 100 µs) for 2 s, then the pool
/// sits idle for 1 s. The metric is the CPU time the pool burned over those 3 s: the process's CPU time minus the
/// producer thread's own (both from <c>clock_gettime</c>, nanosecond resolution). The 100 µs producer spins; the 1 ms
/// producer sleeps and spins only the last fraction of each period.
/// </summary>
internal sealed class IdleCpuScenario : IScenario
{
    private static readonly TimeSpan s_producing = TimeSpan.FromSeconds(2);
    private static readonly TimeSpan s_idle = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan s_warmupIdle = TimeSpan.FromMilliseconds(250);

    public string Id => "idle-cpu";

    public string Description => "one item per 1 ms / 100 µs for 2 s, then 1 s idle: CPU time of the pool's threads";

    public IReadOnlyList<string> Variants { get; } = ["1ms", "100us"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("pool cpu", "ms", Better.Lower),
    ];

    public string HeadlineMetric => "pool cpu";

    // Each run lasts seconds and the effect is large and stable (spreads within 15 % of the medians): two runs keep
    // the quick comparison under its time budget.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        (TimeSpan period, TimeSpan sleepAbove) = variant switch
        {
            "1ms" => (TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(0.3)),
            "100us" => (TimeSpan.FromMicroseconds(100), Pacer.SpinOnly),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        if (!CpuClock.IsThreadClockSupported)
        {
            throw new PlatformNotSupportedException("idle-cpu needs per-thread CPU time (Linux or macOS).");
        }

        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        var state = new TrickleState();
        Produce(pool, state, period, sleepAbove, Warmup.Minimum);
        Thread.Sleep(s_warmupIdle);
        GcSnapshot.CollectFully();
        Thread.Sleep(100);
        ProcessMeter.MarkMeasuredStart();

        int executedBefore = Volatile.Read(ref state.Executed);
        long processStart = CpuClock.ProcessNanoseconds();
        long producerStart = CpuClock.CurrentThreadNanoseconds();
        int queued = Produce(pool, state, period, sleepAbove, s_producing);
        Thread.Sleep(s_idle);
        long producerEnd = CpuClock.CurrentThreadNanoseconds();
        long processEnd = CpuClock.ProcessNanoseconds();

        int executed = Volatile.Read(ref state.Executed) - executedBefore;
        if (executed != queued)
        {
            throw new InvalidOperationException($"Only {executed:N0} of {queued:N0} items ran within the idle second.");
        }
        double poolCpuNs = (processEnd - processStart) - (producerEnd - producerStart);
        return new Measurement { Items = queued }.Set("pool cpu", poolCpuNs / 1_000_000.0);
    }

    /// <summary>Queues one item per period until <paramref name="duration"/> has passed; returns how many.</summary>
    private static int Produce(IPoolUnderTest pool, TrickleState state, TimeSpan period, TimeSpan sleepAbove, TimeSpan duration)
    {
        long periodTicks = Pacer.Ticks(period);
        long start = Stopwatch.GetTimestamp();
        long end = start + Pacer.Ticks(duration);
        int queued = 0;
        for (long next = start; next < end; next += periodTicks)
        {
            Pacer.WaitUntil(next, sleepAbove);
            pool.UnsafeQueue(s_item, state);
            queued++;
        }
        return queued;
    }

    private static readonly WaitCallback s_item = static boxed => Interlocked.Increment(ref ((TrickleState)boxed!).Executed);

    private sealed class TrickleState
    {
        public int Executed;
    }
}
