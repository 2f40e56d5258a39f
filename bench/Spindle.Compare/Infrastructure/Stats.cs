using System;
using System.Collections.Generic;
using System.Linq;

namespace Spindle.Compare.Infrastructure;

internal static class Stats
{
    /// <summary>The median (mean of the middle two for an even count).</summary>
    public static double Median(IReadOnlyCollection<double> values)
    {
        if (values.Count == 0)
        {
            throw new ArgumentException("No values.", nameof(values));
        }
        double[] sorted = values.Order().ToArray();
        int middle = sorted.Length / 2;
        return sorted.Length % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
    }

    /// <summary>Nearest-rank percentile of an ascending array, <paramref name="percent"/> in [0, 100].</summary>
    public static double Percentile(double[] sortedAscending, double percent)
    {
        if (sortedAscending.Length == 0)
        {
            throw new ArgumentException("No values.", nameof(sortedAscending));
        }
        int rank = (int)Math.Ceiling(percent / 100.0 * sortedAscending.Length);
        return sortedAscending[Math.Clamp(rank - 1, 0, sortedAscending.Length - 1)];
    }

    /// <summary>
    /// Jain's fairness index of how <paramref name="shares"/> (each one party's count, say operations per loop) are spread:
    /// (sum x)^2 / (n * sum x^2), 1 when every party got the same, 1/n when one party got everything. 1 for no parties or
    /// when all are zero (nothing was shared unequally).
    /// </summary>
    public static double JainIndex(ReadOnlySpan<double> shares)
    {
        double sum = 0;
        double sumOfSquares = 0;
        foreach (double share in shares)
        {
            if (share < 0 || double.IsNaN(share))
            {
                throw new ArgumentException("Shares must be non-negative numbers.", nameof(shares));
            }
            sum += share;
            sumOfSquares += share * share;
        }
        return sumOfSquares == 0 ? 1 : sum * sum / (shares.Length * sumOfSquares);
    }
}
