using System.Collections.Generic;
using System.Linq;
using Spindle.Compare.Infrastructure;

namespace Spindle.Compare.Reporting;

/// <summary>
/// The per-run ratios of a <see cref="PairedRow"/>, in run order: null where either run of the pair failed or gave no
/// figure. Such a pair is shown as "failed" and left out of the median, never dropped silently.
/// </summary>
internal static class PairedRatios
{
    /// <summary>The median of the pairs that gave a ratio; null when none did.</summary>
    public static double? Median(IReadOnlyList<double?> ratios)
    {
        List<double> measured = [.. ratios.OfType<double>()];
        return measured.Count == 0 ? null : Stats.Median(measured);
    }

    /// <summary>The ratios in run order, two decimals each, "failed" for a pair without one.</summary>
    public static string Format(IReadOnlyList<double?> ratios) =>
        string.Join(" ", ratios.Select(r => r is { } ratio ? ratio.ToString("F2", Formats.Culture) : "failed"));
}
