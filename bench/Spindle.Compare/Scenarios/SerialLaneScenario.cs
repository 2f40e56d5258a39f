using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// A strand: one outside thread queues N trivial items to a serial queue as fast as it can; timed from the first
/// enqueue until the last item has run (it signals), in rounds until their times add up to a minimum. Spindle: a lane with <c>MaxConcurrency = 1</c>, each item queued
/// with <c>lane.QueueUserWorkItem(Action&lt;object?&gt;, state, preferLocal: false)</c>. Built-in: the
/// <c>ExclusiveScheduler</c> of a <see cref="System.Threading.Tasks.ConcurrentExclusiveSchedulerPair"/>, each item a task
/// started with <c>Task.Factory.StartNew(action, state, CancellationToken.None, TaskCreationOptions.None, exclusive)</c>.
/// Both use the same cached static delegate. A task always captures the caller's <see cref="ExecutionContext"/>, so
/// Spindle uses its flowing form, not the <c>Unsafe</c> one, to match. Each item's state is a small object holding its
/// sequence number (as a message queued to a strand would be: both pools pay that allocation; the built-in pool also
/// allocates its task), and every item checks it against a counter: an item out of order, or two items running at once,
/// fails the child. The check runs on both pools, so both run the same code per item.
/// </summary>
internal sealed class SerialLaneScenario : IScenario
{
    private const int QuickItems = 200_000;
    private const int FullItems = 1_000_000;
    private const int WarmupItems = QuickItems / 10;
    private static readonly TimeSpan QuickMinimum = TimeSpan.FromMilliseconds(300);
    private static readonly TimeSpan FullMinimum = TimeSpan.FromSeconds(3);

    public string Id => "serial-lane";

    public string Description =>
        $"one outside thread queues rounds of {QuickItems:N0} trivial items for at least {QuickMinimum.TotalMilliseconds:N0} ms of rounds ({FullItems:N0} items, {FullMinimum.TotalSeconds:N0} s with --full) to a serial lane / ExclusiveScheduler";

    public IReadOnlyList<string> Variants { get; } = ["1-producer"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "items/s", Better.Higher),
    ];

    public string HeadlineMetric => "throughput";

    // Three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "1-producer")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        IPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(serial, WarmupItems));
        int items = full ? FullItems : QuickItems;
        TimeSpan minimum = full ? FullMinimum : QuickMinimum;

        // Rounds until the minimum has passed: a quick round takes tens of milliseconds, in which a virtual machine's
        // moment-to-moment changes decide the figure; several rounds average them out.
        // Each round starts from a clean heap, and the process meter's measured part restarts after that collection: the
        // process figures cover the last round, so the measurement's item count (their divisor) is one round's.
        long total = 0;
        double seconds = 0;
        do
        {
            seconds += RunOnce(serial, items);
            total += items;
        }
        while (seconds < minimum.TotalSeconds);
        return new Measurement { Items = items }.Set("throughput", total / seconds);
    }

    /// <summary>One round: queues <paramref name="items"/> items and waits for the last; returns its time in seconds.</summary>
    private static double RunOnce(IPoolLane serial, int items)
    {
        var run = new SerialRun(items);
        GcSnapshot.CollectFully();

        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < items; i++)
        {
            serial.Queue(s_step, new Step(run, i));
        }
        Waits.OrThrow(run.Done, $"{items:N0} serial items to run");
        if (run.Violation is { } violation)
        {
            throw new InvalidOperationException($"The serial queue broke its order: {violation}.");
        }
        return (run.CompletedAt - start) / (double)Stopwatch.Frequency;
    }

    private static readonly Action<object?> s_step = static boxed =>
    {
        var step = (Step)boxed!;
        SerialRun run = step.Run;
        // No atomics: a serial queue runs one item at a time and orders each after the previous one. (The volatile
        // accesses only keep the compiler from dropping the flag's stores; on x64 they are plain moves.)
        if (Volatile.Read(ref run.Running))
        {
            run.Violation ??= $"item {step.Sequence} started while another item was running";
        }
        Volatile.Write(ref run.Running, true);
        if (step.Sequence != run.Next)
        {
            run.Violation ??= $"item {step.Sequence} ran when item {run.Next} was due";
        }
        run.Next = step.Sequence + 1;
        Volatile.Write(ref run.Running, false);
        if (step.Sequence == run.Items - 1)
        {
            run.CompletedAt = Stopwatch.GetTimestamp();
            run.Done.Set();
        }
    };

    /// <summary>The state of one item: a small object, as a message queued to a strand would be.</summary>
    private sealed class Step(SerialRun run, int sequence)
    {
        public readonly SerialRun Run = run;
        public readonly int Sequence = sequence;
    }

    private sealed class SerialRun(int items)
    {
        public readonly int Items = items;
        public readonly ManualResetEventSlim Done = new(false);
        public int Next;
        public bool Running;
        public string? Violation;
        public long CompletedAt;
    }
}
