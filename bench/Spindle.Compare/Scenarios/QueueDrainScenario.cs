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
/// <c>no-ec</c>: <c>UnsafeQueueUserWorkItem</c>.
/// </summary>
internal sealed class QueueDrainScenario : IScenario
{
    private const int Items = 1_000_000;
    private const int WarmupItems = 100_000;
    private const int ContextMarker = 42;

    private static readonly AsyncLocal<int> s_context = new();

    public string Id => "queue-drain";

    public string Description => $"an outside thread queues {Items:N0} trivial items, then waits for all of them";

    public IReadOnlyList<string> Variants { get; } = ["mixed/no-ec", "mixed/ec-flow", "separated/no-ec", "separated/ec-flow"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("queue", "ms", Better.Lower),
        new("drain", "ms", Better.Lower),
        new("total", "ms", Better.Lower),
        new("alloc", "B/item", Better.Lower, NoiseFloor: 0.01),
        new("gen0", "collections", Better.Lower),
    ];

    public string HeadlineMetric => "total";

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        (bool separated, bool flow) = variant switch
        {
            "mixed/no-ec" => (false, false),
            "mixed/ec-flow" => (false, true),
            "separated/no-ec" => (true, false),
            "separated/ec-flow" => (true, true),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        if (flow)
        {
            s_context.Value = ContextMarker; // the producer's context is now non-default, so both pools capture and restore it
        }

        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(pool, WarmupItems, separated, flow));
        return RunOnce(pool, Items, separated, flow);
    }

    private static Measurement RunOnce(IPoolUnderTest pool, int items, bool separated, bool flow)
    {
        var state = new DrainState(items, separated, flow);
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();

        long start = Stopwatch.GetTimestamp();
        if (flow)
        {
            for (int i = 0; i < items; i++)
            {
                pool.Queue(s_item, state);
            }
        }
        else
        {
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueue(s_item, state);
            }
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

    private static readonly WaitCallback s_item = static boxed =>
    {
        var state = (DrainState)boxed!;
        if (state.UseGate && !state.GateOpen)
        {
            state.Gate.Wait();
        }
        if (state.CheckContext && s_context.Value != ContextMarker)
        {
            Interlocked.Increment(ref state.ContextErrors);
        }
        if (Interlocked.Decrement(ref state.Remaining) == 0)
        {
            state.Done.Set();
        }
    };

    private sealed class DrainState(int items, bool useGate, bool checkContext)
    {
        public readonly bool UseGate = useGate;
        public readonly bool CheckContext = checkContext;
        public readonly ManualResetEventSlim Gate = new(false);
        public readonly ManualResetEventSlim Done = new(false);
        public volatile bool GateOpen;
        public int Remaining = items;
        public int ContextErrors;
    }
}
