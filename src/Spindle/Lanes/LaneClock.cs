using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace Spindle.Lanes;

/// <summary>
/// The clock of the lanes' minimum share and of a lane turn's end: <see cref="Stopwatch.GetTimestamp"/> ticks. The
/// bound a lower class is promised (a start at least every <see cref="LaneSet.StarvationIntervalMs"/>, plus the length
/// of the items in progress) is a few milliseconds, so the clock must resolve well below one: on Linux
/// <see cref="System.Environment.TickCount64"/> reads a coarse clock that steps every 4 ms, which let a Low class wait
/// 12 ms and more. It is read only while lane work competes (a turn's end, a dispatch that finds lane work), where a
/// vDSO clock read costs tens of nanoseconds.
/// </summary>
internal static class LaneClock
{
    /// <summary>How long a turn keeps its lane after it has seen work of a lower class waiting (checked after each item): 1 ms.</summary>
    public static readonly long TurnYield = FromMilliseconds(1);

    /// <summary>Now, in the clock's ticks.</summary>
    public static long Now
    {
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        get => Stopwatch.GetTimestamp();
    }

    /// <summary><paramref name="milliseconds"/> in the clock's ticks.</summary>
    public static long FromMilliseconds(long milliseconds) => milliseconds * Stopwatch.Frequency / 1000;
}
