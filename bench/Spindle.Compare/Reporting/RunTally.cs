using System.Collections.Generic;
using System.Text.Json;

namespace Spindle.Compare.Reporting;

/// <summary>
/// How many of the runs asked for on one pool in one case produced figures. A figure from fewer runs than asked says
/// so beside it ("12.5 (2/3 runs)"), and a pool with no successful run reads "failed (0/3 runs)", not n/a, which
/// stays the mark of a metric the pool cannot produce. In the JSON every row has <c>runsAsked</c> and
/// <c>runsSucceeded</c>, an object each with one count per pool id; a report written before they existed has
/// neither, and reads as complete.
/// </summary>
internal readonly record struct RunTally(int Succeeded, int Asked)
{
    public const string AskedProperty = "runsAsked";

    public const string SucceededProperty = "runsSucceeded";

    /// <summary>Every run asked for produced figures (or none was asked for).</summary>
    public bool Complete => Succeeded >= Asked;

    /// <summary>Runs were asked for and none produced figures.</summary>
    public bool AllFailed => Asked > 0 && Succeeded == 0;

    /// <summary>
    /// <paramref name="figure"/> as a report cell: unchanged when <see cref="Complete"/>, "failed (0/N runs)" when
    /// <see cref="AllFailed"/>, else followed by "(S/N runs)".
    /// </summary>
    public string Annotate(string figure) =>
        Complete ? figure : AllFailed ? $"failed ({Counts})" : $"{figure} ({Counts})";

    /// <summary>"S/N runs".</summary>
    public string Counts => $"{Succeeded}/{Asked} runs";

    /// <summary>Writes <c>runsAsked</c> and <c>runsSucceeded</c>, each an object of counts by pool id, in the given order.</summary>
    public static void WriteJson(Utf8JsonWriter writer, IReadOnlyList<(string PoolId, RunTally Tally)> pools)
    {
        writer.WriteStartObject(AskedProperty);
        foreach ((string poolId, RunTally tally) in pools)
        {
            writer.WriteNumber(poolId, tally.Asked);
        }
        writer.WriteEndObject();
        writer.WriteStartObject(SucceededProperty);
        foreach ((string poolId, RunTally tally) in pools)
        {
            writer.WriteNumber(poolId, tally.Succeeded);
        }
        writer.WriteEndObject();
    }

    /// <summary>The tally of <paramref name="poolId"/> in a JSON report row; null where the row has none (an older report).</summary>
    public static RunTally? ReadJson(JsonElement row, string poolId) =>
        Count(row, AskedProperty, poolId) is { } asked && Count(row, SucceededProperty, poolId) is { } succeeded
            ? new RunTally(succeeded, asked)
            : null;

    private static int? Count(JsonElement row, string property, string poolId) =>
        row.TryGetProperty(property, out JsonElement counts) && counts.ValueKind == JsonValueKind.Object
        && counts.TryGetProperty(poolId, out JsonElement count) && count.TryGetInt32(out int value)
            ? value
            : null;
}
