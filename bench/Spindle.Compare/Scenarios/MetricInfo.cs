namespace Spindle.Compare.Scenarios;

internal enum Better
{
    Lower,
    Higher,
}

/// <summary>
/// One figure a scenario reports. Values at or below <paramref name="NoiseFloor"/> count as zero when the ratio is
/// formed (so 0.001 B/item of incidental allocation does not produce a ratio in the thousands).
/// </summary>
internal sealed record MetricInfo(string Name, string Unit, Better Better, double NoiseFloor = 0);
