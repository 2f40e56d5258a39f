using System;
using System.Linq;
using Spindle.Compare.Reporting;
using Spindle.Compare.Scenarios;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The comparison program's distribution-free interval of a ratio (RatioInterval).</summary>
public sealed class RatioIntervalTests
{
    [Theory]
    [InlineData(1, 1, new[] { 1.0, 1.0 })]
    [InlineData(2, 2, new[] { 1.0, 1.0, 2.0, 1.0, 1.0 })]
    [InlineData(3, 3, new[] { 1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 2.0, 1.0, 1.0 })]
    public void CumulativeU_SumsTheCountsOfArrangements(int m, int n, double[] counts)
    {
        double total = counts.Sum();
        double[] cumulative = RatioInterval.CumulativeU(m, n);

        Assert.Equal(m * n + 1, cumulative.Length);
        double running = 0;
        for (int u = 0; u < counts.Length; u++)
        {
            running += counts[u];
            Assert.Equal(running / total, cumulative[u], 12);
        }
    }

    [Theory]
    [InlineData(5, 5, 252)]
    [InlineData(4, 7, 330)]
    [InlineData(7, 7, 3432)]
    [InlineData(20, 20, 137846528820)]
    public void CumulativeU_IsSymmetricAndEndsAtOne(int m, int n, long arrangements)
    {
        double[] cumulative = RatioInterval.CumulativeU(m, n);

        Assert.Equal(1 / (double)arrangements, cumulative[0], 15);
        Assert.Equal(1, cumulative[^1], 12);
        for (int u = 0; u < cumulative.Length - 1; u++)
        {
            // P(U <= u) + P(U <= mn - u - 1) = 1: the distribution is symmetric about mn / 2.
            Assert.Equal(1, cumulative[u] + cumulative[m * n - u - 1], 9);
        }
    }

    [Fact]
    public void CumulativeU_RefusesAnEmptySample()
    {
        Assert.Throws<ArgumentOutOfRangeException>(() => RatioInterval.CumulativeU(0, 3));
        Assert.Throws<ArgumentOutOfRangeException>(() => RatioInterval.CumulativeU(3, 0));
    }

    [Theory]
    [InlineData(3, 3)]
    [InlineData(3, 4)]
    [InlineData(2, 7)]
    [InlineData(1, 38)]
    [InlineData(0, 5)]
    public void TooFewRuns_GiveNoInterval(int subjectRuns, int baselineRuns)
    {
        double[] subject = Enumerable.Repeat(2.0, subjectRuns).ToArray();
        double[] baseline = Enumerable.Repeat(1.0, baselineRuns).ToArray();

        Assert.Null(RatioInterval.Of(subject, baseline, Better.Higher, noiseFloor: 0));
    }

    [Theory]
    [InlineData(4, 4)]
    [InlineData(3, 5)]
    [InlineData(2, 8)]
    [InlineData(1, 39)]
    public void JustEnoughRuns_GiveTheWholeRangeOfPairs(int subjectRuns, int baselineRuns)
    {
        // 2 / C(m + n, m) <= 5 %: k = 1, the smallest and the largest pairwise ratio.
        double[] subject = Enumerable.Range(0, subjectRuns).Select(i => 20.0 + i).ToArray();
        double[] baseline = Enumerable.Range(0, baselineRuns).Select(i => 10.0 + i / 10.0).ToArray();

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Higher, noiseFloor: 0));

        Assert.Equal(subject.Min() / baseline.Max(), interval.Low, 12);
        Assert.Equal(subject.Max() / baseline.Min(), interval.High, 12);
        Assert.InRange(interval.Confidence, RatioInterval.Level, 1);
    }

    [Fact]
    public void FourRunsASide_GiveTheExtremePairsAtTheirExactConfidence()
    {
        // C(8, 4) = 70 arrangements: only k = 1 keeps 2 P(U <= 0) = 2/70 under 5 %, so the interval is the smallest and
        // the largest of the 16 pairwise ratios, at 1 - 2/70 confidence.
        double[] subject = [10, 11, 12, 13];
        double[] baseline = [5, 6, 7, 8];

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Higher, noiseFloor: 0));

        Assert.Equal(10.0 / 8, interval.Low, 12);
        Assert.Equal(13.0 / 5, interval.High, 12);
        Assert.Equal(1 - 2.0 / 70, interval.Confidence, 12);
        Assert.True(interval.Better);
        Assert.Equal("+", interval.Mark);
    }

    [Fact]
    public void FiveRunsASide_CutTwoPairsFromEachEnd()
    {
        // C(10, 5) = 252; P(U <= 2) = 4/252 <= 2.5 % < P(U <= 3) = 7/252: k = 3, confidence 1 - 8/252.
        double[] subject = [100, 101, 102, 103, 104];
        double[] baseline = [100, 101, 102, 103, 104];

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Higher, noiseFloor: 0));
        double[] pairs = subject.SelectMany(s => baseline.Select(b => s / b)).Order().ToArray();

        Assert.Equal(pairs[2], interval.Low, 12);
        Assert.Equal(pairs[22], interval.High, 12);
        Assert.Equal(1 - 8.0 / 252, interval.Confidence, 12);
        Assert.False(interval.Better);
        Assert.False(interval.Worse);
        Assert.Equal("", interval.Mark);
    }

    [Fact]
    public void LowerIsBetter_OrientsTheRatiosLikeTheTable()
    {
        // Times: the subject's are half the baseline's, so it is about twice as good.
        double[] subject = [5, 5.1, 4.9, 5.2, 5];
        double[] baseline = [10, 10.2, 9.8, 10.1, 10];

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Lower, noiseFloor: 0));

        Assert.InRange(interval.Low, 1.8, 2.0);
        Assert.InRange(interval.High, 2.0, 2.2);
        Assert.True(interval.Better);
    }

    [Fact]
    public void AWorseSubject_IsMarkedWorse()
    {
        double[] subject = [50, 51, 52, 53, 54];
        double[] baseline = [100, 99, 101, 98, 102];

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Higher, noiseFloor: 0));

        Assert.True(interval.Worse);
        Assert.Equal("-", interval.Mark);
    }

    [Fact]
    public void ValuesUnderTheNoiseFloor_CountAsTheFloor()
    {
        // Allocation of 0.001 B against 0.3 B with a floor of 0.5: both are the floor, a tie in every pair.
        double[] subject = [0.001, 0.002, 0.001, 0.003];
        double[] baseline = [0.3, 0.31, 0.29, 0.3];

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Lower, noiseFloor: 0.5));

        Assert.Equal(1, interval.Low);
        Assert.Equal(1, interval.High);
        Assert.Equal("", interval.Mark);
    }

    [Fact]
    public void AZeroAgainstAFigure_WithoutAFloor_IsAnInfiniteBound()
    {
        double[] subject = [0, 0, 0, 0];
        double[] baseline = [3, 4, 5, 6];

        RatioInterval interval = Assert.IsType<RatioInterval>(RatioInterval.Of(subject, baseline, Better.Lower, noiseFloor: 0));

        Assert.True(double.IsPositiveInfinity(interval.Low));
        Assert.True(interval.Better);
    }
}
