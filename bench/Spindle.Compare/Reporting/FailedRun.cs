using System;
using System.Collections.Generic;
using System.Linq;
using System.Text.Json;
using Spindle.Compare.Infrastructure;

namespace Spindle.Compare.Reporting;

/// <summary>
/// One child run that produced no figures, as the written reports list it: the case, the pool, which of its runs
/// (1-based, in run order) and why (<see cref="Runner.ChildOutcome.Failure"/>: a timeout, an exit code with the end of
/// the child's stderr, or the error the child reported, its lines joined by " | "). In the JSON each row carries the
/// failed runs of its case as <c>failedRuns</c>, an array (empty when none failed) of objects with <c>pool</c> (its
/// id), <c>run</c> and <c>reason</c> (whole); the Markdown report lists them in a section of their own, each with the
/// reason's first line.
/// </summary>
internal sealed record FailedRun(string Scenario, string Variant, string PoolId, string PoolName, int Run, string Reason)
{
    public const string JsonProperty = "failedRuns";

    /// <summary>The longest <see cref="Summary"/>, in characters, "…" included.</summary>
    internal const int SummaryLength = 200;

    /// <summary>The title of the Markdown report's section.</summary>
    public const string SectionTitle = "## Failed runs";

    /// <summary>The first line of <see cref="Reason"/>, cut to <see cref="SummaryLength"/> characters.</summary>
    public string Summary
    {
        get
        {
            string first = Reason.Split('\n')[0];
            int joined = first.IndexOf(" | ", StringComparison.Ordinal);
            first = (joined < 0 ? first : first[..joined]).Trim();
            return first.Length <= SummaryLength ? first : first[..(SummaryLength - 1)].TrimEnd() + "…";
        }
    }

    /// <summary>Writes <c>failedRuns</c>: an array of <c>{ pool, run, reason }</c>, empty when <paramref name="failed"/> is.</summary>
    public static void WriteJson(Utf8JsonWriter writer, IEnumerable<FailedRun> failed)
    {
        writer.WriteStartArray(JsonProperty);
        foreach (FailedRun run in failed)
        {
            writer.WriteStartObject();
            writer.WriteString("pool", run.PoolId);
            writer.WriteNumber("run", run.Run);
            writer.WriteString("reason", run.Reason);
            writer.WriteEndObject();
        }
        writer.WriteEndArray();
    }

    /// <summary>
    /// The Markdown report's section on <paramref name="failed"/>, out of <paramref name="asked"/> runs in all: a title,
    /// what the figures rest on, and a table of scenario, variant, pool, run and reason; no lines when none failed.
    /// </summary>
    public static List<string> MarkdownSection(IReadOnlyList<FailedRun> failed, int asked)
    {
        if (failed.Count == 0)
        {
            return [];
        }
        var lines = new List<string>
        {
            SectionTitle,
            "",
            $"{failed.Count} of {asked} runs produced no figures. The figures of their cases come from the runs that "
                + "succeeded, marked \"(S/N runs)\"; where a pool had no successful run its cells read \"failed (0/N runs)\".",
            "",
            "| scenario | variant | pool | run | reason |",
            "| --- | --- | --- | ---: | --- |",
        };
        foreach (FailedRun run in failed)
        {
            lines.Add("| " + string.Join(" | ", new[] { run.Scenario, run.Variant, run.PoolName, run.Run.ToString(Formats.Culture), run.Summary }
                .Select(cell => cell.Replace("|", "\\|", StringComparison.Ordinal))) + " |");
        }
        return lines;
    }

    /// <summary>"N runs, all succeeded" or "S of N runs succeeded (F failed: see Failed runs)", for the report's header.</summary>
    public static string RunsLine(int failed, int asked) => failed == 0
        ? $"{asked} runs, all succeeded"
        : $"{asked - failed} of {asked} runs succeeded ({failed} failed: see Failed runs)";
}
