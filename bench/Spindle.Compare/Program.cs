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

        WriteMachineFacts(options.Full, runs, options.Timeout);
        var total = Stopwatch.StartNew();
        var cases = new List<CaseResult>();
        var failures = new List<string>();
        foreach (IScenario scenario in scenarios)
        {
            foreach (string variant in scenario.Variants)
            {
                var result = new CaseResult(scenario, variant);
                cases.Add(result);
                int caseRuns = options.Runs ?? Math.Min(runs, scenario.MaxDefaultRuns ?? runs);
                for (int run = 1; run <= caseRuns; run++)
                {
                    foreach (PoolKind pool in PoolKind.All)
                    {
                        ChildOutcome outcome = ChildProcess.Run(scenario, variant, pool, options.Full, options.Timeout);
                        result.Add(pool, outcome);
                        string label = $"{scenario.Id} {variant} {pool.Id} run {run}/{caseRuns}";
                        Console.WriteLine(outcome.Succeeded
                            ? $"{label}: {Headline(scenario, outcome.Measurement!)}  [{outcome.Threads} threads, {outcome.WallTime.TotalSeconds:F1} s]"
                            : $"{label}: FAILED: {outcome.Failure}");
                        if (!outcome.Succeeded)
                        {
                            failures.Add($"{label}: {outcome.Failure}");
                        }
                    }
                }
            }
        }
        total.Stop();

        List<ReportRow> rows = ReportRow.Build(cases);
        Console.WriteLine();
        ConsoleTable.Write(Console.Out, rows);
        if (options.JsonPath is not null)
        {
            JsonReport.Write(options.JsonPath, rows);
            Console.WriteLine($"JSON written to {Path.GetFullPath(options.JsonPath)}");
        }
        Console.WriteLine($"Finished in {FormatDuration(total.Elapsed)}.");
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

    private static string Headline(IScenario scenario, Measurement measurement)
    {
        MetricInfo metric = scenario.Metrics.FirstOrDefault(m => m.Name == scenario.HeadlineMetric && measurement.Values.ContainsKey(m.Name))
            ?? scenario.Metrics.First(m => measurement.Values.ContainsKey(m.Name));
        return $"{metric.Name} {ReportRow.Format(measurement.Values[metric.Name])} {metric.Unit}";
    }

    private static void WriteMachineFacts(bool full, int runs, TimeSpan timeout)
    {
        Console.WriteLine("Spindle.Compare: Spindle WorkerPool vs the built-in ThreadPool");
        Console.WriteLine($"  OS:       {RuntimeInformation.OSDescription} ({RuntimeInformation.OSArchitecture})");
        Console.WriteLine($"  .NET:     {RuntimeInformation.FrameworkDescription}");
        Console.WriteLine($"  Cores:    {Environment.ProcessorCount}");
        Console.WriteLine($"  Date:     {DateTimeOffset.Now.ToString("yyyy-MM-dd HH:mm:ss zzz", Formats.Culture)}");
        Console.WriteLine($"  Mode:     {(full ? "full" : "quick")}, {runs} run(s) per pool (fewer where a scenario says so), one child process per run, "
            + $"pools alternating; workstation non-concurrent GC; child timeout {timeout.TotalSeconds:F0} s");
        Console.WriteLine();
    }

    private static string FormatDuration(TimeSpan elapsed) =>
        elapsed.TotalMinutes >= 1 ? $"{(int)elapsed.TotalMinutes}m {elapsed.Seconds}s" : $"{elapsed.TotalSeconds:F1}s";
}
