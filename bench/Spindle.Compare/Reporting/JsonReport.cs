using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.Json;
using Spindle.Compare.Pools;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The report as JSON: an array with one object per (scenario, variant, metric) holding <c>scenario</c>,
/// <c>variant</c>, <c>metric</c>, <c>unit</c>, <c>better</c>, the median of every pool under the pool's id
/// (<c>spindle</c>, <c>builtin</c>, … or null when it has no successful run or cannot produce the metric), <c>ratio</c> (null when undefined or
/// infinite), <c>runs</c>: the raw figures as an array per pool id, <c>spread</c>: the spread factor
/// (<see cref="ReportRow.Spread"/>, max / min of the runs) per pool id (null with fewer than two runs, or infinite), and
/// <c>spreadWider</c> (<see cref="ReportRow.SpreadWider"/>; always false on the process figures), <c>baselineSpreadWider</c>
/// (<see cref="ReportRow.BaselineSpreadWider"/>, the same rule the other way round), <c>ratioInterval</c>
/// (<see cref="ReportRow.Interval"/>: <c>low</c>, <c>high</c> (null when infinite), its <c>confidence</c>, and
/// <c>finding</c>: <c>better</c>, <c>worse</c> or <c>undecided</c>; null where the runs allow no interval), <c>runsAsked</c> and
/// <c>runsSucceeded</c> (per pool id, the case's runs asked for and those that produced figures, <see cref="RunTally"/>) and
/// <c>failedRuns</c> (the case's runs that did not, <see cref="FailedRun"/>; empty when none). The first row of a case that records how the
/// pools evolve also has <c>series</c>: per pool id, one array per run of [ms, threads, pending] samples. Written with <see cref="Utf8JsonWriter"/>, so
/// the pool keys follow the pool list and no reflection is involved.
/// </summary>
internal static class JsonReport
{
    public static void Write(string path, IReadOnlyList<ReportRow> rows)
    {
        using FileStream stream = File.Create(path);
        using var writer = new Utf8JsonWriter(stream, new JsonWriterOptions { Indented = true });
        writer.WriteStartArray();
        foreach (ReportRow row in rows)
        {
            writer.WriteStartObject();
            writer.WriteString("scenario", row.Scenario);
            writer.WriteString("variant", row.Variant);
            writer.WriteString("metric", row.Metric.Name);
            writer.WriteString("unit", row.Metric.Unit);
            writer.WriteString("better", row.Metric.Better == Better.Lower ? "lower" : "higher");
            foreach (PoolFigures pool in row.Pools)
            {
                WriteNumberOrNull(writer, pool.Pool.Id, pool.Median);
            }
            double? ratio = row.Ratio;
            WriteNumberOrNull(writer, "ratio", ratio is { } r && double.IsFinite(r) ? r : null);
            writer.WriteStartObject("runs");
            foreach (PoolFigures pool in row.Pools)
            {
                writer.WriteStartArray(pool.Pool.Id);
                foreach (double value in pool.Runs)
                {
                    writer.WriteNumberValue(value);
                }
                writer.WriteEndArray();
            }
            writer.WriteEndObject();
            // After the fields other tools read, which stay as they were.
            writer.WriteStartObject("spread");
            foreach (PoolFigures pool in row.Pools)
            {
                double? spread = row.Spread(pool.Pool);
                WriteNumberOrNull(writer, pool.Pool.Id, spread is { } f && double.IsFinite(f) ? f : null);
            }
            writer.WriteEndObject();
            writer.WriteBoolean("spreadWider", row.SpreadWider);
            writer.WriteBoolean("baselineSpreadWider", row.BaselineSpreadWider);
            if (row.Interval is { } interval)
            {
                writer.WriteStartObject("ratioInterval");
                WriteNumberOrNull(writer, "low", double.IsFinite(interval.Low) ? interval.Low : null);
                WriteNumberOrNull(writer, "high", double.IsFinite(interval.High) ? interval.High : null);
                writer.WriteNumber("confidence", interval.Confidence);
                writer.WriteString("finding", interval.Better ? "better" : interval.Worse ? "worse" : "undecided");
                writer.WriteEndObject();
            }
            else
            {
                writer.WriteNull("ratioInterval");
            }
            RunTally.WriteJson(writer, row.Pools.Select(pool => (pool.Pool.Id, pool.Tally)).ToList());
            FailedRun.WriteJson(writer, row.FailedRuns);
            if (row.Series is { } series)
            {
                // "series": { pool id: [ run: [ [ms, threads, pending], ... ], ... ] }
                writer.WriteStartObject("series");
                foreach ((PoolKind pool, List<List<double[]>> runs) in series)
                {
                    writer.WriteStartArray(pool.Id);
                    foreach (List<double[]> run in runs)
                    {
                        writer.WriteStartArray();
                        foreach (double[] sample in run)
                        {
                            writer.WriteStartArray();
                            foreach (double value in sample)
                            {
                                writer.WriteNumberValue(Math.Round(value, 3));
                            }
                            writer.WriteEndArray();
                        }
                        writer.WriteEndArray();
                    }
                    writer.WriteEndArray();
                }
                writer.WriteEndObject();
            }
            writer.WriteEndObject();
        }
        writer.WriteEndArray();
        writer.Flush();
        stream.WriteByte((byte)'\n');
    }

    private static void WriteNumberOrNull(Utf8JsonWriter writer, string name, double? value)
    {
        if (value is { } number)
        {
            writer.WriteNumber(name, number);
        }
        else
        {
            writer.WriteNull(name);
        }
    }
}
