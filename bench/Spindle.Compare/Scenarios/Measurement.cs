using System.Collections.Generic;

namespace Spindle.Compare.Scenarios;

/// <summary>The figures of one child run, by metric name.</summary>
internal sealed class Measurement
{
    public Dictionary<string, double> Values { get; } = [];

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
}
