using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The process figures of every case (<see cref="ProcessMeter"/>), one line per case and pool: medians over the runs
/// of the measured part's wall time, CPU time, peak thread count, allocation per item, collections, methods compiled,
/// context switches (voluntary, and preemptions), the threads' time waiting for a core and their moves between CPUs
/// (<see cref="ThreadSchedule"/>), for Spindle its workers' parks and steals and the threads it started,
/// the hypervisor's steal of the machine's CPU time over the measured part, and the range over the runs of the
/// machine's cache-line round trip between two CPUs right after it (<see cref="HostRoundTrip"/>) and of its CPUs' speed
/// (<see cref="HostCompute"/>). The wall-time cell
/// counts the runs where fewer succeeded than were asked for (<see cref="RunTally.Annotate"/>).
/// </summary>
internal static class ProcessTable
{
    private const int NumericFrom = 3;

    public static readonly string[] Header =
        ["scenario", "variant", "pool", "wall (ms)", "cpu (ms)", "cpu/wall", "peak threads", "alloc (B/item)", "gen0", "gen1", "gen2", "jit",
         "switches", "preemptions", "runq wait (ms)", "migrations", "parks", "steals", "threads added", "host steal (%)",
         "host round trip (ns)", "host compute (ns/1k steps)"];

    /// <summary>The table's cells, one array per line.</summary>
    public static List<string[]> Lines(IReadOnlyList<ReportRow> rows)
    {
        var lines = new List<string[]>();
        foreach (IGrouping<(string Scenario, string Variant), ReportRow> caseRows in rows.Where(r => r.IsProcessMetric).GroupBy(r => (r.Scenario, r.Variant)))
        {
            Dictionary<string, ReportRow> byMetric = caseRows.ToDictionary(r => r.Metric.Name);
            bool first = true;
            foreach (PoolKind pool in PoolKind.All)
            {
                string Cell(int metric) =>
                    byMetric.TryGetValue(ProcessMeter.Metrics[metric].Name, out ReportRow? row) && row.For(pool).Median is { } value
                        ? ReportRow.Format(value)
                        : "n/a";
                // The host's figure as the runs' range, not their median: a case whose runs met the host in two states
                // (see HostRoundTrip) shows both.
                string Range(int metric) =>
                    byMetric.TryGetValue(ProcessMeter.Metrics[metric].Name, out ReportRow? row) && row.For(pool) is { Min: { } min, Max: { } max }
                        ? min == max ? ReportRow.Format(min) : ReportRow.FormatRange(min, max)
                        : "n/a";
                PoolFigures wallFigures = byMetric[ProcessMeter.Metrics[0].Name].For(pool);
                double? wall = wallFigures.Median;
                double? cpu = byMetric[ProcessMeter.Metrics[1].Name].For(pool).Median;
                lines.Add(
                [
                    first ? caseRows.Key.Scenario : "",
                    first ? caseRows.Key.Variant : "",
                    pool.DisplayName,
                    wallFigures.Tally.Annotate(Cell(0)),
                    Cell(1),
                    wall is > 0 && cpu is { } c ? (c / wall.Value).ToString("F2", Formats.Culture) : "n/a",
                    Cell(2),
                    Cell(3),
                    Cell(4),
                    Cell(5),
                    Cell(6),
                    Cell(7),
                    Cell(8),
                    Cell(9),
                    Cell(10),
                    Cell(11),
                    Cell(12),
                    Cell(13),
                    Cell(14),
                    Cell(15),
                    Range(16),
                    Range(17),
                ]);
                first = false;
            }
        }
        return lines;
    }

    public static void Write(TextWriter writer, IReadOnlyList<ReportRow> rows)
    {
        List<string[]> lines = Lines(rows);
        if (lines.Count == 0)
        {
            return;
        }
        int[] widths = Header.Select((h, column) => Math.Max(h.Length, lines.Max(line => line[column].Length))).ToArray();
        writer.WriteLine("Process figures of the measured part of each run (after the warm-up; medians over the runs; alloc per item"
            + " handled, or in total where a scenario counts no items; jit: methods compiled, tier-ups included; host round trip:"
            + " a cache line passed between two CPUs and back right after the measured part; host compute: 1,000 steps of four independent"
            + " integer sequences on the slower of two CPUs after that; both min .. max over the runs):");
        writer.WriteLine(ConsoleTable.Render(Header, widths, NumericFrom));
        writer.WriteLine(string.Join("-+-", widths.Select(width => new string('-', width))));
        foreach (string[] line in lines)
        {
            writer.WriteLine(ConsoleTable.Render(line, widths, NumericFrom));
        }
    }
}
