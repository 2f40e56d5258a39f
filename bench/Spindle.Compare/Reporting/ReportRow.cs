using System;
using System.Collections.Generic;
using System.Linq;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Reporting;

/// <summary>The runs of one metric on one pool, summarised.</summary>
internal sealed class PoolFigures(PoolKind pool, IReadOnlyList<double> runs)
{
    public PoolKind Pool { get; } = pool;

    /// <summary>
    /// How many of the case's runs on the pool succeeded, of those asked for. <see cref="Runs"/> holds fewer figures
    /// than <see cref="RunTally.Succeeded"/> only where the pool cannot produce the metric.
    /// </summary>
    public RunTally Tally { get; init; }

    public IReadOnlyList<double> Runs { get; } = runs;

    public double? Median => Runs.Count == 0 ? null : Stats.Median(Runs.ToArray());

    public double? Min => Runs.Count == 0 ? null : Runs.Min();

    public double? Max => Runs.Count == 0 ? null : Runs.Max();
}

/// <summary>One (scenario, variant, metric) line of the report: figures for every pool, and the ratio.</summary>
internal sealed class ReportRow(string scenario, string variant, MetricInfo metric, IReadOnlyList<PoolFigures> pools)
{
    /// <summary>
    /// The case's recorded series per pool (every successful run), on the first row of a case that records them;
    /// null on every other row.
    /// </summary>
    public IReadOnlyDictionary<PoolKind, List<List<double[]>>>? Series { get; init; }

    /// <summary>The case's runs that produced no figures (every pool's), the same on every row of the case.</summary>
    public IReadOnlyList<FailedRun> FailedRuns { get; init; } = [];

    public string Scenario { get; } = scenario;

    public string Variant { get; } = variant;

    public MetricInfo Metric { get; } = metric;

    /// <summary>Whether this is one of the process-wide figures every case reports (<see cref="ProcessMeter"/>).</summary>
    public bool IsProcessMetric => Metric.Name.StartsWith(ProcessMeter.Prefix, StringComparison.Ordinal);

    /// <summary>One entry per pool, in <see cref="PoolKind.All"/> order.</summary>
    public IReadOnlyList<PoolFigures> Pools { get; } = pools;

    public PoolFigures For(PoolKind pool) => Pools.First(p => p.Pool == pool);

    /// <summary>
    /// How many times better <see cref="PoolKind.RatioSubject"/> is than <see cref="PoolKind.RatioBaseline"/> on the
    /// medians (baseline / subject when lower is better, subject / baseline when higher is better); &gt; 1 means the
    /// subject wins. Null when either has no figure (no successful run, or a metric the pool cannot produce). A value
    /// below the metric's noise floor counts as the floor itself, so two values under the floor are a tie (1) and a
    /// value under it against one above it gives at most (other / floor), never a ratio that only measures incidental
    /// noise; with a floor of zero, a zero against a non-zero is infinity.
    /// </summary>
    public double? Ratio
    {
        get
        {
            double? subject = For(PoolKind.RatioSubject).Median;
            double? baseline = For(PoolKind.RatioBaseline).Median;
            if (subject is null || baseline is null)
            {
                return null;
            }
            double s = Math.Max(subject.Value, Metric.NoiseFloor);
            double b = Math.Max(baseline.Value, Metric.NoiseFloor);
            (double better, double worse) = Metric.Better == Better.Lower ? (b, s) : (s, b);
            if (better == 0 && worse == 0)
            {
                return 1;
            }
            return worse == 0 ? double.PositiveInfinity : better / worse;
        }
    }

    /// <summary>
    /// The distribution-free confidence interval of <see cref="Ratio"/> from the two pools' runs (see
    /// <see cref="RatioInterval"/>); null for the process figures, and where the run counts allow no interval.
    /// </summary>
    public RatioInterval? Interval =>
        IsProcessMetric
            ? null
            : RatioInterval.Of(For(PoolKind.RatioSubject).Runs, For(PoolKind.RatioBaseline).Runs, Metric.Better, Metric.NoiseFloor);

