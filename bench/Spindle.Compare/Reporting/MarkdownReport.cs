using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The report as Markdown (<c>--markdown FILE</c>): where and how it ran (with how many runs succeeded of those asked
/// for), the results table (medians, ratio and its interval, spreads, spread factors) with the rows whose subject
/// spread wider than the baseline listed under it, the runs that failed and why (<see cref="FailedRun"/>), the process
/// figures, variants compared run by run, and the peers that could not be measured.
/// </summary>
internal static class MarkdownReport
{
    public static void Write(string path, IReadOnlyList<ReportRow> rows, IReadOnlyList<PairedRow> pairs, MachineFacts facts, IReadOnlyList<string> unavailablePeers, IReadOnlyList<string> plots)
    {
        var text = new StringBuilder();
        text.AppendLine("# Spindle comparison results");
        text.AppendLine();
        text.AppendLine("| | |");
        text.AppendLine("| --- | --- |");
        text.AppendLine($"| machine | {facts.Machine} |");
        text.AppendLine($"| OS | {facts.Os} |");
        text.AppendLine($"| .NET | {facts.Dotnet} |");
        text.AppendLine($"| cores | {facts.Cores} |");
        text.AppendLine($"| date | {facts.DateText} |");
        text.AppendLine($"| mode | {facts.Mode} |");
        text.AppendLine($"| background load | {facts.LoadText} |");
        text.AppendLine($"| hypervisor steal | {facts.StealText} |");
        (List<FailedRun> failed, int asked) = ReportRow.Runs(rows);
        text.AppendLine($"| runs | {FailedRun.RunsLine(failed.Count, asked)} |");
        text.AppendLine();
        text.AppendLine($"Ratio: how many times better {PoolKind.RatioSubject.DisplayName} is than {PoolKind.RatioBaseline.DisplayName} on the medians "
            + "(> 1: Spindle wins). Spread: min .. max of the runs. Spread (x): " + SpreadSummary.Legend + " " + ConsoleTable.IntervalLegend);
        text.AppendLine();

        List<string> header = ConsoleTable.Header();
        AppendRow(text, header);
        AppendRow(text, header.Select((_, i) => i >= ConsoleTable.NumericFrom ? "---:" : "---"));
        foreach (ReportRow row in rows.Where(r => !r.IsProcessMetric))
        {
            AppendRow(text, ConsoleTable.Cells(row, showCase: true));
        }
        text.AppendLine();
        text.AppendLine(SpreadSummary.Line(rows));
        List<string> flagged = SpreadSummary.FlaggedRows(rows);
        if (flagged.Count > 0)
        {
            text.AppendLine();
            foreach (string line in flagged)
            {
                text.AppendLine($"- {line}");
            }
        }

        List<string> failedSection = FailedRun.MarkdownSection(failed, asked);
        if (failedSection.Count > 0)
        {
            text.AppendLine();
            foreach (string line in failedSection)
            {
                text.AppendLine(line);
            }
        }

        List<string[]> process = ProcessTable.Lines(rows);
        if (process.Count > 0)
        {
            text.AppendLine();
            text.AppendLine("## Process figures");
            text.AppendLine();
            text.AppendLine("The measured part of each run (after the warm-up), medians over the runs; alloc per item handled; host round"
                + " trip: a cache line passed between two CPUs and back right after the measured part, min .. max over the runs (on a"
                + " virtual machine the host may place the CPUs apart for seconds at a time, which slows every hand-off between threads).");
            text.AppendLine();
            AppendRow(text, ProcessTable.Header);
            AppendRow(text, ProcessTable.Header.Select((_, i) => i >= 3 ? "---:" : "---"));
            foreach (string[] line in process)
            {
                AppendRow(text, line);
            }
        }

        if (pairs.Count > 0)
        {
            text.AppendLine();
            text.AppendLine("## Variants against each other");
            text.AppendLine();
            text.AppendLine("The same pool, run by run: run i of each variant, measured seconds apart (> 1: the first variant does better).");
            text.AppendLine();
            AppendRow(text, PairedRow.Header);
            AppendRow(text, PairedRow.Header.Select((_, i) => i == 4 ? "---:" : "---"));
            foreach (PairedRow pair in pairs)
            {
                AppendRow(text, pair.Cells());
            }
        }

        if (unavailablePeers.Count > 0)
        {
            text.AppendLine();
            text.AppendLine("## Peers not measured");
            text.AppendLine();
            foreach (string peer in unavailablePeers)
            {
                text.AppendLine($"- {peer}");
            }
        }
        if (plots.Count > 0)
        {
            text.AppendLine();
            text.AppendLine("## Plots");
            text.AppendLine();
            foreach (string plot in plots)
            {
                text.AppendLine($"![{Path.GetFileNameWithoutExtension(plot)}]({plot})");
            }
        }
        File.WriteAllText(path, text.ToString());
    }

    private static void AppendRow(StringBuilder text, IEnumerable<string> cells) =>
        text.Append("| ").Append(string.Join(" | ", cells.Select(c => c.Replace("|", "\\|", System.StringComparison.Ordinal)))).AppendLine(" |");
}
