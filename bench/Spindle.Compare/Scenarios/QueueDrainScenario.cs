using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// One outside thread queues N trivial items, then waits until all have run. <c>separated</c>: every item first waits
/// on a gate that opens once everything is queued, so queueing and draining do not overlap (drain is timed from the
/// gate opening); <c>mixed</c>: no gate. <c>ec-flow</c>: a non-default <see cref="ExecutionContext"/> (an
/// <see cref="AsyncLocal{T}"/> is set) flows through <c>QueueUserWorkItem</c> and each item checks it arrived;
/// <c>no-ec</c>: <c>UnsafeQueueUserWorkItem</c> with a <see cref="WaitCallback"/>; <c>work-item</c>: one reusable
/// <see cref="PoolWorkItem"/> (<c>IWorkItem</c> / <c>IThreadPoolWorkItem</c>) queued N times with
/// <c>UnsafeQueueUserWorkItem</c>, so the caller allocates nothing per item and <c>alloc</c> is the queue's own.
/// The first warm-up round queues N items and a margin behind the gate in every variant, so the measured round finds
/// every queue warm at its full depth.
/// </summary>
internal sealed class QueueDrainScenario : IScenario
{
    private const int Items = 1_000_000;
    private const int WarmupItems = 100_000;
    private const int DepthMargin = Items / 16;
    private const int ContextMarker = 42;

    private static readonly AsyncLocal<int> s_context = new();

    public string Id => "queue-drain";

    public string Description => $"an outside thread queues {Items:N0} trivial items, then waits for all of them";

    public IReadOnlyList<string> Variants { get; } =
        ["mixed/no-ec", "mixed/ec-flow", "separated/no-ec", "separated/ec-flow", "separated/work-item"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("queue", "ms", Better.Lower),
        new("drain", "ms", Better.Lower),
        new("total", "ms", Better.Lower),
        new("alloc", "B/item", Better.Lower, NoiseFloor: 0.01),
        new("gen0", "collections", Better.Lower),
    ];

    public string HeadlineMetric => "total";

    // Five variants: three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        (bool separated, Form form) = variant switch
        {
            "mixed/no-ec" => (false, Form.Unsafe),
            "mixed/ec-flow" => (false, Form.Flow),
            "separated/no-ec" => (true, Form.Unsafe),
            "separated/ec-flow" => (true, Form.Flow),
            "separated/work-item" => (true, Form.WorkItem),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        bool flow = form == Form.Flow;
        if (flow)
        {
            s_context.Value = ContextMarker; // the producer's context is now non-default, so both pools capture and restore it
        }

        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        // The first round queues all N items behind the gate, whatever the variant, so that the measured round's alloc
        // figure is that of queues already grown to the deepest the measured round can reach (what a long-running
        // process sees). Without the gate, a mixed round's depth is a race between the producer and the pool's threads
        // (from ten thousand items to most of the million between runs on two cores), and a measured round that went
        // deeper than its warm-up grew the queue in the measured round, 0 to 23 B/item between runs of the same build.
        // The smaller rounds after it give the JIT its time. The first round queues a margin beyond N: threads the pool
        // adds while the gate holds its workers take items before the producer has finished (a segment to five of a
        // million on two cores), so a round of exactly N reached a depth a few segments short of the measured round's
        // when the measured round's threads took fewer, and the measured round grew the queue by those segments.
        int warmupItems = Items + DepthMargin;
        Warmup.Repeat(() =>
        {
            RunOnce(pool, warmupItems, separated: separated || warmupItems > Items, form, measured: false);
            warmupItems = WarmupItems;
        });
        return RunOnce(pool, Items, separated, form, measured: true);
    }

    private static Measurement RunOnce(IPoolUnderTest pool, int items, bool separated, Form form, bool measured)
    {
        var state = new DrainState(items, separated, form == Form.Flow);
        if (measured)
        {
            // Only before the measured round: two full collections of a heap that holds the deep queue's segments take
            // most of a warm-up round's time (some 40 of 50 ms on 2 cores), and the warm-up needs rounds, not time, for
            // the per-round code's call counts to promote it.
            GcSnapshot.CollectFully();
        }
        GcSnapshot before = GcSnapshot.Take();

        long start = Stopwatch.GetTimestamp();
        switch (form)
        {
            case Form.Flow:
                for (int i = 0; i < items; i++)
                {
                    pool.Queue(s_item, state);
                }
                break;
            case Form.Unsafe:
                for (int i = 0; i < items; i++)
                {
                    pool.UnsafeQueue(s_item, state);
                }
                break;
            default:
                for (int i = 0; i < items; i++)
                {
                    pool.UnsafeQueue(state, preferLocal: false);
                }
                break;
        }
        long queued = Stopwatch.GetTimestamp();
        if (separated)
        {
            state.GateOpen = true;
            state.Gate.Set();
        }
        Waits.OrThrow(state.Done, $"{items:N0} queued items to run");
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;

        if (state.ContextErrors != 0)
        {
            throw new InvalidOperationException($"{state.ContextErrors:N0} items did not see the flowed ExecutionContext.");
        }
        return new Measurement { Items = items }
            .Set("queue", Pacer.ToMilliseconds(queued - start))
            .Set("drain", Pacer.ToMilliseconds(end - queued))
            .Set("total", Pacer.ToMilliseconds(end - start))
            .Set("alloc", (double)used.AllocatedBytes / items)
            .Set("gen0", used.Gen0);
    }

    private static readonly WaitCallback s_item = static boxed => ((DrainState)boxed!).Execute();

    /// <summary>How the items are queued.</summary>
    private enum Form
    {
        /// <summary><c>QueueUserWorkItem(WaitCallback, state)</c>: the context flows.</summary>
        Flow,

        /// <summary><c>UnsafeQueueUserWorkItem(WaitCallback, state)</c>.</summary>
        Unsafe,

        /// <summary><c>UnsafeQueueUserWorkItem(item, preferLocal: false)</c> with the state itself as the item.</summary>
        WorkItem,
    }

    /// <summary>The shared state of one round; also the work item of the <c>work-item</c> variant.</summary>
    private sealed class DrainState(int items, bool useGate, bool checkContext) : PoolWorkItem
    {
        public readonly bool UseGate = useGate;
        public readonly bool CheckContext = checkContext;
        public readonly ManualResetEventSlim Gate = new(false);
        public readonly ManualResetEventSlim Done = new(false);
        public volatile bool GateOpen;
        public int Remaining = items;
        public int ContextErrors;

        public override void Execute()
        {
            if (UseGate && !GateOpen)
            {
                Gate.Wait();
            }
            if (CheckContext && s_context.Value != ContextMarker)
            {
                Interlocked.Increment(ref ContextErrors);
            }
            if (Interlocked.Decrement(ref Remaining) == 0)
            {
                Done.Set();
            }
        }
    }
}
