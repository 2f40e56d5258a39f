using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The report as a text table: scenario, variant, metric, one median column per pool (with its runs counted where
/// fewer succeeded than were asked for, <see cref="RunTally.Annotate"/>), the ratio and its interval, one spread
/// (min .. max) column per pool, and the spread factors (<see cref="SpreadSummary"/>); under it, the rows whose
/// subject spread wider than the baseline.
/// </summary>
internal static class ConsoleTable
{
    public static void Write(TextWriter writer, IReadOnlyList<ReportRow> rows)
    {
        List<string> header = Header();
        int numericFrom = NumericFrom;

        var lines = new List<string[]>();
        string? lastCase = null;
        foreach (ReportRow row in rows)
        {
            string caseKey = row.Scenario + "\0" + row.Variant;
            bool sameCase = caseKey == lastCase;
            lastCase = caseKey;
            lines.Add(Cells(row, showCase: !sameCase).ToArray());
        }

        int[] widths = new int[header.Count];
        for (int column = 0; column < widths.Length; column++)
        {
            widths[column] = Math.Max(header[column].Length, lines.Count == 0 ? 0 : lines.Max(line => line[column].Length));
        }
        writer.WriteLine(Render(header.ToArray(), widths, numericFrom));
        writer.WriteLine(string.Join("-+-", widths.Select(width => new string('-', width))));
        foreach (string[] line in lines)
        {
            writer.WriteLine(Render(line, widths, numericFrom));
        }
        writer.WriteLine();
        writer.WriteLine($"Figures are medians over the runs. ratio = how many times better {PoolKind.RatioSubject.DisplayName} is than "
            + $"{PoolKind.RatioBaseline.DisplayName} ({PoolKind.RatioBaseline.DisplayName} / {PoolKind.RatioSubject.DisplayName} when lower is better, "
            + $"the inverse when higher is better); > 1 means {PoolKind.RatioSubject.DisplayName} wins. spread = min .. max of the runs; "
            + "spread (x) = " + SpreadSummary.Legend + " " + IntervalLegend);
        writer.WriteLine();
        writer.WriteLine(SpreadSummary.Line(rows));
        foreach (string flagged in SpreadSummary.FlaggedRows(rows))
        {
            writer.WriteLine("  " + flagged);
        }
    }

    /// <summary>Columns from this one on hold figures (right-aligned).</summary>
    internal const int NumericFrom = 4;

    /// <summary>
    /// The results table's header: case, metric, one median column per pool, the ratio, one spread column per pool, the
    /// spread factors.
    /// </summary>
    internal static List<string> Header()
    {
        var header = new List<string> { "scenario", "variant", "metric", "better" };
        header.AddRange(PoolKind.All.Select(pool => pool.DisplayName));
        header.Add("ratio");
        header.Add(IntervalHeader);
        header.AddRange(PoolKind.All.Select(pool => pool.DisplayName + " spread"));
        header.Add(SpreadSummary.Header);
        return header;
    }

    /// <summary>One row's cells under <see cref="Header"/>; the scenario and variant are left blank unless <paramref name="showCase"/>.</summary>
    internal static List<string> Cells(ReportRow row, bool showCase)
    {
        var cells = new List<string>
        {
            showCase ? row.Scenario : "",
            showCase ? row.Variant : "",
            $"{row.Metric.Name} ({row.Metric.Unit})",
            row.Metric.Better == Scenarios.Better.Lower ? "lower" : "higher",
        };
        cells.AddRange(row.Pools.Select(p => p.Tally.Annotate(p.Median is { } median ? ReportRow.Format(median) : "n/a")));
        cells.Add(FormatRatio(row.Ratio));
        cells.Add(FormatInterval(row.Interval));
        cells.AddRange(row.Pools.Select(p => p.Min is { } min ? ReportRow.FormatRange(min, p.Max!.Value) : "n/a"));
        cells.Add(SpreadSummary.Cell(row));
        return cells;
    }

    /// <summary>The header of the ratio's interval column.</summary>
    internal const string IntervalHeader = "ratio 95% interval";

    /// <summary>What the interval column means, for the notes under the tables.</summary>
    internal static string IntervalLegend =>
        "ratio 95% interval = the ratios of every " + PoolKind.RatioSubject.DisplayName + " run to every " + PoolKind.RatioBaseline.DisplayName
        + " run, cut to a distribution-free interval of at least 95% confidence (the Mann-Whitney test's), marked + when it lies above 1 ("
        + PoolKind.RatioSubject.DisplayName + " better beyond chance), - when below; n/a with too few runs for one (3 a side are too few, 4 a side enough).";

    /// <summary>"0.92 .. 1.31", with the interval's mark after it ("1.05 .. 1.31 +"); "n/a" without an interval.</summary>
    public static string FormatInterval(RatioInterval? interval) => interval is null
        ? "n/a"
        : $"{FormatBound(interval.Low)} .. {FormatBound(interval.High)}" + (interval.Mark.Length > 0 ? " " + interval.Mark : "");

    private static string FormatBound(double bound) => FormatRatio(bound).TrimEnd('x');

    public static string FormatRatio(double? ratio) => ratio switch
    {
        null => "n/a",
        double r when double.IsPositiveInfinity(r) => "inf",
        // Two significant digits below 0.1, so that a large loss does not read as 0.00x.
        double r when r is > 0 and < 0.1 => r.ToString("G2", Formats.Culture) + "x",
        double r => r.ToString("F2", Formats.Culture) + "x",
    };

    /// <summary>One line of a text table: cells padded to the column widths, right-aligned from <paramref name="numericFrom"/> on.</summary>
    internal static string Render(string[] cells, int[] widths, int numericFrom) =>
        string.Join(" | ", cells.Select((cell, column) => column >= numericFrom ? cell.PadLeft(widths[column]) : cell.PadRight(widths[column])))
            .TrimEnd();
}
