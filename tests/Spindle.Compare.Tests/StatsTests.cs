using System;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The comparison program's fairness index of shares (Stats.JainIndex).</summary>
public sealed class StatsTests
{
    [Fact]
    public void EqualShares_AreFair() => Assert.Equal(1.0, Stats.JainIndex([5, 5, 5, 5]), 12);

    [Fact]
    public void OnePartyTakingEverything_ReadsOneOverTheParties() => Assert.Equal(0.25, Stats.JainIndex([0, 12, 0, 0]), 12);

    [Fact]
    public void AFewPartiesTakingMost_ReadsLow()
    {
        // 150 of 1,000 parties with 2,100 each, the rest with 17 each: the shape of an unfair pool.
        double[] shares = new double[1_000];
        for (int i = 0; i < shares.Length; i++)
        {
            shares[i] = i < 150 ? 2_100 : 17;
        }
        double index = Stats.JainIndex(shares);
        Assert.InRange(index, 0.16, 0.18);
    }

    [Fact]
    public void TwoToOne_IsNinetyPercent() => Assert.Equal(0.9, Stats.JainIndex([2, 1]), 12);

    [Fact]
    public void NoShares_OrOnlyZeros_AreFair()
    {
        Assert.Equal(1.0, Stats.JainIndex([]));
        Assert.Equal(1.0, Stats.JainIndex([0, 0, 0]));
    }

    [Fact]
    public void ANegativeOrNaNShare_IsRefused()
    {
        Assert.Throws<ArgumentException>(() => Stats.JainIndex([1, -1]));
        Assert.Throws<ArgumentException>(() => Stats.JainIndex([1, double.NaN]));
    }
}
