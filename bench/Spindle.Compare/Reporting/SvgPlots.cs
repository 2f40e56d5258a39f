using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Text;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Reporting;

/// <summary>
/// Plain SVG pictures of a report (no plotting package restores on the machines this runs on): a bar chart of the
/// ratios, and for every case that records a series, thread count and pending items over time per pool.
/// </summary>
internal static class SvgPlots
{
    private static readonly string[] s_poolColours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];
    private static readonly CultureInfo s_culture = CultureInfo.InvariantCulture;

    /// <summary>Writes the pictures into <paramref name="directory"/>; returns their file names.</summary>
    public static List<string> Write(string directory, string prefix, IReadOnlyList<ReportRow> rows, IReadOnlyList<CaseResult> cases)
    {
        Directory.CreateDirectory(directory);
        var files = new List<string>();
        string ratios = $"{prefix}ratios.svg";
        File.WriteAllText(Path.Combine(directory, ratios), RatioChart(rows, cases));
        files.Add(ratios);
        foreach (CaseResult result in cases)
        {
            Dictionary<PoolKind, List<double[]>> firstRuns = PoolKind.All
                .Select(pool => (pool, runs: result.Series(pool)))
                .Where(p => p.runs.Count > 0 && p.runs[0].Count > 0)
                .ToDictionary(p => p.pool, p => p.runs[0]);
            if (firstRuns.Count == 0)
            {
                continue;
            }
            string name = $"{prefix}series-{result.Scenario.Id}-{result.Variant}.svg";
            File.WriteAllText(Path.Combine(directory, name), SeriesChart($"{result.Scenario.Id} / {result.Variant}", firstRuns));
            files.Add(name);
        }
        return files;
    }

    /// <summary>One horizontal bar per case (its headline metric), on a log scale around 1x.</summary>
    private static string RatioChart(IReadOnlyList<ReportRow> rows, IReadOnlyList<CaseResult> cases)
    {
        var bars = new List<(string Label, double? Ratio)>();
        foreach (CaseResult result in cases)
        {
            ReportRow? row = rows.FirstOrDefault(r => r.Scenario == result.Scenario.Id && r.Variant == result.Variant && r.Metric.Name == result.Scenario.HeadlineMetric)
                ?? rows.FirstOrDefault(r => r.Scenario == result.Scenario.Id && r.Variant == result.Variant && !r.IsProcessMetric);
            if (row is not null)
            {
                bars.Add(($"{row.Scenario} / {row.Variant}: {row.Metric.Name}", row.Ratio));
            }
        }
        const double minRatio = 0.05;
        const double maxRatio = 1000;
        const int labelWidth = 330;
        const int plotWidth = 520;
        const int barHeight = 18;
        const int top = 50;
        int height = top + bars.Count * (barHeight + 6) + 50;
        int width = labelWidth + plotWidth + 80;
        double X(double ratio) => labelWidth + plotWidth * (Math.Log10(Math.Clamp(ratio, minRatio, maxRatio)) - Math.Log10(minRatio)) / (Math.Log10(maxRatio) - Math.Log10(minRatio));

        var svg = Begin(width, height);
        Text(svg, 10, 22, $"{PoolKind.RatioSubject.DisplayName} vs {PoolKind.RatioBaseline.DisplayName}: ratio of each case's headline metric (> 1: {PoolKind.RatioSubject.DisplayName} is better; log scale)", 14, "start", bold: true);
        foreach (double tick in new[] { 0.1, 0.5, 1, 2, 5, 10, 100, 1000 })
        {
            double x = X(tick);
            svg.Append(CultureInfo.InvariantCulture, $"<line x1=\"{x:F1}\" y1=\"{top - 8}\" x2=\"{x:F1}\" y2=\"{height - 40}\" stroke=\"{(tick == 1 ? "#000" : "#ddd")}\" stroke-width=\"{(tick == 1 ? 1.5 : 1)}\"/>");
            Text(svg, x, height - 24, tick.ToString("0.#", s_culture) + "x", 11, "middle");
        }
        for (int i = 0; i < bars.Count; i++)
        {
            (string label, double? ratio) = bars[i];
            double y = top + i * (barHeight + 6);
            Text(svg, labelWidth - 8, y + barHeight - 5, label, 11, "end");
            if (ratio is not { } r)
            {
                Text(svg, X(1) + 6, y + barHeight - 5, "n/a", 11, "start");
                continue;
            }
            double x0 = X(1);
            double x1 = double.IsPositiveInfinity(r) ? labelWidth + plotWidth : X(r);
            string colour = r >= 1 ? "#2ca02c" : "#d62728";
            svg.Append(CultureInfo.InvariantCulture, $"<rect x=\"{Math.Min(x0, x1):F1}\" y=\"{y:F1}\" width=\"{Math.Max(Math.Abs(x1 - x0), 1):F1}\" height=\"{barHeight}\" fill=\"{colour}\"/>");
            string text = double.IsPositiveInfinity(r) ? "inf" : r.ToString(r >= 10 ? "F0" : "F2", s_culture) + "x";
            Text(svg, r >= 1 ? x1 + 4 : x1 - 4, y + barHeight - 5, text, 11, r >= 1 ? "start" : "end");
        }
        return End(svg);
    }

    /// <summary>Threads (top panel) and pending items (bottom panel) against time, log-scaled, one line per pool.</summary>
    private static string SeriesChart(string title, Dictionary<PoolKind, List<double[]>> runs)
    {
        const int width = 820;
        const int panelHeight = 220;
        const int left = 70;
        const int plotWidth = 700;
        const int top = 72;
        int height = top + 2 * panelHeight + 50 + 30;
        double maxMs = runs.Values.Max(r => r.Max(s => s[0]));
        double minMs = 1;
        maxMs = Math.Max(maxMs, 10);
        double X(double ms) => left + plotWidth * (Math.Log10(Math.Max(ms, minMs)) - Math.Log10(minMs)) / (Math.Log10(maxMs) - Math.Log10(minMs));

        var svg = Begin(width, height);
        Text(svg, 10, 22, $"{title}: first run of each pool (time since the workload started, log scale)", 14, "start", bold: true);
        int legendX = left;
        int colour = 0;
        foreach (PoolKind pool in runs.Keys)
        {
            svg.Append(CultureInfo.InvariantCulture, $"<rect x=\"{legendX}\" y=\"36\" width=\"14\" height=\"4\" fill=\"{s_poolColours[colour++ % s_poolColours.Length]}\"/>");
            Text(svg, legendX + 18, 42, pool.DisplayName, 12, "start");
            legendX += 120;
        }
        for (int panel = 0; panel < 2; panel++)
        {
            int column = panel == 0 ? 1 : 2;
            double panelTop = top + panel * (panelHeight + 50);
            double maxY = Math.Max(1, runs.Values.Max(r => r.Max(s => s[column])));
            double Y(double value) => panelTop + panelHeight - panelHeight * value / maxY;
            Text(svg, 10, panelTop - 6, panel == 0 ? "threads" : "pending items", 12, "start", bold: true);
            svg.Append(CultureInfo.InvariantCulture, $"<rect x=\"{left}\" y=\"{panelTop:F1}\" width=\"{plotWidth}\" height=\"{panelHeight}\" fill=\"none\" stroke=\"#999\"/>");
            foreach (double fraction in new[] { 0, 0.5, 1 })
            {
                double value = maxY * fraction;
                Text(svg, left - 6, Y(value) + 4, ReportRow.Format(Math.Round(value)), 11, "end");
            }
            for (double ms = 1; ms <= maxMs * 1.0001; ms *= 10)
            {
                double x = X(ms);
                svg.Append(CultureInfo.InvariantCulture, $"<line x1=\"{x:F1}\" y1=\"{panelTop:F1}\" x2=\"{x:F1}\" y2=\"{panelTop + panelHeight:F1}\" stroke=\"#eee\"/>");
                Text(svg, x, panelTop + panelHeight + 14, ms >= 1000 ? $"{ms / 1000:0.#} s" : $"{ms:0} ms", 11, "middle");
            }
            colour = 0;
            foreach ((PoolKind _, List<double[]> samples) in runs)
            {
                var points = new StringBuilder();
                foreach (double[] sample in samples)
                {
                    points.Append(CultureInfo.InvariantCulture, $"{X(sample[0]):F1},{Y(sample[column]):F1} ");
                }
                svg.Append(CultureInfo.InvariantCulture, $"<polyline fill=\"none\" stroke=\"{s_poolColours[colour++ % s_poolColours.Length]}\" stroke-width=\"1.6\" points=\"{points.ToString().TrimEnd()}\"/>");
            }
        }
        return End(svg);
    }

    private static StringBuilder Begin(int width, int height)
    {
        var svg = new StringBuilder();
        svg.Append(CultureInfo.InvariantCulture, $"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\">");
        svg.Append(CultureInfo.InvariantCulture, $"<rect width=\"{width}\" height=\"{height}\" fill=\"#fff\"/>");
        return svg;
    }

    private static string End(StringBuilder svg) => svg.Append("</svg>\n").ToString();

    private static void Text(StringBuilder svg, double x, double y, string text, int size, string anchor, bool bold = false) =>
        svg.Append(CultureInfo.InvariantCulture, $"<text x=\"{x:F1}\" y=\"{y:F1}\" font-size=\"{size}\" text-anchor=\"{anchor}\"{(bold ? " font-weight=\"bold\"" : "")}>{Escape(text)}</text>");

    private static string Escape(string text) =>
        text.Replace("&", "&amp;", StringComparison.Ordinal).Replace("<", "&lt;", StringComparison.Ordinal).Replace(">", "&gt;", StringComparison.Ordinal);
}
