using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Compare.Infrastructure;

namespace Spindle.Compare.Scenarios;

/// <summary>The sizes and the report of the <c>efficiency</c> scenario (see <see cref="EfficiencyScenario"/>).</summary>
internal static class EfficiencyPlan
{
    /// <summary>Steps per transaction.</summary>
    public const int Steps = 3;

    /// <summary>The bounds of a step's CPU work, in microseconds (log-uniform between them).</summary>
    public const double ShortestStepUs = 5, LongestStepUs = 5_000;

    /// <summary>The numbers of transactions in flight, in the order they run.</summary>
    public static readonly int[] Levels = [1, 2, 4, 16, 64, 256];

    /// <summary>The metric of the median efficiency at <paramref name="level"/> in flight.</summary>
    public static string MetricName(int level) => $"efficiency @{level}";

    /// <summary>Every metric, in report order: a median per level, the tail with one in flight, the CPU per work.</summary>
    public static MetricInfo[] Metrics()
    {
        var metrics = new List<MetricInfo>();
        foreach (int level in Levels)
        {
            metrics.Add(new MetricInfo(MetricName(level), "%", Better.Higher));
        }
        metrics.Add(new MetricInfo("p5 efficiency @1", "%", Better.Higher));
        metrics.Add(new MetricInfo("cpu per work", "x", Better.Lower));
        return metrics.ToArray();
    }

    /// <summary>Transactions per level: 2,000 with <c>--full</c>; the quick form's 240, and at least two waves of the level.</summary>
    public static int TransactionsAt(int level, bool full) => full ? 2_000 : Math.Max(240, 2 * level);

    /// <summary>A step's length in microseconds for a uniform draw <paramref name="u"/> in [0, 1]: log-uniform between the bounds.</summary>
    public static double LogUniformUs(double u) =>
        Math.Exp(Math.Log(ShortestStepUs) + u * (Math.Log(LongestStepUs) - Math.Log(ShortestStepUs)));

    /// <summary>Iterations for <paramref name="microseconds"/> of work at <paramref name="iterationsPerUs"/>, at least one.</summary>
    public static int Iterations(double microseconds, double iterationsPerUs) => Math.Max(1, (int)Math.Round(microseconds * iterationsPerUs));
}

/// <summary>A step's CPU work: an arithmetic loop the JIT cannot drop, sized in iterations from a calibration.</summary>
internal static class StepWork
{
    private static long s_sink;

    /// <summary>Runs the loop <paramref name="iterations"/> times (compiled fully optimised at once, so its speed never changes tier).</summary>
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    public static void Spin(int iterations)
    {
        ulong x = (ulong)iterations | 1;
        for (int i = 0; i < iterations; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        Volatile.Write(ref s_sink, (long)x);
    }

    /// <summary>Keeps <paramref name="scratch"/> alive to here, so its allocation is not elided.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Keep(byte[] scratch) => Volatile.Write(ref s_sink, s_sink + scratch.Length);

    /// <summary>
    /// Iterations of <see cref="Spin"/> per microsecond of the calling thread's CPU time: the best of several timed
    /// runs (the least disturbed one).
    /// </summary>
    public static double Calibrate()
    {
        const int Iterations = 200_000;
        Spin(Iterations); // compiled before it is timed
        double best = 0;
        for (int attempt = 0; attempt < 7; attempt++)
        {
            long start = CpuClock.CurrentThreadNanoseconds();
            Spin(Iterations);
            long elapsedNs = Math.Max(1, CpuClock.CurrentThreadNanoseconds() - start);
            best = Math.Max(best, Iterations * 1_000.0 / elapsedNs);
        }
        return best;
    }
}
