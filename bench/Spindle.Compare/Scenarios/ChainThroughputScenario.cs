using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// ProcessorCount chains of items sharing the item count; each item decrements its chain's counter and, until it
/// reaches zero, queues its successor with preferLocal. Each chain counts on a cache line of its own: a counter shared
/// by every chain made every item an atomic on a line bouncing between cores, whose cost on a virtual machine depends
/// on where the host places its virtual cores at the moment (the same build measured 21M or 37M items/s from one
/// process to the next), and the pool's own cost hid under it. <c>delegate</c>: a cached static
/// <c>Action&lt;object?&gt;</c> with the chain's state object through <c>UnsafeQueueUserWorkItem&lt;object?&gt;(…, preferLocal: true)</c> (the WaitCallback overload of the built-in
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
    private static readonly TimeSpan QuickMinimum = TimeSpan.FromMilliseconds(300);
    private static readonly TimeSpan FullMinimum = TimeSpan.FromSeconds(3);

    public string Id => "chain-throughput";

    public string Description =>
        $"ProcessorCount self-requeueing chains, rounds of {QuickItems:N0} items for at least {QuickMinimum.TotalMilliseconds:N0} ms ({FullItems:N0} items, {FullMinimum.TotalSeconds:N0} s with --full); observed: work-item with the pool's meter and events listened to";

    public IReadOnlyList<string> Variants { get; } = ["delegate", "work-item", "observed"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "items/s", Better.Higher),
        new("alloc", "B/item", Better.Lower, NoiseFloor: 0.01),
        new("peak threads", "threads", Better.Lower),
    ];

    public string HeadlineMetric => "throughput";

    /// <summary>Two runs per pool by default: its ratio is large and stable (2-13x), and the quick run of every scenario must stay under 10 minutes.</summary>
    public int? MaxDefaultRuns => 2;

    /// <summary>What being watched costs each pool: its observed run against its unobserved one, run by run.</summary>
    public IReadOnlyList<VariantComparison> Comparisons { get; } = [new("observed", "work-item", "observed / unobserved")];

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
        using (SeriesRecorder.Start(pool, Stopwatch.GetTimestamp())) // its sampling reaches its final tier here (see SeriesRecorder)
        {
            Warmup.Repeat(() => RunChains(pool, QuickItems / 10, workItems));
        }
        Measurement measurement = Measure(pool, items, workItems, full ? FullMinimum : QuickMinimum);
        collector?.Finish();
        return measurement;
    }

    /// <summary>
    /// The measured part: rounds of <paramref name="items"/> items until <paramref name="minimum"/> has passed. A
    /// fast pool runs a quick round in tens of milliseconds, in which a virtual machine's moment-to-moment changes
    /// (where the host runs its virtual cores) decide the figure; several rounds average them out.
    /// </summary>
    private static Measurement Measure(IPoolUnderTest pool, int items, bool workItems, TimeSpan minimum)
    {
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        using var recorder = SeriesRecorder.Start(pool, start);
        long total = 0;
        do
        {
            RunChains(pool, items, workItems);
            total += items;
        }
        while (Stopwatch.GetElapsedTime(start) < minimum);
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        recorder.Finish();

        double seconds = (end - start) / (double)Stopwatch.Frequency;
        return new Measurement { Items = total }
            .Set("throughput", total / seconds)
            .Set("alloc", (double)used.AllocatedBytes / total)
            .Set("peak threads", recorder.PeakThreads);
    }

    /// <summary>One round: ProcessorCount chains sharing <paramref name="items"/> items, started and waited for.</summary>
    private static void RunChains(IPoolUnderTest pool, int items, bool workItems)
    {
        int chains = Environment.ProcessorCount;
        var run = new ChainRun(chains);
        var chainItems = new ChainItem[chains];
        for (int i = 0; i < chains; i++)
        {
            chainItems[i] = new ChainItem(pool, run, items / chains + (i < items % chains ? 1 : 0));
        }
        for (int i = 0; i < chains; i++)
        {
            if (workItems)
            {
                pool.UnsafeQueue(chainItems[i], preferLocal: false);
            }
            else
            {
                pool.UnsafeQueue(s_step, chainItems[i], preferLocal: false);
            }
        }
        Waits.OrThrow(run.Done, $"{items:N0} chained items to run");
    }

    private static readonly Action<object?> s_step = Step;

    private static void Step(object? state)
    {
        var chain = (ChainItem)state!;
        if (--chain.Remaining.Value > 0)
        {
            chain.Pool.UnsafeQueue(s_step, chain, preferLocal: true);
        }
        else
        {
            chain.Run.ChainDone();
        }
    }

    /// <summary>The run's end: set when the last chain has run its last item.</summary>
    private sealed class ChainRun(int chains)
    {
        public readonly ManualResetEventSlim Done = new(false);
        private int _chainsLeft = chains;

        public void ChainDone()
        {
            if (Interlocked.Decrement(ref _chainsLeft) == 0)
            {
                Done.Set();
            }
        }
    }

    /// <summary>
    /// One chain: its item (the <c>work-item</c> form re-queues it, the <c>delegate</c> form passes it as the state) and
    /// its count of items left. One item of a chain runs at a time, and the queue's hand-off orders each decrement
    /// before the next item's, so the count is a plain field.
    /// </summary>
    private sealed class ChainItem(IPoolUnderTest pool, ChainRun run, int items) : PoolWorkItem
    {
        public readonly IPoolUnderTest Pool = pool;
        public readonly ChainRun Run = run;
        public PaddedCount Remaining = new() { Value = items };

        public override void Execute()
        {
            if (--Remaining.Value > 0)
            {
                Pool.UnsafeQueue(this, preferLocal: true);
            }
            else
            {
                Run.ChainDone();
            }
        }
    }

    /// <summary>A count alone on its cache line (the struct spans two lines around it).</summary>
    [StructLayout(LayoutKind.Explicit, Size = 128)]
    private struct PaddedCount
    {
        [FieldOffset(64)]
        public int Value;
    }
}
