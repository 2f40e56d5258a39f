using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;
using Spindle.Compare.Reporting;
using Spindle.Compare.Runner;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare;

/// <summary>
/// Compares Spindle's <see cref="WorkerPool"/> with the built-in <see cref="System.Threading.ThreadPool"/>. Every
/// (scenario, variant, pool) run happens in a fresh child process (this program again, with hidden arguments); runs
/// alternate between the pools, and the report shows medians, the ratio and the spread.
/// </summary>
internal static class Program
{
    private const int QuickRuns = 5;
    private const int FullRuns = 7;

    private static int Main(string[] args)
    {
        if (args.Length > 0 && args[0] == ChildProtocol.ChildSwitch)
        {
            return ChildHost.Run(args.AsSpan(1));
        }
        if (args.Length == 1 && args[0] == ChildProtocol.BurnSwitch)
        {
            return BackgroundLoad.Burn();
        }
        if (!CommandLine.TryParse(args, out CommandLine? options, out string? error))
        {
            Console.Error.WriteLine(error);
            Console.Error.WriteLine();
            CommandLine.WriteUsage(Console.Error);
            return 2;
        }
        if (options.Help)
        {
            CommandLine.WriteUsage(Console.Out);
            return 0;
        }
        if (options.HeadlineFrom is { } report)
        {
            Console.Write(HeadlineTable.FromJson(report));
            return 0;
        }
        if (options.List)
        {
            foreach (IScenario scenario in ScenarioCatalog.All)
            {
                Console.WriteLine($"{scenario.Id,-18} {scenario.Description}");
                Console.WriteLine($"{"",-18} variants: {string.Join(", ", scenario.Variants)}");
            }
            return 0;
        }
        return Compare(options);
    }

    private static int Compare(CommandLine options)
    {
        int runs = options.Runs ?? (options.Full ? FullRuns : QuickRuns);
        IReadOnlyList<IScenario> scenarios = options.Scenarios.Count == 0
            ? ScenarioCatalog.All
            : ScenarioCatalog.All.Where(s => options.Scenarios.Contains(s.Id, StringComparer.OrdinalIgnoreCase)).ToList();

        var facts = MachineFacts.Collect(options.Full, runs, options.Timeout, options.BackgroundLoad);
        Console.WriteLine($"Spindle.Compare: Spindle WorkerPool vs {string.Join(", ", PoolKind.All.Where(p => p != PoolKind.Spindle).Select(p => p.DisplayName))}");
        facts.Write(Console.Out);
        foreach (string peer in Peers.Unavailable)
        {
            Console.WriteLine($"  Peer:     {peer}");
        }
        Console.WriteLine();
        var total = Stopwatch.StartNew();
        HostSteal? stealAtStart = HostSteal.Take();
        var cases = new List<CaseResult>();
        var failures = new List<string>();
        string? loadWarning = null;

        // The background load starts before the first child and is killed in the finally block, whether the runs end,
        // fail or throw (and on Ctrl+C by BackgroundLoad itself).
        BackgroundLoad load;
        try
        {
            load = BackgroundLoad.Start(options.BackgroundLoad);
        }
        catch (Exception exception) when (exception is System.ComponentModel.Win32Exception or InvalidOperationException)
        {
            Console.Error.WriteLine($"Could not start the background load: {exception.Message}");
            return 1;
        }
        try
        {
            if (options.BackgroundLoad > 0)
            {
                Console.WriteLine($"Background load: {facts.LoadText} (process ids {string.Join(", ", load.ProcessIds)}).");
                Console.WriteLine();
            }
            RunAll(options, runs, scenarios, cases, failures);
            if (load.Exited is > 0 and int exited)
            {
                loadWarning = $"{exited} of the {options.BackgroundLoad} background-load processes exited before the last run: "
                    + "the load was lighter than the report states.";
            }
        }
        finally
        {
            load.Dispose();
        }
        total.Stop();
        facts = facts with { StealShare = HostSteal.Share(stealAtStart, HostSteal.Take()) };

        List<ReportRow> rows = ReportRow.Build(cases);
        Console.WriteLine();
        ConsoleTable.Write(Console.Out, rows.Where(r => !r.IsProcessMetric).ToList());
        Console.WriteLine();
        ProcessTable.Write(Console.Out, rows);
        List<PairedRow> pairs = PairedRow.Build(cases);
        PairedRow.Write(Console.Out, pairs);
        foreach (string peer in Peers.Unavailable)
        {
            Console.WriteLine($"Not measured: {peer}.");
        }
        Console.WriteLine();
        WriteFiles(options, rows, pairs, cases, facts);
        Console.WriteLine($"Finished in {RunProgress.Format(total.Elapsed)}. Hypervisor steal: {facts.StealText}.");
        if (loadWarning is not null)
        {
            Console.WriteLine();
            Console.WriteLine("WARNING: " + loadWarning);
        }
        if (failures.Count > 0)
        {
            Console.WriteLine();
            Console.WriteLine($"{failures.Count} run(s) FAILED:");
            foreach (string failure in failures)
            {
                Console.WriteLine("  " + failure);
            }
            return 1;
        }
        return 0;
    }

