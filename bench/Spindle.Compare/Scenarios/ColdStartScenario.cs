using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// What a short-lived process gets: no warm-up at all. The child process creates the pool and at once runs one round of
/// a workload, timed from the first call that queues work until the last item has run; the JIT compiles each pool's
/// code as it goes (the built-in pool's code is precompiled in the runtime's ReadyToRun image, Spindle's is not).
/// Variant <c>queue-drain</c>: an outside thread queues 100,000 trivial items (<c>UnsafeQueueUserWorkItem</c> with a
/// <c>WaitCallback</c>) and waits for the last to run. Variant <c>chain-throughput</c>: one chain per core of
/// zero-allocation work items, each queueing its successor to its own worker, 200,000 items in all. The workload code
/// is the same for both pools and is compiled cold in both.
/// </summary>
internal sealed class ColdStartScenario : IScenario
{
    private const int DrainItems = 100_000;
    private const int ChainItems = 200_000;

    public string Id => "cold-start";

    public string Description =>
        $"no warm-up: {DrainItems:N0} items queued from outside and drained, or {ChainItems:N0} chained items, timed from the first call";

    public IReadOnlyList<string> Variants { get; } = ["queue-drain", "chain-throughput"];

    public bool MeasuresColdProcess(string variant) => true;

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("time", "ms", Better.Lower),
    ];

    public string HeadlineMetric => "time";

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        return variant switch
        {
            "queue-drain" => new Measurement { Items = DrainItems }.Set("time", Drain(pool)),
            "chain-throughput" => new Measurement { Items = ChainItems }.Set("time", Chains(pool)),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
    }

    private static double Drain(IPoolUnderTest pool)
    {
        var countdown = new Countdown(DrainItems);
        WaitCallback item = s_drainItem;
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < DrainItems; i++)
        {
            pool.UnsafeQueue(item, countdown);
        }
        Waits.OrThrow(countdown.Done, $"{DrainItems:N0} items to drain");
        return Pacer.ToMilliseconds(Stopwatch.GetTimestamp() - start);
    }

    private static readonly WaitCallback s_drainItem = static boxed =>
    {
        var countdown = (Countdown)boxed!;
        if (Interlocked.Decrement(ref countdown.Remaining) == 0)
        {
            countdown.Done.Set();
        }
    };

    private static double Chains(IPoolUnderTest pool)
    {
        int chains = Environment.ProcessorCount;
        var done = new Countdown(chains);
        var links = new Link[chains];
        for (int i = 0; i < chains; i++)
        {
            links[i] = new Link(pool, done, ChainItems / chains + (i < ChainItems % chains ? 1 : 0));
        }
        long start = Stopwatch.GetTimestamp();
        foreach (Link link in links)
        {
            pool.UnsafeQueue(link, preferLocal: false);
        }
        Waits.OrThrow(done.Done, $"{ChainItems:N0} chained items to run");
        return Pacer.ToMilliseconds(Stopwatch.GetTimestamp() - start);
    }

    private sealed class Countdown(int count)
    {
        public readonly ManualResetEventSlim Done = new(false);
        public int Remaining = count;
    }

    /// <summary>One chain: each run counts down on its own cache line and queues itself again to the running worker.</summary>
    private sealed class Link(IPoolUnderTest pool, Countdown done, int items) : PoolWorkItem
    {
        private PaddedCount _remaining = new() { Value = items };

        public override void Execute()
        {
            if (--_remaining.Value > 0)
            {
                pool.UnsafeQueue(this, preferLocal: true);
            }
            else if (Interlocked.Decrement(ref done.Remaining) == 0)
            {
                done.Done.Set();
            }
        }
    }

    [StructLayout(LayoutKind.Explicit, Size = 128)]
    private struct PaddedCount
    {
        [FieldOffset(64)]
        public int Value;
    }
}
