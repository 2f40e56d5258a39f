using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using System.Text.Json;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The headline table: one Markdown row per case (scenario, variant) with its scenario's headline metric, read from a
/// report's JSON (<see cref="JsonReport"/>). The comparison program writes it beside the JSON (<c>headline.md</c>), and
/// <c>--headline-from FILE</c> prints it for a report already written: the README's results table is this output,
/// which the docs tests hold it to. A pool's figure from fewer runs than were asked for says so ("(2/3 runs)", or
/// "failed (0/3 runs)"), where the report has the counts.
/// </summary>
internal static class HeadlineTable
{
    public const string FileName = "headline.md";

    /// <summary>The table of the report at <paramref name="jsonPath"/>, one line per row, header included.</summary>
    public static string FromJson(string jsonPath)
    {
        using JsonDocument report = JsonDocument.Parse(File.ReadAllBytes(jsonPath));
        var text = new StringBuilder();
        text.Append("| scenario | variant | headline metric | Spindle | built-in | ratio |\n");
        text.Append("| --- | --- | --- | ---: | ---: | ---: |\n");
        var seen = new HashSet<(string, string)>();
        foreach (JsonElement row in report.RootElement.EnumerateArray())
        {
            string scenario = row.GetProperty("scenario").GetString()!;
            string variant = row.GetProperty("variant").GetString()!;
            string metric = row.GetProperty("metric").GetString()!;
            if (ScenarioCatalog.Find(scenario)?.HeadlineMetric != metric || !seen.Add((scenario, variant)))
            {
                continue;
            }
            text.Append($"| {scenario} | {variant} | {metric} ({row.GetProperty("unit").GetString()}, {row.GetProperty("better").GetString()} is better) "
                + $"| {Number(row, "spindle")} | {Number(row, "builtin")} | {Ratio(row)} |\n");
        }
        return text.ToString();
    }

    /// <summary>Writes the table of the report at <paramref name="jsonPath"/> to <paramref name="path"/>.</summary>
    public static void Write(string path, string jsonPath) => File.WriteAllText(path, FromJson(jsonPath));

    /// <summary>The pool's median, followed by its runs where fewer succeeded than were asked for (<see cref="RunTally.Annotate"/>).</summary>
    private static string Number(JsonElement row, string pool)
    {
        string figure = row.TryGetProperty(pool, out JsonElement value) && value.ValueKind == JsonValueKind.Number ? ReportRow.Format(value.GetDouble()) : "n/a";
        return RunTally.ReadJson(row, pool) is { } tally ? tally.Annotate(figure) : figure;
    }

    private static string Ratio(JsonElement row) =>
        ConsoleTable.FormatRatio(row.TryGetProperty("ratio", out JsonElement value) && value.ValueKind == JsonValueKind.Number ? value.GetDouble() : null);
}
