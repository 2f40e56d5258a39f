using System.Collections.Generic;

namespace Spindle.Compare.Scenarios;

/// <summary>The figures of one child run, by metric name.</summary>
internal sealed class Measurement
{
    public Dictionary<string, double> Values { get; } = [];

    public Measurement Set(string metric, double value)
    {
        Values[metric] = value;
        return this;
    }
}
