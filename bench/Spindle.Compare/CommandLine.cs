using System;
using System.Collections.Generic;
using System.CommandLine;
using System.CommandLine.Help;
using System.CommandLine.Parsing;
using System.Diagnostics.CodeAnalysis;
using System.IO;
using System.Linq;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare;

/// <summary>
/// The public command line, parsed by System.CommandLine (which also writes the help and the errors); the hidden child
/// arguments are handled by <see cref="Runner.ChildHost"/>, and those of a background-load process by
/// <see cref="Runner.BackgroundLoad"/>, before this sees them.
/// </summary>
internal sealed class CommandLine
{
    private static readonly Option<string[]> s_scenario = new("--scenario", "-s")
    {
        Description = "Run only this scenario (repeatable, or comma-separated; --list names them).",
        HelpName = "ID",
        Arity = ArgumentArity.OneOrMore,
    };

    private static readonly Option<bool> s_full = new("--full")
    {
        Description = "Bigger counts and more runs (default: quick mode).",
    };

    private static readonly Option<int?> s_runs = new("--runs")
    {
        Description = "Runs per pool (default: 5 quick, 7 full, fewer where a scenario says so); the median is reported.",
        HelpName = "N",
    };

    private static readonly Option<string?> s_json = new("--json")
    {
        Description = "Write the results as JSON to FILE, with the SVG plots beside it.",
        HelpName = "FILE",
    };

    private static readonly Option<string?> s_markdown = new("--markdown")
    {
        Description = "Write the results table (with machine, OS, .NET, cores, date) as Markdown to FILE.",
        HelpName = "FILE",
    };

    private static readonly Option<string?> s_out = new("--out")
    {
        Description = "Write compare.json, results.md and the plots into DIR (a run of every scenario writes them to bench/results/latest by default).",
        HelpName = "DIR",
    };

    private static readonly Option<int> s_timeout = new("--timeout")
    {
        Description = "Seconds each child process may take.",
        HelpName = "SECONDS",
        DefaultValueFactory = _ => 120,
    };

    private static readonly Option<int> s_backgroundLoad = new("--background-load")
    {
        Description = "Start N processes that each keep one core busy (a thread spinning in a tight loop) before the first run; "
            + "they run for the whole comparison, beside every child, and stop with it (default 0: none).",
        HelpName = "N",
        DefaultValueFactory = _ => 0,
    };

    private static readonly Option<string?> s_headlineFrom = new("--headline-from")
    {
        Description = "Run nothing: print the headline table (one row per case, its headline metric) of a report written before, as the README shows it.",
        HelpName = "JSON",
    };

    private static readonly Option<bool> s_list = new("--list")
    {
        Description = "List the scenarios and their variants.",
    };

    private static readonly RootCommand s_root = CreateRoot();

    public List<string> Scenarios { get; } = [];

    public bool Full { get; private init; }

    public int? Runs { get; private init; }

    public string? JsonPath { get; private init; }

    public string? MarkdownPath { get; private init; }

    public string? OutputDirectory { get; private init; }

    public TimeSpan Timeout { get; private init; } = TimeSpan.FromSeconds(120);

    /// <summary>How many CPU-burning processes run beside every child (<see cref="Runner.BackgroundLoad"/>); 0 for none.</summary>
    public int BackgroundLoad { get; private init; }

    public bool List { get; private init; }

    public string? HeadlineFrom { get; private init; }

    public bool Help { get; private init; }

    private static RootCommand CreateRoot()
    {
        var root = new RootCommand(
            "Runs every scenario (or those named) on Spindle and on the built-in ThreadPool, each run in a fresh child " +
            "process, and prints a table of medians, ratios (> 1: Spindle is better) and spreads.")
        {
            s_scenario, s_full, s_runs, s_json, s_markdown, s_out, s_timeout, s_backgroundLoad, s_list, s_headlineFrom,
        };
        // No --version: the program is not versioned apart from the repository.
        foreach (VersionOption version in root.Options.OfType<VersionOption>().ToList())
        {
            root.Options.Remove(version);
        }
        s_scenario.Validators.Add(static result =>
        {
            foreach (string id in SplitIds(result.Tokens.Select(t => t.Value)))
            {
                if (ScenarioCatalog.Find(id) is null)
                {
                    result.AddError($"Unknown scenario '{id}'. Known: {string.Join(", ", ScenarioCatalog.All.Select(s => s.Id))}.");
                }
            }
        });
        s_runs.Validators.Add(static result =>
        {
            if (TryGetValue(result, out int? runs) && runs is < 1)
            {
                result.AddError($"--runs needs a positive integer, not '{runs}'.");
            }
        });
        s_backgroundLoad.Validators.Add(static result =>
        {
            if (TryGetValue(result, out int count) && count < 0)
            {
                result.AddError($"--background-load needs a number of processes of 0 or more, not '{count}'.");
            }
        });
        s_headlineFrom.Validators.Add(static result =>
        {
            if (result.GetValueOrDefault<string?>() is { } path && !File.Exists(path))
            {
                result.AddError($"--headline-from: no file '{path}'.");
            }
        });
        s_timeout.Validators.Add(static result =>
        {
            if (TryGetValue(result, out int seconds) && seconds < 1)
            {
                result.AddError($"--timeout needs a positive number of seconds, not '{seconds}'.");
            }
        });
        return root;
    }

    /// <summary>
    /// The option's value for a validator; false when its token does not convert (say "--runs x"): the parser reports
    /// that error itself, and asking for the value would throw instead of letting it.
    /// </summary>
    private static bool TryGetValue<T>(OptionResult result, out T? value)
    {
        try
        {
            value = result.GetValueOrDefault<T>();
            return true;
        }
        catch (InvalidOperationException)
        {
            value = default;
            return false;
        }
    }

    private static IEnumerable<string> SplitIds(IEnumerable<string> values) =>
        values.SelectMany(static value => value.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries));

    public static bool TryParse(string[] args, [NotNullWhen(true)] out CommandLine? options, [NotNullWhen(false)] out string? error)
    {
        ParseResult parsed = s_root.Parse(args);
        if (parsed.Errors.Count > 0)
        {
            options = null;
            error = string.Join(Environment.NewLine, parsed.Errors.Select(e => e.Message));
            return false;
        }
        options = new CommandLine
        {
            Full = parsed.GetValue(s_full),
            Runs = parsed.GetValue(s_runs),
            JsonPath = parsed.GetValue(s_json),
            MarkdownPath = parsed.GetValue(s_markdown),
            OutputDirectory = parsed.GetValue(s_out),
            Timeout = TimeSpan.FromSeconds(parsed.GetValue(s_timeout)),
            BackgroundLoad = parsed.GetValue(s_backgroundLoad),
            List = parsed.GetValue(s_list),
            HeadlineFrom = parsed.GetValue(s_headlineFrom),
            Help = parsed.Action is HelpAction,
        };
        options.Scenarios.AddRange(SplitIds(parsed.GetValue(s_scenario) ?? []));
        error = null;
        return true;
    }

    public static void WriteUsage(TextWriter writer)
    {
        s_root.Parse(["--help"]).Invoke(new InvocationConfiguration { Output = writer, Error = writer });
        writer.WriteLine("From the repository root: dotnet run -c Release --project bench/Spindle.Compare -- [options]");
    }
}
