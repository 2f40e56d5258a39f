using System;
using System.Diagnostics;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Timers;

/// <summary>Conversions between the timer API's TimeSpan and millisecond values and Stopwatch ticks, with their range checks.</summary>
internal sealed partial class PoolTimer
{
    /// <summary>A period in Stopwatch ticks (zero or negative: none) as whole wheel ticks (milliseconds), rounded up.</summary>
    private static uint PeriodToMilliseconds(long periodTicks)
    {
        if (periodTicks <= 0)
        {
            return 0;
        }
        long ms = (periodTicks + TimerService.s_ticksPerWheelTick - 1) / TimerService.s_ticksPerWheelTick;
        Debug.Assert(ms <= MaxMilliseconds, "Periods are validated to at most MaxMilliseconds.");
        return (uint)ms;
    }

    /// <summary>Converts a due time or period to Stopwatch ticks (-1: infinite), validating it as <see cref="Timer"/> does.</summary>
    /// <remarks>
    /// <para>A value from zero to the maximum keeps its sub-millisecond precision. Outside that range the value is judged
    /// as <see cref="Timer"/> and <see cref="TimeProvider.System"/> judge it, on its whole milliseconds (truncated toward
    /// zero): a fraction of a millisecond below zero is zero, anything from -1 ms down to (not including) -2 ms is infinite,
    /// and a fraction above the maximum is the maximum. So whatever those accept, this accepts with the same meaning: a
    /// <see cref="CancellationTokenSource"/> or <see cref="PeriodicTimer"/> built on the pool's <see cref="TimeProvider"/>
    /// validates its delay by that rule and then hands the TimeSpan over unchanged.</para>
    /// <para>Small enough to inline: the other paths live in <see cref="OutOfRangeToStopwatchTicks"/>, so the hot path has
    /// no frame to set up for them.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    internal static long ToStopwatchTicks(TimeSpan value, string paramName)
    {
        long ticks = value.Ticks;
        if ((ulong)ticks <= MaxMilliseconds * TimeSpan.TicksPerMillisecond)
        {
            return TimeSpanTicksToStopwatchTicks(ticks);
        }
        return OutOfRangeToStopwatchTicks(value, paramName);
    }

    /// <summary>A value below zero or above the maximum, judged on its whole milliseconds (see <see cref="ToStopwatchTicks"/>).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static long OutOfRangeToStopwatchTicks(TimeSpan value, string paramName)
    {
        long milliseconds = (long)value.TotalMilliseconds;
        if (milliseconds == -1)
        {
            return -1;
        }
        if (milliseconds == 0)
        {
            return 0;
        }
        if (milliseconds == MaxMilliseconds)
        {
            return TimeSpanTicksToStopwatchTicks(MaxMilliseconds * TimeSpan.TicksPerMillisecond);
        }
        ThrowOutOfRange(value, paramName);
        return 0;
    }

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowOutOfRange(TimeSpan value, string paramName) =>
        throw new ArgumentOutOfRangeException(paramName, value, value < TimeSpan.Zero
            ? "The time must be non-negative or Timeout.InfiniteTimeSpan (whole milliseconds from -1)."
            : $"The time must be at most {MaxMilliseconds} ms.");

    // Stopwatch ticks per TimeSpan tick when that is a whole number (100 on Linux, 1 where the frequency is 10 MHz).
    private static readonly long s_stopwatchTicksPerTimeSpanTick =
        Stopwatch.Frequency % TimeSpan.TicksPerSecond == 0 ? Stopwatch.Frequency / TimeSpan.TicksPerSecond : 0;

    /// <summary>Converts a non-negative TimeSpan tick count (at most about 49.7 days) to Stopwatch ticks, rounding down.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    internal static long TimeSpanTicksToStopwatchTicks(long ticks) =>
        s_stopwatchTicksPerTimeSpanTick != 0
            ? ticks * s_stopwatchTicksPerTimeSpanTick // a multiplication, not a 128-bit division per timer
            : ScaleTimeSpanTicks(ticks);

    /// <summary>
    /// Converts a non-negative TimeSpan tick count (at most about 49.7 days) to Stopwatch ticks, rounding up: a delay
    /// measured with the result is never shorter than the TimeSpan (the same as the rounding-down conversion wherever a
    /// TimeSpan tick is a whole number of Stopwatch ticks, as on Linux and Windows).
    /// </summary>
    internal static long TimeSpanTicksToStopwatchTicksRoundedUp(long ticks)
    {
        if (s_stopwatchTicksPerTimeSpanTick != 0)
        {
            return ticks * s_stopwatchTicksPerTimeSpanTick;
        }
        Int128 scaled = (Int128)ticks * Stopwatch.Frequency;
        return (long)((scaled + TimeSpan.TicksPerSecond - 1) / TimeSpan.TicksPerSecond);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static long ScaleTimeSpanTicks(long ticks) =>
        ticks < long.MaxValue / Stopwatch.Frequency
            ? ticks * Stopwatch.Frequency / TimeSpan.TicksPerSecond
            : (long)((Int128)ticks * Stopwatch.Frequency / TimeSpan.TicksPerSecond);

    /// <summary>The longest due time or period, as for <see cref="Timer"/>.</summary>
    internal const long MaxMilliseconds = 0xFFFFFFFE;
}
