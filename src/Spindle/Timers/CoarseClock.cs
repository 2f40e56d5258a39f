using System;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;

namespace Spindle.Timers;

/// <summary>
/// A cheap upper bound of <see cref="Stopwatch.GetTimestamp"/>, for placing long timers on the wheel: on Linux,
/// <see cref="Environment.TickCount64"/> reads the kernel's coarse monotonic clock (<c>CLOCK_MONOTONIC_COARSE</c>, a
/// memory read in the vDSO, about 5 ns here) where <see cref="Stopwatch"/> reads the precise one (<c>CLOCK_MONOTONIC</c>,
/// about 25 ns in a VM). Both count from the same origin; the coarse one is the precise one as of the kernel's last
/// timekeeping update, normally made every tick (its resolution), and TickCount64 truncates it to milliseconds.
/// </summary>
/// <remarks>
/// <para>Margin: five ticks plus one millisecond (21 ms with the usual 250 Hz kernels). Measured on a loaded 2-core VM,
/// the coarse clock trailed by at most one tick plus 1.06 ms (5.06 ms); the kernel itself lets the timekeeping fall up
/// to five ticks behind before another CPU takes it over, which is what a virtual CPU held by its host can cause. Used
/// only for timers due in <see cref="MinDelayTicks"/> or more (200 margins, so under 0.5% of the delay: about 4.2 s at
/// 250 Hz), which may fire up to the margin later than one placed with the precise clock, and never early. Elsewhere
/// (other systems, or a clock whose resolution or origin is not as expected) it is off and every timer reads the
/// precise clock.</para>
/// <para>The pool's timer thread checks the bound each time it wakes (<see cref="Verify"/>) and switches the coarse clock
/// off for good if it ever trails by more than the margin.</para>
/// </remarks>
internal static unsafe partial class CoarseClock
{
    private const int ClockMonotonicCoarse = 6; // Linux's clock id
    private static readonly long s_ticksPerMillisecond = Stopwatch.Frequency / 1000;

    // Written by the type initializer and, only from true to false, by Verify (any thread); read by every timer placement.
    private static volatile bool s_enabled;

    /// <summary>How far the coarse clock may trail the precise one, in Stopwatch ticks (0 when the clock is off).</summary>
    internal static readonly long MarginTicks;

    /// <summary>The shortest delay placed with the coarse clock, in Stopwatch ticks: 200 margins, and at least two seconds.</summary>
    internal static readonly long MinDelayTicks = long.MaxValue;

    static CoarseClock()
    {
        if (!OperatingSystem.IsLinux() || Stopwatch.Frequency != 1_000_000_000)
        {
            return; // TickCount64 is a different clock elsewhere (Windows: the interrupt time; macOS: another origin)
        }
        TimeSpec resolution;
        try
        {
            if (ClockGetResolution(ClockMonotonicCoarse, &resolution) != 0)
            {
                return;
            }
        }
        catch (Exception e) when (e is DllNotFoundException or EntryPointNotFoundException)
        {
            return;
        }
        long resolutionTicks = (long)resolution.Seconds * Stopwatch.Frequency + resolution.Nanoseconds;
        if (resolutionTicks <= 0 || resolutionTicks > 10 * s_ticksPerMillisecond)
        {
            return; // not a kernel tick of 100 Hz or faster: leave it alone
        }
        long margin = 5 * resolutionTicks + s_ticksPerMillisecond;
        // Same origin? The coarse reading must lie within the margin below the precise readings around it.
        long before = Stopwatch.GetTimestamp();
        long coarse = Environment.TickCount64 * s_ticksPerMillisecond;
        long after = Stopwatch.GetTimestamp();
        if (coarse > after || coarse + margin < before)
        {
            return;
        }
        MarginTicks = margin;
        MinDelayTicks = Math.Max(2 * Stopwatch.Frequency, 200 * margin);
        s_enabled = true;
    }

    /// <summary>Whether long timers are placed with the coarse clock.</summary>
    internal static bool IsEnabled => s_enabled;

    /// <summary>
    /// Reads the coarse clock: <paramref name="lower"/> is at or before the precise clock's present value and
    /// <paramref name="upper"/> at or after it. False (use the precise clock) when the coarse clock is off.
    /// </summary>
    internal static bool TryRead(out long lower, out long upper)
    {
        if (!s_enabled)
        {
            lower = upper = 0;
            return false;
        }
        lower = Environment.TickCount64 * s_ticksPerMillisecond;
        upper = lower + MarginTicks;
        return true;
    }

    /// <summary>
    /// Checks the bound against a precise reading taken just now, and switches the coarse clock off if it trails by more
    /// than the margin twice in a row (once could be this thread being preempted between the two readings).
    /// </summary>
    internal static void Verify()
    {
        if (!s_enabled)
        {
            return;
        }
        for (int attempt = 0; attempt < 2; attempt++)
        {
            long coarse = Environment.TickCount64 * s_ticksPerMillisecond;
            long precise = Stopwatch.GetTimestamp(); // after the coarse reading: precise - coarse over-estimates the lag
            if (precise - coarse <= MarginTicks)
            {
                return;
            }
        }
        s_enabled = false;
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct TimeSpec
    {
        public nint Seconds;
        public nint Nanoseconds;
    }

    [LibraryImport("libc", EntryPoint = "clock_getres")]
    private static partial int ClockGetResolution(int clockId, TimeSpec* resolution);
}
