using System.Collections.Generic;

namespace Spindle.Compare.Scenarios;

/// <summary>The figures of one child run, by metric name.</summary>
internal sealed class Measurement
{
    public Dictionary<string, double> Values { get; } = [];

    /// <summary>
    /// Metrics the pool cannot produce because it lacks the feature they measure (see <see cref="SetUnavailable"/>):
    /// no figure, shown as n/a with no ratio, and not a failure.
    /// </summary>
    public HashSet<string> Unavailable { get; } = [];

    /// <summary>
    /// Samples taken during the measured run, for scenarios that record how the pool evolves: each is
    /// [milliseconds since the workload started, pool threads, pending items]. Null when the scenario records none.
    /// </summary>
    public List<double[]>? Series { get; set; }

    /// <summary>How many items (tasks, callbacks, timers, …) the measured run handled, for per-item process figures; 0: unknown.</summary>
    public long Items { get; set; }

    public Measurement Set(string metric, double value)
    {
        Values[metric] = value;
        return this;
    }

    /// <summary>Records that the pool cannot produce <paramref name="metric"/> (it has no such feature).</summary>
    public Measurement SetUnavailable(string metric)
    {
        Values.Remove(metric);
        Unavailable.Add(metric);
        return this;
    }
}
