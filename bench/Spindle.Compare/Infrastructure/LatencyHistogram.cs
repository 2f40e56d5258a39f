using System;
using System.Diagnostics;
using System.Numerics;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// Latencies (<see cref="Stopwatch"/> ticks) counted in log-linear buckets, as HdrHistogram and wrk count them: every
/// value below 128 ticks has a bucket of its own, and each power of two above is cut into 64 buckets, so a bucket is
/// never wider than 1/64 of its lower bound. Every value recorded is counted (there is no cap on how many), recording
/// never allocates, and a percentile read back is within 0.8% of the exact one (the bucket's midpoint, clamped to the
/// smallest and largest values recorded; the 100th is the largest value itself). One writer at a time: a histogram belongs to the thread that records into it,
/// and is merged into another with <see cref="Add"/> once that thread has finished.
/// </summary>
internal sealed class LatencyHistogram
{
    private const int SubBucketBits = 6;
    private const int SubBuckets = 1 << SubBucketBits;

    /// <summary>Values below this have a bucket each.</summary>
    private const int Exact = 2 * SubBuckets;

    /// <summary>Powers of two above <see cref="Exact"/> with buckets: up to 2^47 ticks (39 hours of nanosecond ticks).</summary>
    private const int Shifts = 40;

    private readonly long[] _counts = new long[Exact + Shifts * SubBuckets];
    private long _min = long.MaxValue;
    private long _max;

    /// <summary>How many values were recorded.</summary>
    public long Count { get; private set; }

    /// <summary>The largest value recorded, in microseconds; 0 when none was.</summary>
    public double MaxMicroseconds => Pacer.ToMicroseconds(_max);

    /// <summary>The smallest value recorded, in microseconds; 0 when none was.</summary>
    public double MinMicroseconds => Count == 0 ? 0 : Pacer.ToMicroseconds(_min);

    /// <summary>Counts one value; a negative one counts as 0, one beyond the last bucket in the last bucket.</summary>
    public void Record(long ticks) => Record(ticks, 1);

    /// <summary>Counts <paramref name="times"/> values of <paramref name="ticks"/> each.</summary>
    public void Record(long ticks, long times)
    {
        if (times <= 0)
        {
            return;
        }
        ticks = Math.Max(0, ticks);
        _counts[BucketOf(ticks)] += times;
        Count += times;
        _min = Math.Min(_min, ticks);
        _max = Math.Max(_max, ticks);
    }

    /// <summary>Adds every value counted in <paramref name="other"/> to this one.</summary>
    public void Add(LatencyHistogram other)
    {
        if (other.Count == 0)
        {
            return;
        }
        for (int i = 0; i < _counts.Length; i++)
        {
            _counts[i] += other._counts[i];
        }
        Count += other.Count;
        _min = Math.Min(_min, other._min);
        _max = Math.Max(_max, other._max);
    }

    /// <summary>Forgets every value.</summary>
    public void Clear()
    {
        Array.Clear(_counts);
        Count = 0;
        _min = long.MaxValue;
        _max = 0;
    }

    /// <summary>
    /// The <paramref name="percent"/>th percentile in microseconds, by nearest rank (as <see cref="Stats.Percentile"/>
    /// reads a sorted array): the value whose rank is ceil(percent / 100 * <see cref="Count"/>). Throws when nothing was
    /// recorded.
    /// </summary>
    public double Percentile(double percent)
    {
        if (Count == 0)
        {
            throw new InvalidOperationException("No latency was recorded.");
        }
        if (percent is < 0 or > 100 || double.IsNaN(percent))
        {
            throw new ArgumentOutOfRangeException(nameof(percent), percent, "A percentile is between 0 and 100.");
        }
        long rank = Math.Clamp((long)Math.Ceiling(percent / 100.0 * Count), 1, Count);
        if (rank == Count)
        {
            return MaxMicroseconds; // the top rank is the largest value, which the histogram keeps exactly
        }
        long seen = 0;
        for (int i = 0; i < _counts.Length; i++)
        {
            seen += _counts[i];
            if (seen >= rank)
            {
                return Pacer.ToMicroseconds(Math.Clamp(Midpoint(i), _min, _max));
            }
        }
        throw new UnreachableException("The buckets hold fewer values than the count.");
    }

    private static int BucketOf(long ticks)
    {
        if (ticks < Exact)
        {
            return (int)ticks;
        }
        int shift = 63 - BitOperations.LeadingZeroCount((ulong)ticks) - SubBucketBits;
        if (shift > Shifts)
        {
            return Exact + Shifts * SubBuckets - 1;
        }
        return Exact + (shift - 1) * SubBuckets + (int)(ticks >> shift) - SubBuckets;
    }

    private static long Midpoint(int bucket)
    {
        if (bucket < Exact)
        {
            return bucket;
        }
        int shift = (bucket - Exact) / SubBuckets + 1;
        long low = (long)((bucket - Exact) % SubBuckets + SubBuckets) << shift;
        return low + (1L << (shift - 1));
    }
}
