using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Urgent work behind a backlog. An outside thread queues the Low items at once (each 50 µs of CPU, spun on
/// <see cref="Stopwatch"/>), then 100 trivial High items, one every 2 ms, each timed from just before it is queued until
/// it starts. Spindle: the Low items go to a Low lane and the High items to a High lane, so a High item waits only until
/// a worker finishes the item it is running. Built-in: it has no priorities, so every item goes to its one global queue
/// (<c>UnsafeQueueUserWorkItem</c>, preferLocal false) and a High item waits behind the whole backlog queued before it.
/// There are 20,000 Low items, or 10,000 per core where that is more, so that with every core busy the backlog lasts
/// about 0.5 s on any machine, more than the 0.2 s over which the High items arrive. <c>--full</c> changes only the
/// number of runs. <c>low throughput</c> is the Low items per second from the first Low enqueue until the last Low item
/// completes (it includes the few microseconds the High items take).
/// </summary>
internal sealed class PriorityScenario : IScenario
{
    private const int MinLowItems = 20_000;
    private const int LowItemsPerCore = 10_000;
    private const int LowWorkMicroseconds = 50;
    private const int HighItems = 100;
    private const int WarmupDivisor = 10;
    private static readonly TimeSpan s_highInterval = TimeSpan.FromMilliseconds(2);

    private static int LowItems => Math.Max(MinLowItems, LowItemsPerCore * Environment.ProcessorCount);

    public string Id => "priority";

    public string Description =>
        $"{LowItems:N0} Low items of {LowWorkMicroseconds} µs queued at once, then {HighItems} High items one per " +
        $"{s_highInterval.TotalMilliseconds:F0} ms: time until each High item starts, Low throughput";

    public IReadOnlyList<string> Variants { get; } = ["low-50us"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("high p50", "us", Better.Lower),
        new("high p99", "us", Better.Lower),
        new("low throughput", "items/s", Better.Higher),
    ];

    public string HeadlineMetric => "high p50";

    // Three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "low-50us")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        IPoolLane low = pool.CreateLane(new LaneOptions { Name = "low", Priority = LanePriority.Low });
        IPoolLane high = pool.CreateLane(new LaneOptions { Name = "high", Priority = LanePriority.High });
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(low, high, LowItems / WarmupDivisor, HighItems / WarmupDivisor));
        return RunOnce(low, high, LowItems, HighItems);
    }

    private static Measurement RunOnce(IPoolLane low, IPoolLane high, int lowItems, int highItems)
    {
        var run = new PriorityRun(lowItems, highItems);
        var lowItem = new LowItem(run);
        var highs = new HighItem[highItems];
        for (int i = 0; i < highs.Length; i++)
        {
            highs[i] = new HighItem(run);
        }
        long interval = Pacer.Ticks(s_highInterval);
        GcSnapshot.CollectFully();

        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < lowItems; i++)
        {
            low.UnsafeQueue(lowItem);
        }
        long next = Stopwatch.GetTimestamp();
        for (int i = 0; i < highs.Length; i++)
        {
            if (i > 0)
            {
                // Sleeps (1 ms at a time) rather than spins, so that the pacing thread takes no core from the workers; the
                // deadlines are absolute, so an overshoot does not slow the rate, and each latency is timed from the
                // item's own enqueue anyway.
                next += interval;
                Pacer.WaitUntil(next, TimeSpan.Zero);
            }
            HighItem item = highs[i];
            item.Queued = Stopwatch.GetTimestamp();
            high.UnsafeQueue(item);
        }
        Waits.OrThrow(run.HighDone, $"{highItems} High items to run");
        Waits.OrThrow(run.LowDone, $"{lowItems:N0} Low items to run");

        var latencies = new double[highs.Length];
        for (int i = 0; i < highs.Length; i++)
        {
            latencies[i] = Pacer.ToMicroseconds(highs[i].Started - highs[i].Queued);
        }
        Array.Sort(latencies);
        double lowSeconds = (run.LowCompletedAt - start) / (double)Stopwatch.Frequency;
        return new Measurement { Items = lowItems + highItems }
            .Set("high p50", Stats.Percentile(latencies, 50))
            .Set("high p99", Stats.Percentile(latencies, 99))
            .Set("low throughput", lowItems / lowSeconds);
    }

    private sealed class PriorityRun(int lowItems, int highItems)
    {
        public readonly long LowWorkTicks = Pacer.TicksFromMicroseconds(LowWorkMicroseconds);
        public readonly ManualResetEventSlim LowDone = new(false);
        public readonly ManualResetEventSlim HighDone = new(false);
        public int LowRemaining = lowItems;
        public int HighRemaining = highItems;
        public long LowCompletedAt;
    }

    /// <summary>Every Low item: one reusable object queued <c>lowItems</c> times. Spins for 50 µs.</summary>
    private sealed class LowItem(PriorityRun run) : PoolWorkItem
    {
        public override void Execute()
        {
            Pacer.WaitUntil(Stopwatch.GetTimestamp() + run.LowWorkTicks, Pacer.SpinOnly);
            if (Interlocked.Decrement(ref run.LowRemaining) == 0)
            {
                run.LowCompletedAt = Stopwatch.GetTimestamp();
                run.LowDone.Set();
            }
        }
    }

    /// <summary>One High item (an object each, so each keeps its own timestamps). Records when it started.</summary>
    private sealed class HighItem(PriorityRun run) : PoolWorkItem
    {
        /// <summary>Written by the producer just before queueing.</summary>
        public long Queued;

        public long Started;

        public override void Execute()
        {
            Started = Stopwatch.GetTimestamp();
            if (Interlocked.Decrement(ref run.HighRemaining) == 0)
            {
                run.HighDone.Set();
            }
        }
    }
}
