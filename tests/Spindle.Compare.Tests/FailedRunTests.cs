using System.Collections.Generic;
using System.Linq;
using System.Text.Json;
using Spindle.Compare.Reporting;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>How the written reports list the runs that produced no figures (FailedRun): the JSON field and the Markdown section.</summary>
public sealed class FailedRunTests
{
    private static readonly FailedRun s_timedOut =
        new("blocking-burst", "task-wait", "builtin", "built-in", 2, "timed out after 120 s (child killed)");

    private static readonly FailedRun s_threw =
        new("timers", "fire", "spindle", "Spindle", 1,
            "System.InvalidOperationException: A work item threw. | at Spindle.Compare.Runner.ChildHost.Run(ReadOnlySpan`1 args) | at Program.Main");

    private static readonly FailedRun s_exited =
        new("idle-cpu", "1ms", "spindle", "Spindle", 3, "exit code 134, no result line on stdout; stderr: Fatal error. | at X");

    [Fact]
    public void Summary_IsTheReasonsFirstLine()
    {
        Assert.Equal("timed out after 120 s (child killed)", s_timedOut.Summary);
        Assert.Equal("System.InvalidOperationException: A work item threw.", s_threw.Summary);
        Assert.Equal("exit code 134, no result line on stdout; stderr: Fatal error.", s_exited.Summary);
        Assert.Equal("first", (s_timedOut with { Reason = "first\nsecond" }).Summary);
    }

    [Fact]
    public void Summary_OfALongReason_IsCut()
    {
        string summary = (s_timedOut with { Reason = new string('x', 1_000) }).Summary;

        Assert.Equal(FailedRun.SummaryLength, summary.Length);
        Assert.EndsWith("…", summary, System.StringComparison.Ordinal);
    }

    [Fact]
    public void MarkdownSection_ListsEveryFailedRun_WithItsPoolRunAndReason()
    {
        List<string> lines = FailedRun.MarkdownSection([s_timedOut, s_threw], asked: 40);

        Assert.Equal(FailedRun.SectionTitle, lines[0]);
        Assert.Contains(lines, line => line.StartsWith("2 of 40 runs produced no figures.", System.StringComparison.Ordinal));
        Assert.Contains("| blocking-burst | task-wait | built-in | 2 | timed out after 120 s (child killed) |", lines);
        Assert.Contains("| timers | fire | Spindle | 1 | System.InvalidOperationException: A work item threw. |", lines);
        // The header, its rule and one line per failed run.
        Assert.Equal(4, lines.Count(line => line.StartsWith('|')));
    }

    [Fact]
    public void MarkdownSection_EscapesTheTablesSeparator()
    {
        List<string> lines = FailedRun.MarkdownSection([s_timedOut with { Reason = "a|b" }], asked: 4);

        Assert.Contains("| blocking-burst | task-wait | built-in | 2 | a\\|b |", lines);
    }

    [Fact]
    public void MarkdownSection_WithoutFailedRuns_IsEmpty() =>
        Assert.Empty(FailedRun.MarkdownSection([], asked: 40));

    [Theory]
    [InlineData(0, 40, "40 runs, all succeeded")]
    [InlineData(3, 40, "37 of 40 runs succeeded (3 failed: see Failed runs)")]
    public void RunsLine_SaysHowManyRunsSucceeded(int failed, int asked, string expected) =>
        Assert.Equal(expected, FailedRun.RunsLine(failed, asked));

    [Fact]
    public void WriteJson_KeepsTheWholeReason()
    {
        using JsonDocument row = RunTallyTests.Row(writer => FailedRun.WriteJson(writer, [s_timedOut, s_threw]));

        JsonElement[] failed = row.RootElement.GetProperty("failedRuns").EnumerateArray().ToArray();
        Assert.Equal(2, failed.Length);
        Assert.Equal("builtin", failed[0].GetProperty("pool").GetString());
        Assert.Equal(2, failed[0].GetProperty("run").GetInt32());
        Assert.Equal("timed out after 120 s (child killed)", failed[0].GetProperty("reason").GetString());
        Assert.Equal(s_threw.Reason, failed[1].GetProperty("reason").GetString());
    }

    [Fact]
    public void WriteJson_WithoutFailedRuns_WritesAnEmptyArray()
    {
        using JsonDocument row = RunTallyTests.Row(writer => FailedRun.WriteJson(writer, []));

        Assert.Equal(0, row.RootElement.GetProperty("failedRuns").GetArrayLength());
    }
}
