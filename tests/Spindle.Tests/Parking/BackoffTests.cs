using System;
using Spindle.Parking;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// <see cref="Backoff"/>: attempt k spins a count in [2^(k-1), 2^k), capped at <see cref="Backoff.MaxExponent"/>, and
/// attempt 0 spins not at all.
/// </summary>
public sealed class BackoffTests
{
    private static uint[] Seeds()
    {
        var random = new Random(20240611);
        var seeds = new uint[1_000];
        seeds[0] = 0;
        seeds[1] = 1;
        seeds[2] = uint.MaxValue;
        seeds[3] = 0x80000000;
        for (int i = 4; i < seeds.Length; i++)
        {
            seeds[i] = (uint)random.NextInt64(0, 1L << 32);
        }
        return seeds;
    }

    [Fact]
    public void AttemptZero_AlwaysSpinsZero_ForEverySeedAndState()
    {
        // Regression test for the runtime's bug: random >> (32 - attempt) shifted by 32, which C# masks to 0, so
        // attempt 0 spun a huge random count.
        foreach (uint seed in Seeds())
        {
            var backoff = new Backoff(seed);
            for (int i = 0; i < 50; i++)
            {
                Assert.Equal(0, backoff.SpinCount(0));
                backoff.SpinCount(1 + i % Backoff.MaxExponent); // advance the generator between checks
            }
        }
    }

    [Theory]
    [InlineData(-1)]
    [InlineData(-32)]
    [InlineData(int.MinValue)]
    public void NegativeAttempts_SpinZero(int attempt)
    {
        var backoff = new Backoff(12345);
        Assert.Equal(0, backoff.SpinCount(attempt));
    }

    [Fact]
    public void AttemptK_SpinsInItsRange_ForEverySeed()
    {
        foreach (uint seed in Seeds())
        {
            var backoff = new Backoff(seed);
            for (int round = 0; round < 4; round++)
            {
                for (int k = 1; k <= Backoff.MaxExponent; k++)
                {
                    int count = backoff.SpinCount(k);
                    Assert.InRange(count, 1 << (k - 1), (1 << k) - 1);
                }
            }
        }
    }

    [Theory]
    [InlineData(Backoff.MaxExponent + 1)]
    [InlineData(31)]
    [InlineData(32)]
    [InlineData(33)]
    [InlineData(64)]
    [InlineData(int.MaxValue)]
    public void AttemptsAboveTheMaximum_StayInTheMaximumsRange(int attempt)
    {
        foreach (uint seed in Seeds())
        {
            var backoff = new Backoff(seed);
            int count = backoff.SpinCount(attempt);
            Assert.InRange(count, 1 << (Backoff.MaxExponent - 1), (1 << Backoff.MaxExponent) - 1);
        }
    }

    [Fact]
    public void Counts_AreRandomised_WithinTheRange()
    {
        // Workers that start searching together must not spin in lock step: the counts vary with the draw and the seed.
        var backoff = new Backoff(7);
        var seen = new System.Collections.Generic.HashSet<int>();
        for (int i = 0; i < 200; i++)
        {
            seen.Add(backoff.SpinCount(Backoff.MaxExponent));
        }
        Assert.True(seen.Count > 50, $"Only {seen.Count} distinct counts in 200 draws.");

        var a = new Backoff(1);
        var b = new Backoff(2);
        int same = 0;
        for (int i = 0; i < 100; i++)
        {
            same += a.SpinCount(Backoff.MaxExponent) == b.SpinCount(Backoff.MaxExponent) ? 1 : 0;
        }
        Assert.True(same < 20, $"Two seeds drew the same count {same} times in 100.");
    }

    [Fact]
    public void Spin_ReturnsForEveryAttempt()
    {
        var backoff = new Backoff(99);
        for (int attempt = -1; attempt <= Backoff.MaxExponent + 2; attempt++)
        {
            backoff.Spin(attempt);
        }
    }
}
