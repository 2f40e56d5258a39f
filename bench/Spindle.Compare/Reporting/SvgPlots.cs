using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using ScottPlot;
using ScottPlot.AxisPanels;
using ScottPlot.Panels;
using ScottPlot.TickGenerators;
using SkiaSharp;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Reporting;

/// <summary>
/// SVG pictures of a report, drawn with ScottPlot: a bar chart of the ratios, and for every case that records a
/// series, thread count and pending items over time per pool.
/// </summary>
internal static class SvgPlots
{
    private static readonly Color[] s_poolColours = [Color.FromHex("#1f77b4"), Color.FromHex("#d62728"), Color.FromHex("#2ca02c"), Color.FromHex("#9467bd"), Color.FromHex("#ff7f0e")];
    private static readonly Color s_better = Color.FromHex("#2ca02c");
    private static readonly Color s_worse = Color.FromHex("#d62728");
    private static readonly CultureInfo s_culture = CultureInfo.InvariantCulture;

    /// <summary>Sans-serif families tried in turn; SkiaSharp's Linux build without fontconfig answers a serif one to the generic name.</summary>
    private static readonly string[] s_sansFamilies = ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"];

    /// <summary>Writes the pictures into <paramref name="directory"/>; returns their file names.</summary>
    public static List<string> Write(string directory, string prefix, IReadOnlyList<ReportRow> rows, IReadOnlyList<CaseResult> cases)
    {
        Directory.CreateDirectory(directory);
        var files = new List<string>();
        string ratios = $"{prefix}ratios.svg";
        RatioChart(Path.Combine(directory, ratios), rows, cases);
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
            SeriesChart(Path.Combine(directory, name), $"{result.Scenario.Id} / {result.Variant}", firstRuns);
            files.Add(name);
        }
        return files;
    }

    /// <summary>One horizontal bar per case (its headline metric), on a log scale around 1x.</summary>
    private static void RatioChart(string path, IReadOnlyList<ReportRow> rows, IReadOnlyList<CaseResult> cases)
    {
        var bars = new List<(string Label, double? Ratio, bool Failed)>();
        foreach (CaseResult result in cases)
        {
            ReportRow? row = rows.FirstOrDefault(r => r.Scenario == result.Scenario.Id && r.Variant == result.Variant && r.Metric.Name == result.Scenario.HeadlineMetric)
                ?? rows.FirstOrDefault(r => r.Scenario == result.Scenario.Id && r.Variant == result.Variant && !r.IsProcessMetric);
            if (row is not null)
            {
                bars.Add(($"{row.Scenario} / {row.Variant}: {row.Metric.Name}", row.Ratio, row.Pools.Any(p => p.Tally.AllFailed)));
            }
        }
        const double minRatio = 0.05;
        const double maxRatio = 1000;
        string subject = PoolKind.RatioSubject.DisplayName;
        string baseline = PoolKind.RatioBaseline.DisplayName;

        using var plot = new Plot();
        Style(plot);
        plot.Title($"{subject} vs {baseline}: ratio of each case's headline metric", 15);
        plot.XLabel($"ratio (> 1: {subject} is better; log scale)", 13);

        // Bars run from 1x (log 0) to the ratio, the first case at the top.
        var categories = new NumericManual();
        var drawn = new List<Bar>();
        for (int i = 0; i < bars.Count; i++)
        {
            (string label, double? ratio, bool failed) = bars[i];
            double position = bars.Count - 1 - i;
            categories.AddMajor(position, label);
            if (ratio is not { } r)
            {
                var na = plot.Add.Text(failed ? "failed" : "n/a", 0, position);
                na.LabelStyle.FontSize = 11;
                na.LabelStyle.Alignment = Alignment.MiddleLeft;
                na.OffsetX = 6;
                continue;
            }
            double end = Math.Log10(Math.Clamp(double.IsPositiveInfinity(r) ? maxRatio : r, minRatio, maxRatio));
            drawn.Add(new Bar
            {
                Position = position,
                ValueBase = 0,
                Value = end,
                Size = 0.75,
                FillColor = r >= 1 ? s_better : s_worse,
                LineWidth = 0,
                Label = double.IsPositiveInfinity(r) ? "inf" : r.ToString(r >= 10 ? "F0" : "F2", s_culture) + "x",
            });
        }
        if (drawn.Count > 0)
        {
            var barPlot = plot.Add.Bars(drawn);
            barPlot.Horizontal = true;
            barPlot.ValueLabelStyle.FontSize = 11;
        }
        plot.Add.VerticalLine(0, 1.5f, Colors.Black);

        var ratioTicks = new NumericManual();
        foreach (double tick in new[] { 0.1, 0.5, 1, 2, 5, 10, 100, 1000 })
        {
            ratioTicks.AddMajor(Math.Log10(tick), tick.ToString("0.#", s_culture) + "x");
        }
        plot.Axes.Bottom.TickGenerator = ratioTicks;
        plot.Axes.Left.TickGenerator = categories;
        plot.Axes.Left.TickLabelStyle.FontSize = 11;
        plot.Grid.YAxisStyle.MajorLineStyle.Width = 0;
        // Room beyond the clamped ends for the value labels of bars that reach them.
        plot.Axes.SetLimits(Math.Log10(minRatio) - 0.4, Math.Log10(maxRatio) + 0.35, -0.6, Math.Max(bars.Count, 1) - 0.4);

        plot.Legend.ManualItems.Add(new LegendItem { LabelText = $"{subject} better", FillColor = s_better });
        plot.Legend.ManualItems.Add(new LegendItem { LabelText = $"{baseline} better", FillColor = s_worse });
        LegendAbove(plot);

        plot.SaveSvg(path, 940, 150 + bars.Count * 26);
    }

    /// <summary>Threads (top panel) and pending items (bottom panel) against time on a log scale, one line per pool.</summary>
    private static void SeriesChart(string path, string title, Dictionary<PoolKind, List<double[]>> runs)
    {
        const double minMs = 1;
        double maxMs = Math.Max(runs.Values.Max(r => r.Max(s => s[0])), 10);
        const int width = 860;
        const int height = 620;

        using var threads = new Plot();
        using var pending = new Plot();
        threads.Title($"{title}: first run of each pool", 15);
        threads.YLabel("threads", 13);
        pending.YLabel("pending items", 13);
        pending.XLabel("time since the workload started (log scale)", 13);
        // The legend sits in its own band under the title, clear of the lines.
        LegendAbove(threads);
        pending.HideLegend();
        // Fixed margins, so that both panels have the same data area and their time axes line up.
        threads.Layout.Fixed(new PixelPadding(left: 80, right: 25, bottom: 30, top: 76));
        pending.Layout.Fixed(new PixelPadding(left: 80, right: 25, bottom: 55, top: 20));

        for (int panel = 0; panel < 2; panel++)
        {
            Plot plot = panel == 0 ? threads : pending;
            int column = panel == 0 ? 1 : 2;
            Style(plot);
            int colour = 0;
            foreach ((PoolKind pool, List<double[]> samples) in runs)
            {
                double[] xs = samples.Select(s => Math.Log10(Math.Max(s[0], minMs))).ToArray();
                double[] ys = samples.Select(s => s[column]).ToArray();
                var line = plot.Add.ScatterLine(xs, ys, s_poolColours[colour++ % s_poolColours.Length]);
                line.LineWidth = 1.6f;
                line.LegendText = pool.DisplayName;
            }
            plot.Axes.Bottom.TickGenerator = TimeTicks(minMs, maxMs);
            plot.Axes.Left.TickGenerator = new NumericAutomatic { IntegerTicksOnly = true, LabelFormatter = ReportRow.Format };
            // A little room below zero and right of the last sample, so that lines there stay clear of the frame.
            double maxY = Math.Max(1, runs.Values.Max(r => r.Max(s => s[column])));
            plot.Axes.SetLimits(Math.Log10(minMs), Math.Log10(maxMs) + 0.03, -0.03 * maxY, maxY * 1.05);
        }

        // One SVG document, the two panels stacked in it. A first render in memory settles each panel's layout, so
        // that the SVG canvas records each panel once (a plot's first render draws itself a second time otherwise).
        threads.RenderInMemory(width, height / 2);
        pending.RenderInMemory(width, height / 2);
        using FileStream file = File.Create(path);
        using (SKCanvas canvas = SKSvgCanvas.Create(new SKRect(0, 0, width, height), file))
        {
            // Each panel paints its own background; clearing the whole canvas (which an SVG canvas records as an
            // unfilled, so black, rectangle over everything drawn before) would hide the first panel.
            threads.RenderManager.ClearCanvasBeforeEachRender = false;
            pending.RenderManager.ClearCanvasBeforeEachRender = false;
            threads.Render(canvas, new PixelRect(left: 0, right: width, bottom: height / 2, top: 0));
            pending.Render(canvas, new PixelRect(left: 0, right: width, bottom: height, top: height / 2));
        }
    }

    /// <summary>Ticks at each power of ten of milliseconds (labelled), minor ticks between them.</summary>
    private static NumericManual TimeTicks(double minMs, double maxMs)
    {
        var ticks = new NumericManual();
        for (double decade = minMs; decade <= maxMs * 1.0001; decade *= 10)
        {
            ticks.AddMajor(Math.Log10(decade), decade >= 1000 ? $"{(decade / 1000).ToString("0.#", s_culture)} s" : $"{decade.ToString("0", s_culture)} ms");
            for (int step = 2; step <= 9 && decade * step <= maxMs; step++)
            {
                ticks.AddMinor(Math.Log10(decade * step));
            }
        }
        return ticks;
    }

    /// <summary>The legend in one row in a narrow band between the title and the frame.</summary>
    private static void LegendAbove(Plot plot)
    {
        LegendPanel panel = plot.ShowLegend(Edge.Top);
        panel.Padding = new PixelPadding(left: 0, right: 0, bottom: 6, top: 0);
        panel.Legend.Orientation = Orientation.Horizontal;
    }

    /// <summary>A sans-serif font, and no blank band for the unused top axis (the legend or title follows the frame).</summary>
    private static void Style(Plot plot)
    {
        if (plot.Axes.Top is AxisBase top)
        {
            top.SizeWhenNoData = 0;
        }
        string family = s_sansFamilies.FirstOrDefault(name => Fonts.GetTypeface(name, bold: false, italic: false)?.FamilyName == name) ?? Fonts.Sans;
        plot.Font.Set(family);
        plot.Legend.FontName = family;
    }
}