    /// <summary>
    /// Every run of <paramref name="scenarios"/>, each in a child process, with a progress line per run; adds each case
    /// to <paramref name="cases"/> and each failed run to <paramref name="failures"/>.
    /// </summary>
    private static void RunAll(CommandLine options, int runs, IReadOnlyList<IScenario> scenarios, List<CaseResult> cases, List<string> failures)
    {
        int CaseRuns(IScenario scenario) => options.Runs ?? Math.Min(runs, scenario.MaxDefaultRuns ?? runs);
        foreach (IScenario scenario in scenarios)
        {
            CheckSharedRuns(scenario); // before any child runs, not when the first shared run is reached
        }
        var progress = new RunProgress(scenarios.Sum(s => s.Variants.Count * PoolKind.All.Count * CaseRuns(s)));
        int scenarioIndex = 0;
        foreach (IScenario scenario in scenarios)
        {
            // Variants interleave run by run (run 1 of every variant, then run 2, ...), so that two variants a
            // comparison pairs (IScenario.Comparisons) are measured seconds apart, under the same state of the machine.
            var results = scenario.Variants.Select(variant => new CaseResult(scenario, variant)).ToList();
            cases.AddRange(results);
            int caseRuns = CaseRuns(scenario);
            scenarioIndex++;
            Console.WriteLine($"== {scenario.Id} (scenario {scenarioIndex}/{scenarios.Count}): {results.Count} variant(s) x {PoolKind.All.Count} pools x {caseRuns} run(s); "
                + $"{progress.Done}/{progress.Total} runs done in {RunProgress.Format(progress.Elapsed)}"
                + (progress.Remaining is { } left ? $", about {RunProgress.Format(left)} left" : ""));
            for (int run = 1; run <= caseRuns; run++)
            {
                foreach (CaseResult result in results)
                {
                    foreach (PoolKind pool in PoolKind.All)
                    {
                        string? sameAs = scenario.SameRunAs(result.Variant, pool);
                        ChildOutcome outcome = sameAs is null
                            ? ChildProcess.Run(scenario, result.Variant, pool, options.Full, options.Timeout)
                            : SharedOutcome(results, sameAs, pool, run);
                        result.Add(pool, outcome);
                        progress.RunFinished();
                        string label = $"{scenario.Id} {result.Variant} {pool.Id} run {run}/{caseRuns}"
                            + (sameAs is null ? "" : $" (the {sameAs} run: the same code on this pool)");
                        Console.WriteLine($"{progress.Prefix()} " + (outcome.Succeeded
                            ? $"{label}: {Headline(scenario, outcome.Measurement!)}  [{outcome.Threads} threads, {outcome.WallTime.TotalSeconds:F1} s]"
                            : $"{label}: FAILED: {outcome.Failure}"));
                        if (!outcome.Succeeded)
                        {
                            failures.Add($"{label}: {outcome.Failure}");
                        }
                    }
                }
            }
        }
    }