    /// <summary>
    /// How far apart <paramref name="pool"/>'s runs lie: max / min, each first raised to the metric's noise floor (as in
    /// <see cref="Ratio"/>, so that runs under the floor do not read as a wide spread). 1 when both are zero (or for a
    /// single figure repeated); infinity when only the smallest is zero with a floor of zero; null with fewer than two
    /// runs, from which no spread can be told.
    /// </summary>
    public double? Spread(PoolKind pool)
    {
        PoolFigures figures = For(pool);
        if (figures.Runs.Count < 2)
        {
            return null;
        }
        double min = Math.Max(figures.Min!.Value, Metric.NoiseFloor);
        double max = Math.Max(figures.Max!.Value, Metric.NoiseFloor);
        if (max == 0)
        {
            return 1;
        }
        return min <= 0 ? double.PositiveInfinity : max / min;
    }

    /// <summary>
    /// Whether <see cref="PoolKind.RatioSubject"/>'s runs spread wider than <see cref="SpreadRule.WideSpread"/> and more
    /// than <see cref="SpreadRule.WiderThanOther"/> times <see cref="PoolKind.RatioBaseline"/>'s: its median is then less settled
    /// than the baseline's, and the ratio deserves re-runs before it is read. False for the process figures (which
    /// are not in the main table) and wherever either spread is unknown.
    /// </summary>
    public bool SpreadWider =>
        !IsProcessMetric && SpreadRule.Wider(Spread(PoolKind.RatioSubject), Spread(PoolKind.RatioBaseline));

    /// <summary>
    /// The same rule the other way round: <see cref="PoolKind.RatioBaseline"/>'s runs spread wider than
    /// <see cref="PoolKind.RatioSubject"/>'s. Not a flag on the baseline: how many rows it marks in a run is how many the
    /// rule marks where the pool under test is the other one, the machine's share of the flags in that run.
    /// </summary>
    public bool BaselineSpreadWider =>
        !IsProcessMetric && SpreadRule.Wider(Spread(PoolKind.RatioBaseline), Spread(PoolKind.RatioSubject));

    /// <summary>One row per metric of every case, in run order.</summary>
    public static List<ReportRow> Build(IEnumerable<CaseResult> cases)
    {
        var rows = new List<ReportRow>();
        foreach (CaseResult result in cases)
        {
            Dictionary<PoolKind, List<List<double[]>>> series = PoolKind.All.ToDictionary(pool => pool, result.Series);
            bool first = series.Values.Any(runs => runs.Count != 0);
            List<FailedRun> failed = result.FailedRuns();
            foreach (MetricInfo metric in result.Scenario.MetricsFor(result.Variant).Concat(ProcessMeter.Metrics))
            {
                PoolFigures[] pools = PoolKind.All
                    .Select(pool => new PoolFigures(pool, result.Values(pool, metric.Name)) { Tally = result.Tally(pool) })
                    .ToArray();
                rows.Add(new ReportRow(result.Scenario.Id, result.Variant, metric, pools) { Series = first ? series : null, FailedRuns = failed });
                first = false;
            }
        }
        return rows;
    }

    /// <summary>
    /// The runs of every case in <paramref name="rows"/> that produced no figures, in case order, and how many runs
    /// were asked for in all (each case counted once, every pool).
    /// </summary>
    public static (List<FailedRun> Failed, int Asked) Runs(IReadOnlyList<ReportRow> rows)
    {
        var failed = new List<FailedRun>();
        int asked = 0;
        foreach (ReportRow first in rows.DistinctBy(r => (r.Scenario, r.Variant)))
        {
            failed.AddRange(first.FailedRuns);
            asked += first.Pools.Sum(p => p.Tally.Asked);
        }
        return (failed, asked);
    }

    /// <summary>"min .. max" in <see cref="Format"/>'s form: a range of runs.</summary>
    public static string FormatRange(double min, double max) => $"{Format(min)} .. {Format(max)}";

    /// <summary>Formats a figure compactly: 12.35M, 1,234, 123.4, 12.34, 0.123; whole numbers without decimals.</summary>
    public static string Format(double value)
    {
        double magnitude = Math.Abs(value);
        return magnitude switch
        {
            0 => "0",
            < 1_000_000 when value == Math.Floor(value) => value.ToString("N0", Formats.Culture), // counts
            >= 1_000_000 => (value / 1_000_000).ToString("F2", Formats.Culture) + "M",
            >= 1_000 => value.ToString("N0", Formats.Culture),
            >= 100 => value.ToString("F1", Formats.Culture),
            >= 1 => value.ToString("F2", Formats.Culture),
            _ => value.ToString("F3", Formats.Culture),
        };
    }
}
