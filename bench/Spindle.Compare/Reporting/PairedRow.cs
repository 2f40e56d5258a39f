using System.Collections.Generic;
using System.IO;
using System.Linq;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;
using Spindle.Compare.Runner;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Reporting;

/// <summary>
/// One pool's figures for one <see cref="VariantComparison"/>: the ratio of the headline metric in each run (run
/// <c>i</c> of the variant against run <c>i</c> of the baseline, measured seconds apart; null where either run failed or
/// gave no figure, see <see cref="PairedRatios"/>), and the median of the rest.
/// Pairing run by run takes out what changes on a shared machine between minutes, which the ratio of two medians
/// taken minutes apart keeps.
/// </summary>
internal sealed record PairedRow(string Scenario, VariantComparison Comparison, PoolKind Pool, string Metric, IReadOnlyList<double?> Ratios)
{
    /// <summary>The median of the per-run ratios; null without a single run that succeeded on both sides.</summary>
    public double? Median => PairedRatios.Median(Ratios);

    public static List<PairedRow> Build(IReadOnlyList<CaseResult> cases)
    {
        var rows = new List<PairedRow>();
        foreach (IGrouping<IScenario, CaseResult> scenarioCases in cases.GroupBy(c => c.Scenario))
        {
            IScenario scenario = scenarioCases.Key;
            foreach (VariantComparison comparison in scenario.Comparisons)
            {
                CaseResult? variant = scenarioCases.FirstOrDefault(c => c.Variant == comparison.Variant);
                CaseResult? baseline = scenarioCases.FirstOrDefault(c => c.Variant == comparison.Baseline);
                MetricInfo? metric = scenario.Metrics.FirstOrDefault(m => m.Name == scenario.HeadlineMetric);
                if (variant is null || baseline is null || metric is null)
                {
                    continue;
                }
                foreach (PoolKind pool in PoolKind.All)
                {
                    var ratios = new List<double?>();
                    IReadOnlyList<ChildOutcome> variantRuns = variant.Outcomes(pool);
                    IReadOnlyList<ChildOutcome> baselineRuns = baseline.Outcomes(pool);
                    for (int i = 0; i < variantRuns.Count || i < baselineRuns.Count; i++)
                    {
                        if (i < variantRuns.Count && i < baselineRuns.Count
                            && variantRuns[i].Measurement?.Values.GetValueOrDefault(metric.Name) is { } v and > 0
                            && baselineRuns[i].Measurement?.Values.GetValueOrDefault(metric.Name) is { } b and > 0)
                        {
                            ratios.Add(metric.Better == Better.Higher ? v / b : b / v);
                        }
                        else
                        {
                            ratios.Add(null); // a run of either side failed, or has no partner: shown, not dropped
                        }
                    }
                    rows.Add(new PairedRow(scenario.Id, comparison, pool, metric.Name, ratios));
                }
            }
        }
        return rows;
    }

    /// <summary>The header of the table both reports print.</summary>
    public static readonly string[] Header = ["scenario", "comparison", "pool", "metric", "median ratio", "runs"];

    /// <summary>A row's cells: the per-run ratios in run order after the median.</summary>
    public string[] Cells() =>
    [
        Scenario,
        Comparison.Label,
        Pool.DisplayName,
        Metric,
        Median is { } median ? median.ToString("F2", Formats.Culture) + "x" : "n/a",
        PairedRatios.Format(Ratios),
    ];

    /// <summary>Writes the comparisons as a console table (nothing when there are none).</summary>
    public static void Write(TextWriter output, IReadOnlyList<PairedRow> rows)
    {
        if (rows.Count == 0)
        {
            return;
        }
        output.WriteLine();
        output.WriteLine("Variants against each other on the same pool, run by run (run i of each side, measured seconds apart; > 1: the first variant does better):");
        List<string[]> lines = [Header, .. rows.Select(r => r.Cells())];
        int[] widths = Enumerable.Range(0, Header.Length).Select(c => lines.Max(l => l[c].Length)).ToArray();
        foreach (string[] line in lines)
        {
            output.WriteLine(string.Join(" | ", line.Select((cell, c) => c == Header.Length - 1 ? cell : cell.PadRight(widths[c]))).TrimEnd());
            if (line == Header)
            {
                output.WriteLine(string.Join("-+-", widths.Select(w => new string('-', w))));
            }
        }
    }
}
