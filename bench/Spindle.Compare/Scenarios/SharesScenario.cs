using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Two Normal lanes with shares 3 and 1, both kept saturated with items of 20 µs of CPU (spun on
/// <see cref="Stopwatch"/>) for a window of 1 s (2 s with <c>--full</c>). <c>share error</c> is how far the first lane's
/// part of the items completed inside the window is from 75%, in percentage points: |completed(first) /
/// (completed(first) + completed(second)) × 100 − 75|.
/// <para>Saturation: each lane circulates a fixed set of queued items (<see cref="ItemsPerLane"/>, at least 8 per core)
/// that re-queue themselves to their own lane when they finish, so both lanes always have items queued and the dispatch
/// rule alone decides which runs. (A feeder thread topping the lanes up would compete with the workers for the cores.)
/// The items circulate for a ramp-up of 100 ms before the window opens; an item counts only if it completes while the
/// window is open (a flag the items read after their work), and once it closes the items stop re-queueing and drain.</para>
/// <para>The built-in pool has no lanes: both "lanes" are its one global queue, which runs the circulating items in turn,
/// so each lane gets the part of them it owns (50%), an error of about 25 points. Only Spindle's row measures shares.</para>
/// </summary>
internal sealed class SharesScenario : IScenario
{
    private const int FirstShare = 3;
    private const int SecondShare = 1;
    private const int WorkMicroseconds = 20;
    private const double ExpectedFirstPercent = 100.0 * FirstShare / (FirstShare + SecondShare);
    private static readonly TimeSpan s_quickWindow = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan s_fullWindow = TimeSpan.FromSeconds(2);
    private static readonly TimeSpan s_warmupWindow = TimeSpan.FromMilliseconds(200);
    private static readonly TimeSpan s_rampUp = TimeSpan.FromMilliseconds(100);

    /// <summary>Items circulating in each lane: a few hundred, and always more than the workers could take at once.</summary>
    private static int ItemsPerLane => Math.Max(256, 8 * Environment.ProcessorCount);

    public string Id => "shares";

    public string Description =>
        $"two saturated Normal lanes, shares {FirstShare} and {SecondShare}, {WorkMicroseconds} µs items for " +
        $"{s_quickWindow.TotalSeconds:F0} s ({s_fullWindow.TotalSeconds:F0} s with --full): distance of the first lane's part from {ExpectedFirstPercent:F0}%";

    public IReadOnlyList<string> Variants { get; } = ["3-1/20us"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("share error", "%", Better.Lower),
    ];

    public string HeadlineMetric => "share error";

    // Three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "3-1/20us")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        IPoolLane first = pool.CreateLane(new LaneOptions { Name = "share-3", Share = FirstShare });
        IPoolLane second = pool.CreateLane(new LaneOptions { Name = "share-1", Share = SecondShare });
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(first, second, s_warmupWindow));
        return RunOnce(first, second, full ? s_fullWindow : s_quickWindow);
    }

    private static Measurement RunOnce(IPoolLane first, IPoolLane second, TimeSpan window)
    {
        var run = new ShareRun(2 * ItemsPerLane);
        var firstItem = new ShareItem(run, first);
        var secondItem = new ShareItem(run, second);
        GcSnapshot.CollectFully();

        // Alternately, so that on the built-in pool's one queue the two lanes' items are interleaved from the start.
        for (int i = 0; i < ItemsPerLane; i++)
        {
            first.UnsafeQueue(firstItem);
            second.UnsafeQueue(secondItem);
        }
        Thread.Sleep(s_rampUp);
        Volatile.Write(ref run.Phase, ShareRun.Counting);
        Thread.Sleep(window);
        Volatile.Write(ref run.Phase, ShareRun.Stopping);
        Waits.OrThrow(run.Drained, "the circulating items to drain");

        long firstCount = Interlocked.Read(ref firstItem.Counted);
        long secondCount = Interlocked.Read(ref secondItem.Counted);
        if (firstCount + secondCount == 0)
        {
            throw new InvalidOperationException("No item completed inside the window.");
        }
        double firstPercent = 100.0 * firstCount / (firstCount + secondCount);
        return new Measurement { Items = Interlocked.Read(ref firstItem.Completed) + Interlocked.Read(ref secondItem.Completed) }
            .Set("share error", Math.Abs(firstPercent - ExpectedFirstPercent));
    }

    private sealed class ShareRun(int items)
    {
        public const int RampUp = 0;
        public const int Counting = 1;
        public const int Stopping = 2;

        public readonly long WorkTicks = Pacer.TicksFromMicroseconds(WorkMicroseconds);
        public readonly ManualResetEventSlim Drained = new(false);

        /// <summary><see cref="RampUp"/>, then <see cref="Counting"/> while the window is open, then <see cref="Stopping"/>.</summary>
        public int Phase = RampUp;

        /// <summary>Items queued or running: each lane's item object is queued <see cref="ItemsPerLane"/> times at once.</summary>
        public int Live = items;
    }

    /// <summary>A lane's item: one reusable object, queued many times at once, that re-queues itself to its lane.</summary>
    private sealed class ShareItem(ShareRun run, IPoolLane lane) : PoolWorkItem
    {
        /// <summary>Completions while the window was open.</summary>
        public long Counted;

        /// <summary>Every completion of the round.</summary>
        public long Completed;

        public override void Execute()
        {
            Pacer.WaitUntil(Stopwatch.GetTimestamp() + run.WorkTicks, Pacer.SpinOnly);
            Interlocked.Increment(ref Completed);
            int phase = Volatile.Read(ref run.Phase);
            if (phase == ShareRun.Counting)
            {
                Interlocked.Increment(ref Counted);
            }
            if (phase != ShareRun.Stopping)
            {
                lane.UnsafeQueue(this);
            }
            else if (Interlocked.Decrement(ref run.Live) == 0)
            {
                run.Drained.Set();
            }
        }
    }
}
