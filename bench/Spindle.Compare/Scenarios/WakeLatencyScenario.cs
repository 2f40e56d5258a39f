using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// An idle pool; an outside thread queues one item and measures the time from just before queueing until the item
/// starts. Between samples it waits for the previous item, then a random gap of 0–2 ms (same seeded sequence for
/// every pool), so the pool's threads are found in every state from still searching to parked.
/// </summary>
internal sealed class WakeLatencyScenario : IScenario
{
    private const int QuickSamples = 2_000;
    private const int FullSamples = 10_000;
    private const int WarmupSamples = 200;
    private const int MaxGapMicroseconds = 2_000;
    private static readonly TimeSpan s_sleepAbove = TimeSpan.FromMilliseconds(1.1);

    public string Id => "wake-latency";

    public string Description => $"queue one item into an idle pool, time until it starts; {QuickSamples:N0} samples ({FullSamples:N0} with --full)";

    public IReadOnlyList<string> Variants { get; } = ["gap-0-2ms"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("p50", "us", Better.Lower),
        new("p99", "us", Better.Lower),
    ];

    public string HeadlineMetric => "p50";

    // Two runs per pool in the default (quick) run, which must stay under ten minutes (p50 4-5x apart, spreads that do
    // not overlap).
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "gap-0-2ms")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        var state = new SampleState();
        Warmup.Repeat(() => Sample(pool, state, WarmupSamples, new Random(7)));
        GcSnapshot.CollectFully();

        double[] latencies = Sample(pool, state, full ? FullSamples : QuickSamples, new Random(42));
        Array.Sort(latencies);
        return new Measurement { Items = latencies.Length }
            .Set("p50", Stats.Percentile(latencies, 50))
            .Set("p99", Stats.Percentile(latencies, 99));
    }

    /// <summary>Takes <paramref name="count"/> samples; returns the latencies in microseconds.</summary>
    private static double[] Sample(IPoolUnderTest pool, SampleState state, int count, Random random)
    {
        var latencies = new double[count];
        for (int i = 0; i < count; i++)
        {
            long gap = Pacer.TicksFromMicroseconds(random.Next(0, MaxGapMicroseconds + 1));
            Pacer.WaitUntil(Stopwatch.GetTimestamp() + gap, s_sleepAbove);

            state.Done.Reset();
            long queued = Stopwatch.GetTimestamp();
            pool.UnsafeQueue(s_item, state);
            Waits.OrThrow(state.Done, "a queued item to start");
            latencies[i] = Pacer.ToMicroseconds(Volatile.Read(ref state.Started) - queued);
        }
        return latencies;
    }

    private static readonly WaitCallback s_item = static boxed =>
    {
        var state = (SampleState)boxed!;
        Volatile.Write(ref state.Started, Stopwatch.GetTimestamp());
        state.Done.Set();
    };

    private sealed class SampleState
    {
        public readonly ManualResetEventSlim Done = new(false);
        public long Started;
    }
}
