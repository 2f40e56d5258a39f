using System;
using System.Collections.Generic;
using System.Diagnostics.CodeAnalysis;
using System.Globalization;
using System.IO;
using System.Linq;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare;

/// <summary>The public command line (the hidden child arguments are handled by <see cref="Runner.ChildHost"/>).</summary>
internal sealed class CommandLine
{
    public List<string> Scenarios { get; } = [];

    public bool Full { get; private set; }

    public int? Runs { get; private set; }

    public string? JsonPath { get; private set; }

    public string? MarkdownPath { get; private set; }

    public string? OutputDirectory { get; private set; }

    public TimeSpan Timeout { get; private set; } = TimeSpan.FromSeconds(120);

    public bool List { get; private set; }

    public bool Help { get; private set; }

    public static bool TryParse(string[] args, [NotNullWhen(true)] out CommandLine? options, [NotNullWhen(false)] out string? error)
    {
        var parsed = new CommandLine();
        options = null;
        for (int i = 0; i < args.Length; i++)
        {
            string arg = args[i];
            switch (arg)
            {
                case "--scenario":
                case "-s":
                    if (!TryValue(args, ref i, out string? ids, out error))
                    {
                        return false;
                    }
                    foreach (string id in ids.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
                    {
                        if (ScenarioCatalog.Find(id) is null)
                        {
                            error = $"Unknown scenario '{id}'. Known: {string.Join(", ", ScenarioCatalog.All.Select(s => s.Id))}.";
                            return false;
                        }
                        parsed.Scenarios.Add(id);
                    }
                    break;
                case "--full":
                    parsed.Full = true;
                    break;
                case "--runs":
                    if (!TryValue(args, ref i, out string? runs, out error))
                    {
                        return false;
                    }
                    if (!int.TryParse(runs, NumberStyles.None, CultureInfo.InvariantCulture, out int count) || count < 1)
                    {
                        error = $"--runs needs a positive integer, not '{runs}'.";
                        return false;
                    }
                    parsed.Runs = count;
                    break;
                case "--timeout":
                    if (!TryValue(args, ref i, out string? seconds, out error))
                    {
                        return false;
                    }
                    if (!int.TryParse(seconds, NumberStyles.None, CultureInfo.InvariantCulture, out int timeout) || timeout < 1)
                    {
                        error = $"--timeout needs a positive number of seconds, not '{seconds}'.";
                        return false;
                    }
                    parsed.Timeout = TimeSpan.FromSeconds(timeout);
                    break;
                case "--json":
                    if (!TryValue(args, ref i, out string? path, out error))
                    {
                        return false;
                    }
                    parsed.JsonPath = path;
                    break;
                case "--markdown":
                    if (!TryValue(args, ref i, out string? markdown, out error))
                    {
                        return false;
                    }
                    parsed.MarkdownPath = markdown;
                    break;
                case "--out":
                    if (!TryValue(args, ref i, out string? directory, out error))
                    {
                        return false;
                    }
                    parsed.OutputDirectory = directory;
                    break;
                case "--list":
                    parsed.List = true;
                    break;
                case "--help":
                case "-h":
                case "-?":
                    parsed.Help = true;
                    break;
                default:
                    error = $"Unknown argument '{arg}'.";
                    return false;
            }
        }
        options = parsed;
        error = null;
        return true;
    }

    public static void WriteUsage(TextWriter writer)
    {
        writer.WriteLine("Usage: dotnet run -c Release --project bench/Spindle.Compare -- [options]");
        writer.WriteLine();
        writer.WriteLine("Runs every scenario (or those named) on Spindle and on the built-in ThreadPool, each run in a fresh");
        writer.WriteLine("child process, and prints a table of medians, ratios (> 1: Spindle is better) and spreads.");
        writer.WriteLine();
        writer.WriteLine("Options:");
        writer.WriteLine("  --scenario, -s ID   run only this scenario (repeatable, or comma-separated)");
        writer.WriteLine("  --full              bigger counts and more runs (default: quick mode)");
        writer.WriteLine("  --runs N            runs per pool (default: 5 quick, 7 full, 3 for long-running and blocking-burst;");
        writer.WriteLine("                      the median is reported)");
        writer.WriteLine("  --json FILE         write the results as JSON to FILE, with the SVG plots beside it");
        writer.WriteLine("  --markdown FILE     write the results table (with machine, OS, .NET, cores, date) as Markdown");
        writer.WriteLine("  --out DIR           write compare.json, results.md and the plots into DIR");
        writer.WriteLine("                      (a run of every scenario writes them to bench/results/latest by default)");
        writer.WriteLine("  --timeout SECONDS   per child process (default: 120)");
        writer.WriteLine("  --list              list the scenarios and their variants");
        writer.WriteLine("  --help, -h          this text");
    }

    private static bool TryValue(string[] args, ref int i, [NotNullWhen(true)] out string? value, [NotNullWhen(false)] out string? error)
    {
        if (i + 1 >= args.Length || args[i + 1].StartsWith("--", StringComparison.Ordinal))
        {
            value = null;
            error = $"{args[i]} needs a value.";
            return false;
        }
        value = args[++i];
        error = null;
        return true;
    }
}
