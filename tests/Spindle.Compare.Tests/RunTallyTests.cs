using System.IO;
using System.Text.Json;
using Spindle.Compare.Reporting;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>How a report cell and the JSON say that a pool's figures come from fewer runs than were asked for (RunTally).</summary>
public sealed class RunTallyTests
{
    [Theory]
    [InlineData(3, 3, "12.5")]                    // every run succeeded: the figure alone
    [InlineData(0, 0, "12.5")]                    // nothing asked for
    [InlineData(2, 3, "12.5 (2/3 runs)")]         // a figure from fewer runs says so
    [InlineData(1, 7, "12.5 (1/7 runs)")]
    [InlineData(0, 3, "failed (0/3 runs)")]       // no successful run: failed, not the figure or n/a
    public void Annotate_CountsTheRunsOnlyWhereSomeFailed(int succeeded, int asked, string expected) =>
        Assert.Equal(expected, new RunTally(succeeded, asked).Annotate("12.5"));

    [Fact]
    public void Annotate_ReadsFailedRatherThanNotAvailable_WhenNoRunSucceeded()
    {
        Assert.Equal("failed (0/2 runs)", new RunTally(0, 2).Annotate("n/a"));
        // A metric the pool cannot produce, with every run successful, stays n/a.
        Assert.Equal("n/a", new RunTally(2, 2).Annotate("n/a"));
    }

    [Fact]
    public void WriteJson_ThenReadJson_GivesEveryPoolsCounts()
    {
        using JsonDocument row = Row(writer => RunTally.WriteJson(writer, [("spindle", new RunTally(3, 3)), ("builtin", new RunTally(1, 3))]));

        Assert.Equal(3, row.RootElement.GetProperty("runsAsked").GetProperty("builtin").GetInt32());
        Assert.Equal(1, row.RootElement.GetProperty("runsSucceeded").GetProperty("builtin").GetInt32());
        Assert.Equal(new RunTally(3, 3), RunTally.ReadJson(row.RootElement, "spindle"));
        Assert.Equal(new RunTally(1, 3), RunTally.ReadJson(row.RootElement, "builtin"));
        Assert.Null(RunTally.ReadJson(row.RootElement, "peer"));
    }

    [Fact]
    public void ReadJson_OfARowWrittenBeforeTheCountsExisted_IsNull()
    {
        using JsonDocument row = JsonDocument.Parse("""{ "scenario": "timers", "spindle": 1.5, "builtin": 2, "ratio": 1.33 }""");

        Assert.Null(RunTally.ReadJson(row.RootElement, "spindle"));
    }

    /// <summary>One JSON object holding what <paramref name="write"/> writes into it.</summary>
    internal static JsonDocument Row(System.Action<Utf8JsonWriter> write)
    {
        using var stream = new MemoryStream();
        using (var writer = new Utf8JsonWriter(stream))
        {
            writer.WriteStartObject();
            write(writer);
            writer.WriteEndObject();
        }
        return JsonDocument.Parse(stream.ToArray());
    }
}
