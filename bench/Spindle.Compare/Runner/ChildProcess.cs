using System;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Text.Json;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Runner;

/// <summary>The outcome of one child run: either its figures or why it failed.</summary>
internal sealed record ChildOutcome(Measurement? Measurement, string? Failure, int Threads, TimeSpan WallTime)
{
    public bool Succeeded => Measurement is not null;
}

/// <summary>The parent side: re-launches this program as a child for one measurement and collects its result line.</summary>
/// <remarks>
/// Children of warm scenarios run with <c>DOTNET_TC_CallCountingDelayMs=0</c> (unless the caller's environment sets
/// it), both pools alike. By default the runtime starts the call counting that promotes tier-0 code only once the
/// process has compiled no new tier-0 method for 100 ms, and a child whose threads keep reaching code for the first
/// time postpones it, so on 2 cores hot methods were still at tier 0 or instrumented after a 500 ms warm-up: the
/// timed runs of <c>queue-drain/separated/ec-flow</c> compiled up to 200 methods (the process table's <c>jit</c>
/// column), and Spindle ran them in 129-302 ms where, warmed for 2 s, it ran them in 110 ms. With the delay at zero
/// the same 500 ms warm-up gave 99-117 ms. Cold scenarios (<see cref="IScenario.MeasuresColdProcess"/>) keep the
/// runtime's default, which is what a fresh process gets.
/// </remarks>
internal static class ChildProcess
{
    private const string CallCountingDelayVariable = "DOTNET_TC_CallCountingDelayMs";

    public static ChildOutcome Run(IScenario scenario, string variant, PoolKind pool, bool full, TimeSpan timeout)
    {
        ProcessStartInfo startInfo = CreateStartInfo();
        if (!scenario.MeasuresColdProcess(variant) && Environment.GetEnvironmentVariable(CallCountingDelayVariable) is null)
        {
            startInfo.Environment[CallCountingDelayVariable] = "0";
        }
        startInfo.ArgumentList.Add(ChildProtocol.ChildSwitch);
        startInfo.ArgumentList.Add(scenario.Id);
        startInfo.ArgumentList.Add(variant);
        startInfo.ArgumentList.Add(pool.Id);
        if (full)
        {
            startInfo.ArgumentList.Add(ChildProtocol.FullSwitch);
        }

        var stopwatch = Stopwatch.StartNew();
        using var process = new Process { StartInfo = startInfo };
        try
        {
            process.Start();
        }
        catch (Exception exception) when (exception is System.ComponentModel.Win32Exception or InvalidOperationException)
        {
            return Failed($"could not start '{startInfo.FileName}': {exception.Message}", stopwatch);
        }
        Task<string> stdout = process.StandardOutput.ReadToEndAsync();
        Task<string> stderr = process.StandardError.ReadToEndAsync();

        if (!process.WaitForExit(timeout))
        {
            try
            {
                process.Kill(entireProcessTree: true);
            }
            catch (InvalidOperationException)
            {
                // It exited meanwhile.
            }
            process.WaitForExit(TimeSpan.FromSeconds(10));
            return Failed($"timed out after {timeout.TotalSeconds:F0} s (child killed)", stopwatch);
        }
        process.WaitForExit(); // also waits for the redirected streams to reach their end
        string output = stdout.GetAwaiter().GetResult();
        string errors = stderr.GetAwaiter().GetResult();
        int exitCode = process.ExitCode;

        ChildResult? result = ParseResult(output, out string? parseError);
        if (result is null)
        {
            return Failed($"exit code {exitCode}, {parseError}{Tail(errors)}", stopwatch);
        }
        if (result.Error is not null)
        {
            return Failed(FirstLines(result.Error, 6), stopwatch);
        }
        if (exitCode != 0)
        {
            return Failed($"exit code {exitCode}{Tail(errors)}", stopwatch);
        }
        var measurement = new Measurement { Series = result.Series };
        foreach (MetricInfo metric in scenario.MetricsFor(variant).Concat(ProcessMeter.Metrics))
        {
            if (!result.Metrics.TryGetValue(metric.Name, out double value))
            {
                if (result.Unavailable?.Contains(metric.Name) == true)
                {
                    measurement.SetUnavailable(metric.Name);
                    continue;
                }
                return Failed($"the result has no '{metric.Name}'", stopwatch);
            }
            measurement.Set(metric.Name, value);
        }
        return new ChildOutcome(measurement, null, result.Threads, stopwatch.Elapsed);
    }

    /// <summary>
    /// This program again: its apphost, or <c>dotnet &lt;dll&gt;</c> when it was started through the muxer; stdout and
    /// stderr redirected, stdin not. <see cref="BackgroundLoad"/> starts its burners the same way.
    /// </summary>
    internal static ProcessStartInfo CreateStartInfo()
    {
        string? processPath = Environment.ProcessPath;
        bool viaMuxer = processPath is null
            || string.Equals(Path.GetFileNameWithoutExtension(processPath), "dotnet", StringComparison.OrdinalIgnoreCase);
        ProcessStartInfo startInfo;
        if (viaMuxer)
        {
            startInfo = new ProcessStartInfo(processPath ?? "dotnet");
            startInfo.ArgumentList.Add(EntryAssemblyPath());
        }
        else
        {
            startInfo = new ProcessStartInfo(processPath!);
        }
        startInfo.UseShellExecute = false;
        startInfo.RedirectStandardOutput = true;
        startInfo.RedirectStandardError = true;
        startInfo.RedirectStandardInput = false;
        // Workstation GC in every child (the project also disables concurrent GC); tiered compilation and PGO stay at
        // the runtime's defaults.
        startInfo.Environment["DOTNET_gcServer"] = "0";
        return startInfo;
    }

    private static string EntryAssemblyPath()
    {
        string first = Environment.GetCommandLineArgs()[0];
        if (first.EndsWith(".dll", StringComparison.OrdinalIgnoreCase) && File.Exists(first))
        {
            return first;
        }
        string name = Assembly.GetEntryAssembly()?.GetName().Name ?? "Spindle.Compare";
        return Path.Combine(AppContext.BaseDirectory, name + ".dll");
    }

    private static ChildResult? ParseResult(string output, out string? error)
    {
        string? line = output.Split('\n')
            .Select(l => l.TrimEnd('\r'))
            .LastOrDefault(l => l.StartsWith(ChildProtocol.ResultMarker, StringComparison.Ordinal));
        if (line is null)
        {
            error = "no result line on stdout";
            return null;
        }
        try
        {
            error = null;
            return JsonSerializer.Deserialize(line.AsSpan(ChildProtocol.ResultMarker.Length), ChildJsonContext.Default.ChildResult)
                ?? throw new JsonException("null result");
        }
        catch (JsonException exception)
        {
            error = $"unreadable result line ({exception.Message})";
            return null;
        }
    }

    private static ChildOutcome Failed(string reason, Stopwatch stopwatch) => new(null, reason, 0, stopwatch.Elapsed);

    private static string Tail(string text)
    {
        string[] lines = text.Split('\n', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries);
        return lines.Length == 0 ? "" : "; stderr: " + string.Join(" | ", lines.TakeLast(6));
    }

    private static string FirstLines(string text, int count) =>
        string.Join(" | ", text.Split('\n', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries).Take(count));
}
