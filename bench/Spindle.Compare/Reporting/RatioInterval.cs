using System;
using System.Collections.Generic;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Reporting;

/// <summary>
/// A distribution-free confidence interval for a row's ratio, from the runs alone: the interval that inverts the
/// two-sided Mann-Whitney rank test (its Hodges-Lehmann interval), taken on the ratios of every subject run to every
/// baseline run. It assumes nothing of the runs' distribution, only that the two pools' runs differ by a factor.
/// </summary>
/// <remarks>
/// <para>With <c>m</c> subject runs and <c>n</c> baseline runs there are <c>m·n</c> pairwise ratios
/// <c>D(1) ≤ … ≤ D(mn)</c>, oriented like <see cref="ReportRow.Ratio"/> (&gt; 1: the subject better). Under the null
/// hypothesis that the factor is <c>d</c>, the count of pairwise ratios below <c>d</c> follows the Mann-Whitney
/// <c>U</c> distribution, so <c>[D(k), D(mn + 1 − k)]</c> covers the true factor with probability
/// <c>1 − 2·P(U ≤ k − 1)</c>. The interval takes the largest <c>k</c> that keeps this at or above
/// <see cref="Level"/>; none exists when even <c>k = 1</c> falls short (<c>2 / C(m + n, m) &gt; 1 − Level</c>: 3 runs
/// against 3 or 4, 2 against 7 or fewer, 1 against 38 or fewer), and then there is no interval and no mark. With
/// 4 runs a side the interval is the whole range of the pairwise ratios (97.1 %); with 5, it drops the two most
/// extreme pairs at each end (96.8 %).</para>
/// <para>An interval that lies wholly above 1 is the same finding as an exact two-sided Mann-Whitney test at the
/// interval's level rejecting "no difference" in the subject's favour; wholly below 1, in the baseline's.</para>
/// </remarks>
internal sealed record RatioInterval(double Low, double High, double Confidence)
{
    /// <summary>The confidence the interval must reach at least (95 %).</summary>
    public const double Level = 0.95;

    /// <summary>The subject did better in every run pairing the interval keeps: its lower bound is above 1.</summary>
    public bool Better => Low > 1;

    /// <summary>The subject did worse: the interval's upper bound is below 1.</summary>
    public bool Worse => High < 1;

    /// <summary>"+" (better), "−" (worse) or "" (the interval holds 1).</summary>
    public string Mark => Better ? "+" : Worse ? "-" : "";

    /// <summary>
    /// The interval for <paramref name="subject"/>'s runs against <paramref name="baseline"/>'s, each value first raised
    /// to <paramref name="noiseFloor"/> as the ratio does; null when the run counts allow no interval at <see cref="Level"/>.
    /// </summary>
    public static RatioInterval? Of(IReadOnlyList<double> subject, IReadOnlyList<double> baseline, Better better, double noiseFloor)
    {
        int m = subject.Count;
        int n = baseline.Count;
        if (m == 0 || n == 0)
        {
            return null;
        }
        double[] atMost = CumulativeU(m, n);
        double tail = (1 - Level) / 2;
        int k = 0;
        while (k < atMost.Length && atMost[k] <= tail + 1e-12)
        {
            k++;
        }
        if (k == 0)
        {
            return null;
        }
        var ratios = new double[m * n];
        int index = 0;
        foreach (double s in subject)
        {
            foreach (double b in baseline)
            {
                ratios[index++] = PairRatio(Math.Max(s, noiseFloor), Math.Max(b, noiseFloor), better);
            }
        }
        Array.Sort(ratios);
        return new RatioInterval(ratios[k - 1], ratios[m * n - k], 1 - 2 * atMost[k - 1]);
    }

    /// <summary>One run against one run, oriented so that &gt; 1 favours the subject (as <see cref="ReportRow.Ratio"/>).</summary>
    private static double PairRatio(double subject, double baseline, Better better)
    {
        (double good, double bad) = better == Scenarios.Better.Lower ? (baseline, subject) : (subject, baseline);
        if (good == 0 && bad == 0)
        {
            return 1;
        }
        return bad == 0 ? double.PositiveInfinity : good / bad;
    }

    /// <summary>
    /// <c>P(U ≤ u)</c> for <c>u = 0 … m·n</c>, where <c>U</c> is the Mann-Whitney statistic of samples of sizes
    /// <paramref name="m"/> and <paramref name="n"/> without ties: the coefficients of the Gaussian binomial
    /// <c>[m + n choose m]</c> in <c>q</c> (the number of arrangements with each <c>U</c>), over <c>C(m + n, m)</c>.
    /// </summary>
    internal static double[] CumulativeU(int m, int n)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(m);
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(n);
        // [m + n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i): multiply by the numerator's factor, then
        // divide by the denominator's (a running sum with stride i), one i at a time; every partial product is
        // [n + i choose i]_q, a polynomial with non-negative coefficients.
        int degree = m * n;
        var counts = new double[degree + 1];
        counts[0] = 1;
        for (int i = 1; i <= m; i++)
        {
            int up = n + i;
            for (int u = degree; u >= up; u--)
            {
                counts[u] -= counts[u - up];
            }
            for (int u = i; u <= degree; u++)
            {
                counts[u] += counts[u - i];
            }
        }
        double total = 0;
        foreach (double count in counts)
        {
            total += count;
        }
        var cumulative = new double[degree + 1];
        double sum = 0;
        for (int u = 0; u <= degree; u++)
        {
            sum += counts[u];
            cumulative[u] = sum / total;
        }
        return cumulative;
    }
}
