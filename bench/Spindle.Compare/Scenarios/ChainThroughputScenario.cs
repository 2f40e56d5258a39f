using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// ProcessorCount chains of items; each item decrements a shared counter and, until it reaches zero, queues its
/// successor with preferLocal. <c>delegate</c>: a cached static <c>Action&lt;object?&gt;</c> and a shared state object
/// through <c>UnsafeQueueUserWorkItem&lt;object?&gt;(…, preferLocal: true)</c> (the WaitCallback overload of the built-in
/// pool has no preferLocal and always goes to the global queue); <c>work-item</c>: each chain re-queues its own
/// <see cref="IWorkItem"/> / <see cref="IThreadPoolWorkItem"/> object; <c>observed</c>: <c>work-item</c> while a
/// <see cref="TelemetryCollector"/> collects the pool's <see cref="IPoolUnderTest.Telemetry"/> as a monitoring agent
/// would (every instrument of its meter, observable ones collected every 100 ms, and its event sources at Verbose:
/// Spindle's <c>Spindle</c> meter and event source; the built-in pool's <c>System.Runtime</c> meter, the runtime's
/// threading events and FrameworkEventSource's per-item enqueue and dequeue events). The listeners start once the
/// pool's threads exist, before the warm-up (so that the observed paths are compiled too), and stop after the
/// measured run.
/// </summary>
internal sealed class ChainThroughputScenario : IScenario
{
    private const int QuickItems = 2_000_000;
    private const int FullItems = 20_000_000;

    public string Id => "chain-throughput";

    public string Description =>
        $"ProcessorCount self-requeueing chains, {QuickItems:N0} items ({FullItems:N0} with --full); observed: work-item with the pool's meter and events listened to";

    public IReadOnlyList<string> Variants { get; } = ["delegate", "work-item", "observed"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "items/s", Better.Higher),
        new("alloc", "B/item", Better.Lower, NoiseFloor: 0.01),
        new("peak threads", "threads", Better.Lower),
    ];

    public string HeadlineMetric => "throughput";

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        (bool workItems, bool observed) = variant switch
        {
            "delegate" => (false, false),
            "work-item" => (true, false),
            "observed" => (true, true),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        int items = full ? FullItems : QuickItems;
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        using TelemetryCollector? collector = observed ? TelemetryCollector.Start(pool.Telemetry) : null;
        Warmup.Repeat(() => RunOnce(pool, QuickItems / 10, workItems));
        Measurement measurement = RunOnce(pool, items, workItems);
        collector?.Finish();
        return measurement;
    }

    private static Measurement RunOnce(IPoolUnderTest pool, int items, bool workItems)
    {
        var run = new ChainRun(pool, items);
        int chains = Environment.ProcessorCount;
        var chainItems = new ChainItem[chains];
        for (int i = 0; i < chains; i++)
        {
            chainItems[i] = new ChainItem(run);
        }
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();

        long start = Stopwatch.GetTimestamp();
        using var recorder = SeriesRecorder.Start(pool, start);
        for (int i = 0; i < chains; i++)
        {
            if (workItems)
            {
                pool.UnsafeQueue(chainItems[i], preferLocal: false);
            }
            else
            {
                pool.UnsafeQueue(s_step, run, preferLocal: false);
            }
        }
        Waits.OrThrow(run.Done, $"{items:N0} chained items to run");
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        recorder.Finish();

        double seconds = (end - start) / (double)Stopwatch.Frequency;
        return new Measurement { Items = items }
            .Set("throughput", items / seconds)
            .Set("alloc", (double)used.AllocatedBytes / items)
            .Set("peak threads", recorder.PeakThreads);
    }

    private static readonly Action<object?> s_step = Step;

    private static void Step(object? boxed)
    {
        var run = (ChainRun)boxed!;
        int left = Interlocked.Decrement(ref run.Remaining);
        if (left > 0)
        {
            run.Pool.UnsafeQueue(s_step, run, preferLocal: true);
        }
        else if (left == 0)
        {
            run.Done.Set();
        }
    }

    private sealed class ChainRun(IPoolUnderTest pool, int items)
    {
        public readonly IPoolUnderTest Pool = pool;
        public readonly ManualResetEventSlim Done = new(false);
        public int Remaining = items;
    }

    private sealed class ChainItem(ChainRun run) : PoolWorkItem
    {
        public override void Execute()
        {
            int left = Interlocked.Decrement(ref run.Remaining);
            if (left > 0)
            {
                run.Pool.UnsafeQueue(this, preferLocal: true);
            }
            else if (left == 0)
            {
                run.Done.Set();
            }
        }
    }
}
