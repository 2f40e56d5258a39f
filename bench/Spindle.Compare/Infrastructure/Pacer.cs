using System;
using System.Diagnostics;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

/// <summary>Waits until a <see cref="Stopwatch"/> timestamp: sleeps in 1 ms steps while far away, then spins.</summary>
internal static class Pacer
{
    /// <summary>Never sleep: spin until the deadline (precise, but burns the calling thread's core).</summary>
    public static readonly TimeSpan SpinOnly = TimeSpan.MaxValue;

    public static long Ticks(TimeSpan span) => (long)(span.TotalSeconds * Stopwatch.Frequency);

    public static long TicksFromMicroseconds(double microseconds) => (long)(microseconds * Stopwatch.Frequency / 1_000_000.0);

    public static double ToMilliseconds(long ticks) => ticks * 1000.0 / Stopwatch.Frequency;

    public static double ToMicroseconds(long ticks) => ticks * 1_000_000.0 / Stopwatch.Frequency;

    public static double ToNanoseconds(long ticks) => ticks * 1_000_000_000.0 / Stopwatch.Frequency;

    /// <summary>
    /// Returns once <see cref="Stopwatch.GetTimestamp"/> reaches <paramref name="deadline"/>. While more than
    /// <paramref name="sleepAbove"/> remains the thread sleeps for 1 ms at a time (which may overshoot by a fraction of a
    /// millisecond); the rest is spun.
    /// </summary>
    public static void WaitUntil(long deadline, TimeSpan sleepAbove)
    {
        long sleepAboveTicks = sleepAbove == TimeSpan.MaxValue ? long.MaxValue : Ticks(sleepAbove);
        while (true)
        {
            long remaining = deadline - Stopwatch.GetTimestamp();
            if (remaining <= 0)
            {
                return;
            }
            if (remaining > sleepAboveTicks)
            {
                Thread.Sleep(1);
            }
            else
            {
                Thread.SpinWait(8);
            }
        }
    }
}
