using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Stuck-item detection: a pool with a stuck-item threshold of 200 ms (<see cref="PoolSettings.StuckItemThreshold"/>)
/// runs a stream of 1,000 short items (about 10 µs of spinning each, queued by an outside thread one per millisecond)
/// and, after the first 100 of them, one item that blocks (sleeps) for 1 s. Measured: <c>report delay</c>, the time from
/// the moment that item passes the threshold (its start plus the threshold) until the pool's report of it reaches the
/// handler. Spindle: <c>WorkerPoolOptions.StuckItemThreshold</c> and <c>WorkerPool.StuckWorkItemDetected</c> (its
/// detector looks every quarter threshold, so a report is due up to half a threshold late, plus the handler's dispatch
/// to the built-in pool). <c>--full</c> measures 5 blocking items in turn and reports the median delay.
/// </summary>
/// <remarks>
/// <para>After each blocking item the child checks that exactly one report came, for that item (its worker thread, its
/// method, no lane, a running time of at least the threshold), and that no report came between rounds; it fails
/// otherwise. The warm-up rounds (200 short items, an item that blocks for three thresholds) are checked the same way.</para>
/// <para>The built-in pool has no stuck-item detection (<see cref="IPoolUnderTest.TryObserveStuckItems"/> says so): it
/// runs the same workload, for its process figures, and its <c>report delay</c> is unavailable
/// (<see cref="Measurement.SetUnavailable"/>: n/a in the tables, null in the JSON, no ratio).</para>
/// </remarks>
internal sealed class StuckItemScenario : IScenario
{
    private const string Metric = "report delay";
    private const int ShortItems = 1_000;
    private const int WarmupShortItems = 200;
    private const int FullRounds = 5;
    private const double ShortItemMicroseconds = 10;
    private static readonly TimeSpan s_threshold = TimeSpan.FromMilliseconds(200);
    private static readonly TimeSpan s_block = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan s_warmupBlock = 3 * s_threshold;
    private static readonly TimeSpan s_itemGap = TimeSpan.FromMilliseconds(1);

    /// <summary>How the pool names the blocking item (<c>StuckWorkItemEventArgs.Description</c> of a delegate: its method).</summary>
    private static readonly string s_blockerName = $"{typeof(StuckItemScenario).FullName}.{nameof(BlockItem)}";

    public string Id => "stuck-item";

    public string Description =>
        $"one item blocks {s_block.TotalSeconds:F0} s among {ShortItems:N0} short items, {s_threshold.TotalMilliseconds:F0} ms stuck-item threshold: "
        + $"delay of its report past the threshold ({FullRounds} items with --full; Spindle only)";

    public IReadOnlyList<string> Variants { get; } = ["threshold-200ms"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new(Metric, "ms", Better.Lower),
    ];

    public string HeadlineMetric => Metric;

    // A round lasts seconds, and the built-in pool's runs only give its process figures.
    public int? MaxDefaultRuns => 2;

