using System.Collections.Generic;
using System.Text.Json.Serialization;

namespace Spindle.Compare.Runner;

/// <summary>What a child process reports: one JSON line on stdout, prefixed with <see cref="ChildProtocol.ResultMarker"/>.</summary>
internal sealed class ChildResult
{
    public Dictionary<string, double> Metrics { get; set; } = [];

    /// <summary>Metrics the pool cannot produce (<see cref="Scenarios.Measurement.Unavailable"/>): absent from <see cref="Metrics"/>; null when none.</summary>
    public List<string>? Unavailable { get; set; }

    /// <summary>Set when the run failed; <see cref="Metrics"/> is then empty.</summary>
    public string? Error { get; set; }

    /// <summary>Threads the pool had at the end of the run (informational).</summary>
    public int Threads { get; set; }

    /// <summary>The measurement's samples (see <see cref="Scenarios.Measurement.Series"/>), or null.</summary>
    public List<double[]>? Series { get; set; }
}

[JsonSourceGenerationOptions(PropertyNamingPolicy = JsonKnownNamingPolicy.CamelCase)]
[JsonSerializable(typeof(ChildResult))]
internal sealed partial class ChildJsonContext : JsonSerializerContext
{
}
