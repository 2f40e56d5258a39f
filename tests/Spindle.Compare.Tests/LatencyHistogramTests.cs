using System;
using System.Diagnostics;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>
/// The latency histogram: every value is counted, a percentile reads back within 0.8% of the exact nearest-rank one over
/// the whole range of latencies a run sees, merging is the same as recording into one histogram, and clearing forgets.
/// </summary>
public sealed class LatencyHistogramTests
{
    private static long Ticks(double microseconds) => (long)(microseconds * Stopwatch.Frequency / 1_000_000.0);

    [Fact]
    public void Percentiles_ReadBackWithinTheBucketPrecision_OfTheExactOnes()
    {
        var random = new Random(7);
        var histogram = new LatencyHistogram();
        var exact = new double[100_000];
        for (int i = 0; i < exact.Length; i++)
        {
            // log-uniform from 1 us to 10 s: every power of two a run meets
            long ticks = Ticks(Math.Pow(10, random.NextDouble() * 7));
            histogram.Record(ticks);
            exact[i] = Pacer.ToMicroseconds(ticks);
        }
        Array.Sort(exact);
        Assert.Equal(exact.Length, histogram.Count);
        foreach (double percent in new[] { 0.0, 1, 25, 50, 90, 99, 99.9, 100 })
        {
            double expected = Stats.Percentile(exact, percent);
            double read = histogram.Percentile(percent);
            Assert.True(Math.Abs(read - expected) <= expected * 0.008 + Pacer.ToMicroseconds(1),
                $"p{percent}: {read} us read back, {expected} us exact.");
        }
        Assert.Equal(exact[0], histogram.MinMicroseconds);
        Assert.Equal(exact[^1], histogram.MaxMicroseconds);
        Assert.Equal(exact[^1], histogram.Percentile(100));
    }

    [Fact]
    public void SmallValues_AreExact_AndRanksAreNearestRank()
    {
        var histogram = new LatencyHistogram();
        for (long ticks = 1; ticks <= 100; ticks++)
        {
            histogram.Record(ticks);
        }
        Assert.Equal(Pacer.ToMicroseconds(50), histogram.Percentile(50));
        Assert.Equal(Pacer.ToMicroseconds(99), histogram.Percentile(99));
        Assert.Equal(Pacer.ToMicroseconds(100), histogram.Percentile(99.5));
        Assert.Equal(Pacer.ToMicroseconds(1), histogram.Percentile(0));
    }

    [Fact]
    public void Merging_CountsWhatRecordingIntoOneWould()
    {
        var one = new LatencyHistogram();
        var left = new LatencyHistogram();
        var right = new LatencyHistogram();
        for (int i = 0; i < 1_000; i++)
        {
            long ticks = Ticks(10 + i * 37 % 5_000);
            one.Record(ticks);
            (i % 3 == 0 ? left : right).Record(ticks);
        }
        left.Record(Ticks(3_000_000), 4);
        one.Record(Ticks(3_000_000), 4);
        var merged = new LatencyHistogram();
        merged.Add(left);
        merged.Add(right);
        merged.Add(new LatencyHistogram());
        Assert.Equal(one.Count, merged.Count);
        foreach (double percent in new[] { 0.0, 10, 50, 99, 99.9, 100 })
        {
            Assert.Equal(one.Percentile(percent), merged.Percentile(percent));
        }
        Assert.Equal(one.MinMicroseconds, merged.MinMicroseconds);
        Assert.Equal(one.MaxMicroseconds, merged.MaxMicroseconds);
    }

    [Fact]
    public void Clearing_ForgetsEveryValue()
    {
        var histogram = new LatencyHistogram();
        histogram.Record(Ticks(500), 3);
        histogram.Clear();
        Assert.Equal(0, histogram.Count);
        Assert.Equal(0, histogram.MaxMicroseconds);
        Assert.Throws<InvalidOperationException>(() => histogram.Percentile(50));
        histogram.Record(Ticks(20));
        Assert.Equal(Pacer.ToMicroseconds(Ticks(20)), histogram.Percentile(50));
    }

    [Fact]
    public void OutOfRangeValues_LandInTheEndBuckets_AndBadPercentsThrow()
    {
        var histogram = new LatencyHistogram();
        histogram.Record(-5);
        histogram.Record(long.MaxValue);
        Assert.Equal(2, histogram.Count);
        Assert.Equal(0, histogram.Percentile(50));
        Assert.Equal(Pacer.ToMicroseconds(long.MaxValue), histogram.Percentile(100));
        Assert.Throws<ArgumentOutOfRangeException>(() => histogram.Percentile(101));
        Assert.Throws<ArgumentOutOfRangeException>(() => histogram.Percentile(double.NaN));
    }
}