    public PoolSettings GetPoolSettings(string variant) => PoolSettings.Default with { StuckItemThreshold = s_threshold };

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "threshold-200ms")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        // Observed from here on: the warm-up items above may have waited past the threshold for each other.
        var sink = new ReportSink();
        ReportSink? reports = pool.TryObserveStuckItems(sink.Add) ? sink : null;
        Warmup.Repeat(() => RunRound(pool, reports, WarmupShortItems, s_warmupBlock));
        GcSnapshot.CollectFully();

        int rounds = full ? FullRounds : 1;
        var delays = new double[rounds];
        for (int i = 0; i < rounds; i++)
        {
            delays[i] = RunRound(pool, reports, ShortItems, s_block);
        }
        reports?.CheckNoStray();
        var measurement = new Measurement { Items = rounds * (ShortItems + 1L) };
        return reports is null ? measurement.SetUnavailable(Metric) : measurement.Set(Metric, Stats.Median(delays));
    }

    /// <summary>
    /// Streams <paramref name="shortItems"/> short items, the blocking one after the first tenth; waits for all of them.
    /// Returns the report delay in ms (NaN when the pool cannot report); throws unless exactly one report came, for the
    /// blocking item.
    /// </summary>
    private static double RunRound(IPoolUnderTest pool, ReportSink? reports, int shortItems, TimeSpan block)
    {
        var round = new Round(shortItems + 1, block);
        reports?.Begin(round);

        long gap = Pacer.Ticks(s_itemGap);
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < shortItems; i++)
        {
            if (i == shortItems / 10)
            {
                pool.UnsafeQueue(s_blockItem, round, preferLocal: false);
            }
            Pacer.WaitUntil(start + (i * gap), TimeSpan.Zero); // sleeps in 1 ms steps: the producer takes no core
            pool.UnsafeQueue(s_shortItem, round, preferLocal: false);
        }
        Waits.OrThrow(round.Done, $"{shortItems:N0} short items and the blocking one to run");

        // The pool reports while the item runs, so the report is at most its dispatch away by now; then a threshold's
        // time for a second report of the same item, which would be a fault. (The pause is taken on every pool, so that
        // the process figures cover the same stretch.)
        round.Reported.Wait(reports is null ? TimeSpan.Zero : TimeSpan.FromSeconds(1));
        Thread.Sleep(s_threshold);
        if (reports is null)
        {
            return double.NaN;
        }
        reports.End();

        List<(StuckItemReport Report, long At)> received = round.Reports();
        if (received.Count != 1)
        {
            throw new InvalidOperationException($"Expected one stuck-item report for the item that blocked {block.TotalMilliseconds:F0} ms, got {received.Count}"
                + (received.Count == 0 ? "." : ": " + string.Join("; ", received.Select(r => r.Report.ToString())) + "."));
        }
        (StuckItemReport report, long at) = received[0];
        if (report.ManagedThreadId != round.BlockerThreadId || !report.Description.Contains(s_blockerName, StringComparison.Ordinal)
            || report.LaneName is not null || report.RunningTime < s_threshold)
        {
            throw new InvalidOperationException(
                $"The stuck-item report does not describe the blocking item ({s_blockerName} on thread {round.BlockerThreadId}): {report}.");
        }
        return Pacer.ToMilliseconds(at - (Volatile.Read(ref round.BlockerStarted) + Pacer.Ticks(s_threshold)));
    }

    private static readonly Action<object?> s_shortItem = static boxed =>
    {
        var round = (Round)boxed!;
        long until = Stopwatch.GetTimestamp() + Pacer.TicksFromMicroseconds(ShortItemMicroseconds);
        while (Stopwatch.GetTimestamp() < until)
        {
            Thread.SpinWait(1);
        }
        round.Complete();
    };

    private static readonly Action<object?> s_blockItem = BlockItem;

    /// <summary>The blocking item: a named method, so that the report's description can be checked.</summary>
    private static void BlockItem(object? boxed)
    {
        var round = (Round)boxed!;
        round.BlockerThreadId = Environment.CurrentManagedThreadId;
        Volatile.Write(ref round.BlockerStarted, Stopwatch.GetTimestamp());
        Thread.Sleep(round.Block);
        round.Complete();
    }

    /// <summary>One round's items and the reports that came while it was current.</summary>
    private sealed class Round(int items, TimeSpan block)
    {
        private readonly List<(StuckItemReport, long)> _reports = [];
        private int _remaining = items;

        public readonly TimeSpan Block = block;
        public readonly ManualResetEventSlim Done = new(false);
        public readonly ManualResetEventSlim Reported = new(false);
        public int BlockerThreadId;
        public long BlockerStarted;

        public void Complete()
        {
            if (Interlocked.Decrement(ref _remaining) == 0)
            {
                Done.Set();
            }
        }

        public void Add(StuckItemReport report, long at)
        {
            lock (_reports)
            {
                _reports.Add((report, at));
            }
            Reported.Set();
        }

        public List<(StuckItemReport Report, long At)> Reports()
        {
            lock (_reports)
            {
                return [.. _reports];
            }
        }
    }

    /// <summary>The pool's stuck-item handler: files each report, with its arrival time, under the current round.</summary>
    private sealed class ReportSink
    {
        private Round? _current;
        private StuckItemReport? _stray;

        public void Begin(Round round)
        {
            CheckNoStray();
            Volatile.Write(ref _current, round);
        }

        /// <summary>Throws if a report came while no round was current (after the blocking item's round had ended).</summary>
        public void CheckNoStray()
        {
            if (Volatile.Read(ref _stray) is { } stray)
            {
                throw new InvalidOperationException($"A stuck-item report came between rounds: {stray}.");
            }
        }

        public void End() => Volatile.Write(ref _current, null);

        public void Add(StuckItemReport report)
        {
            long at = Stopwatch.GetTimestamp();
            if (Volatile.Read(ref _current) is { } round)
            {
                round.Add(report, at);
            }
            else
            {
                Interlocked.CompareExchange(ref _stray, report, null);
            }
        }
    }
}
