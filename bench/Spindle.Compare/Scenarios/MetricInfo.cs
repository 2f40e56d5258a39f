namespace Spindle.Compare.Scenarios;

internal enum Better
{
    Lower,
    Higher,
}

/// <summary>
/// One figure a scenario reports. Values below <paramref name="NoiseFloor"/> count as the floor when the ratio is formed
/// (so 0.001 B/item of incidental allocation against 0.04 B/item is a tie, not a ratio in the tens or an infinity).
/// </summary>
internal sealed record MetricInfo(string Name, string Unit, Better Better, double NoiseFloor = 0);
