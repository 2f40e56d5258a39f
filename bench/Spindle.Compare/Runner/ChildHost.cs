using System;
using System.Linq;
using System.Text.Json;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Runner;

/// <summary>The child side: runs one (scenario, variant, pool) measurement and prints its result line.</summary>
internal static class ChildHost
{
    /// <summary>Runs the child whose arguments follow <see cref="ChildProtocol.ChildSwitch"/>; returns the exit code.</summary>
    public static int Run(ReadOnlySpan<string> args)
    {
        if (args.Length is < 3 or > 4 || (args.Length == 4 && args[3] != ChildProtocol.FullSwitch))
        {
            return Report(new ChildResult { Error = "usage: --child <scenario> <variant> <pool> [--full]" });
        }
        IScenario? scenario = ScenarioCatalog.Find(args[0]);
        PoolKind? kind = PoolKind.Find(args[2]);
        string variant = args[1];
        bool full = args.Length == 4;
        if (scenario is null || kind is null || !scenario.Variants.Contains(variant))
        {
            return Report(new ChildResult { Error = $"unknown scenario, variant or pool: {args[0]} {args[1]} {args[2]}" });
        }

        IPoolUnderTest pool;
        Measurement measurement;
        try
        {
            ProcessMeter.SamplingAllowed = ThreadSampling.AllowedIn(scenario.Id);
            ProcessMeter.MarkMeasuredStart(); // restarted by the warm-up, if the scenario has one
            pool = kind.Create(scenario.GetPoolSettings(variant));
            measurement = scenario.Run(pool, variant, full);
            ProcessMeter.Finish(measurement);
            if (pool.Fault is { } fault)
            {
                throw new InvalidOperationException("A work item threw.", fault);
            }
        }
        catch (Exception exception)
        {
            // Do not dispose the pool: a stuck pool would hang a draining shutdown. The process is about to exit anyway.
            return Report(new ChildResult { Error = exception.ToString() });
        }

        var result = new ChildResult { Threads = pool.ThreadCount, Series = measurement.Series };
        foreach (MetricInfo metric in scenario.MetricsFor(variant).Concat(ProcessMeter.Metrics))
        {
            if (measurement.Unavailable.Contains(metric.Name))
            {
                (result.Unavailable ??= []).Add(metric.Name);
                continue;
            }
            if (!measurement.Values.TryGetValue(metric.Name, out double value) || !double.IsFinite(value))
            {
                return Report(new ChildResult { Error = $"the scenario did not report a finite value for '{metric.Name}'" });
            }
            result.Metrics[metric.Name] = value;
        }
        pool.Dispose();
        return Report(result);
    }

    private static int Report(ChildResult result)
    {
        Console.Out.WriteLine(ChildProtocol.ResultMarker + JsonSerializer.Serialize(result, ChildJsonContext.Default.ChildResult));
        Console.Out.Flush();
        return result.Error is null ? 0 : 1;
    }
}
