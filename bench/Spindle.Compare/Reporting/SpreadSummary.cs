using System.Collections.Generic;
using System.Linq;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The spread factors of the results table (<see cref="ReportRow.Spread"/>): the column that shows the subject's and
/// the baseline's side by side with a mark on the rows <see cref="ReportRow.SpreadWider"/> flags, and the summary
/// under the table that lists those rows, for the console and the Markdown report alike.
/// </summary>
internal static class SpreadSummary
{
    /// <summary>The mark a flagged row's spread cell ends with.</summary>
    public const string WiderMark = "wider";

    /// <summary>The column's header: "spread (x) Spindle / built-in".</summary>
    public static string Header => $"spread (x) {PoolKind.RatioSubject.DisplayName} / {PoolKind.RatioBaseline.DisplayName}";

    /// <summary>What the column means, for the note under the table (after "spread (x) = " or the like).</summary>
    public static string Legend =>
        $"max / min of the runs, {PoolKind.RatioSubject.DisplayName}'s / {PoolKind.RatioBaseline.DisplayName}'s (values under the "
        + $"metric's noise floor count as the floor); \"{WiderMark}\" where {PoolKind.RatioSubject.DisplayName}'s is over "
        + $"{Number(SpreadRule.WideSpread)}x and over {Number(SpreadRule.WiderThanOther)} times {PoolKind.RatioBaseline.DisplayName}'s.";

    /// <summary>"1.74 / 1.16", with <see cref="WiderMark"/> after it on a flagged row.</summary>
    public static string Cell(ReportRow row) =>
        Factors(row) + (row.SpreadWider ? " " + WiderMark : "");

    /// <summary>The subject's and the baseline's factors: "1.74 / 1.16" ("n/a" for an unknown one).</summary>
    public static string Factors(ReportRow row) =>
        $"{FormatFactor(row.Spread(PoolKind.RatioSubject))} / {FormatFactor(row.Spread(PoolKind.RatioBaseline))}";

    public static string FormatFactor(double? factor) => factor switch
    {
        null => "n/a",
        double f when double.IsPositiveInfinity(f) => "inf",
        double f => f.ToString("F2", Formats.Culture),
    };

    /// <summary>
    /// The line under the table, "N of M rows: ...", where M counts the main-table rows with both spreads known, and the
    /// count of the same rule read the other way round (<see cref="ReportRow.BaselineSpreadWider"/>), the reference for N
    /// on the same machine in the same run; ends with a colon when rows follow (<see cref="FlaggedRows"/>), with a full
    /// stop when none was flagged.
    /// </summary>
    public static string Line(IReadOnlyList<ReportRow> rows)
    {
        List<ReportRow> main = rows.Where(r => !r.IsProcessMetric).ToList();
        int counted = main.Count(r => r.Spread(PoolKind.RatioSubject) is not null && r.Spread(PoolKind.RatioBaseline) is not null);
        int flagged = main.Count(r => r.SpreadWider);
        int mirrored = main.Count(r => r.BaselineSpreadWider);
        return $"{flagged} of {counted} rows: {PoolKind.RatioSubject.DisplayName}'s runs spread more than "
            + $"{Number(SpreadRule.WideSpread)}x and more than {Number(SpreadRule.WiderThanOther)} times the {PoolKind.RatioBaseline.DisplayName} pool's "
            + $"(the other way round, the {PoolKind.RatioBaseline.DisplayName} pool's wider than {PoolKind.RatioSubject.DisplayName}'s: {mirrored})"
            + (flagged > 0 ? ":" : ".");
    }

    private static string Number(double value) => value.ToString("0.##", Formats.Culture);

    /// <summary>
    /// One entry per flagged row, in table order: "scenario variant metric (1.74 / 1.16)", with the range of the machine's
    /// cache-line round trip over the case's runs of both pools where it was measured ("; host round trip 55 .. 462 ns")
    /// and of its CPUs' speed ("; host compute 1,950 .. 4,100 ns/1k steps"): a row whose runs met the host in two states
    /// (see <see cref="HostRoundTrip"/> and <see cref="HostCompute"/>) can spread for that reason alone.
    /// </summary>
    public static List<string> FlaggedRows(IReadOnlyList<ReportRow> rows) =>
        rows.Where(r => r.SpreadWider).Select(r => $"{r.Scenario} {r.Variant} {r.Metric.Name} ({Factors(r)}{HostRange(rows, r)})").ToList();

    private static string HostRange(IReadOnlyList<ReportRow> rows, ReportRow flagged) =>
        HostRange(rows, flagged, ProcessMeter.HostRoundTripMetric.Name, "host round trip", "ns")
        + HostRange(rows, flagged, ProcessMeter.HostComputeMetric.Name, "host compute", "ns/1k steps");

    private static string HostRange(IReadOnlyList<ReportRow> rows, ReportRow flagged, string name, string label, string unit)
    {
        ReportRow? host = rows.FirstOrDefault(r => r.IsProcessMetric && r.Metric.Name == name
            && r.Scenario == flagged.Scenario && r.Variant == flagged.Variant);
        List<double> runs = host is null ? [] : PoolKind.All.SelectMany(pool => host.For(pool).Runs).ToList();
        return runs.Count == 0
            ? ""
            : $"; {label} {ReportRow.FormatRange(runs.Min(), runs.Max())} {unit}";
    }
}