    /// <summary>Throws unless every variant <paramref name="scenario"/> shares a run with is listed before the one sharing it.</summary>
    private static void CheckSharedRuns(IScenario scenario)
    {
        for (int i = 0; i < scenario.Variants.Count; i++)
        {
            foreach (PoolKind pool in PoolKind.All)
            {
                if (scenario.SameRunAs(scenario.Variants[i], pool) is { } sameAs
                    && !scenario.Variants.Take(i).Contains(sameAs))
                {
                    throw new InvalidOperationException(
                        $"{scenario.Id}/{scenario.Variants[i]} on {pool.Id} shares the run of '{sameAs}', which is not a variant listed before it.");
                }
            }
        }
    }

    /// <summary>The outcome of round <paramref name="run"/> of <paramref name="variant"/> on <paramref name="pool"/>, measured earlier in the round.</summary>
    private static ChildOutcome SharedOutcome(List<CaseResult> results, string variant, PoolKind pool, int run) =>
        results.First(r => r.Variant == variant).Outcomes(pool)[run - 1];

    private static string Headline(IScenario scenario, Measurement measurement)
    {
        MetricInfo? metric = scenario.Metrics.FirstOrDefault(m => m.Name == scenario.HeadlineMetric && measurement.Values.ContainsKey(m.Name))
            ?? scenario.Metrics.FirstOrDefault(m => measurement.Values.ContainsKey(m.Name));
        return metric is null
            ? $"{scenario.HeadlineMetric} n/a (not available on this pool)"
            : $"{metric.Name} {ReportRow.Format(measurement.Values[metric.Name])} {metric.Unit}";
    }

    /// <summary>
    /// JSON (with the plots beside it) and Markdown: where the options say, and for a run of every scenario also into
    /// the default directory (bench/results/latest under the repository, when the program finds it).
    /// </summary>
    private static void WriteFiles(CommandLine options, List<ReportRow> rows, List<PairedRow> pairs, List<CaseResult> cases, MachineFacts facts)
    {
        string? directory = options.OutputDirectory ?? (options.Scenarios.Count == 0 ? FindDefaultOutputDirectory() : null);
        string? jsonPath = options.JsonPath ?? (directory is null ? null : Path.Combine(directory, "compare.json"));
        string? markdownPath = options.MarkdownPath ?? (directory is null ? null : Path.Combine(directory, "results.md"));
        List<string> plots = [];
        if (jsonPath is not null)
        {
            string jsonDirectory = Path.GetDirectoryName(Path.GetFullPath(jsonPath))!;
            Directory.CreateDirectory(jsonDirectory);
            JsonReport.Write(jsonPath, rows);
            Console.WriteLine($"JSON written to {Path.GetFullPath(jsonPath)}");
            string prefix = options.JsonPath is null ? "" : Path.GetFileNameWithoutExtension(jsonPath) + ".";
            HeadlineTable.Write(Path.Combine(jsonDirectory, prefix + HeadlineTable.FileName), jsonPath);
            plots = SvgPlots.Write(jsonDirectory, prefix, rows, cases);
            Console.WriteLine($"Plots written to {jsonDirectory}: {string.Join(", ", plots)}");
            if (markdownPath is not null)
            {
                // Plot links relative to the Markdown file.
                string markdownDirectory = Path.GetDirectoryName(Path.GetFullPath(markdownPath))!;
                plots = plots.Select(p => Path.GetRelativePath(markdownDirectory, Path.Combine(jsonDirectory, p)).Replace('\\', '/')).ToList();
            }
        }
        if (markdownPath is not null)
        {
            Directory.CreateDirectory(Path.GetDirectoryName(Path.GetFullPath(markdownPath))!);
            MarkdownReport.Write(markdownPath, rows, pairs, facts, Peers.Unavailable, plots);
            Console.WriteLine($"Markdown written to {Path.GetFullPath(markdownPath)}");
        }
    }

    /// <summary>bench/results/latest of the repository this program was built from or is run in, if either is found.</summary>
    private static string? FindDefaultOutputDirectory()
    {
        foreach (string start in new[] { Directory.GetCurrentDirectory(), AppContext.BaseDirectory })
        {
            for (DirectoryInfo? dir = new(start); dir is not null; dir = dir.Parent)
            {
                if (Directory.Exists(Path.Combine(dir.FullName, "bench", "Spindle.Compare")))
                {
                    return Path.Combine(dir.FullName, "bench", "results", "latest");
                }
            }
        }
        return null;
    }
}
