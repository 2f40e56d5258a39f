using System.Runtime.CompilerServices;

namespace Spindle.Primitives;

/// <summary>
/// How the pool's rare paths are compiled: <c>[MethodImpl(RarePath.Compile)]</c> marks a method that the pool runs a few
/// times per burst, per idle spell or per monitor tick (a worker's look outside, the end of a peer watch, a timer
/// assist, the timer thread's search for the next slot, the stall monitor's tick and arming, a timed park), and the
/// path a thread takes once in its life (its start, its worker's construction and first steps, its retirement and exit,
/// the monitor's judgement that adds it).
/// </summary>
/// <remarks>
/// <para>Tiered compilation starts every method unoptimised and recompiles it once it has been called 30 times (twice
/// with dynamic PGO: an instrumented tier, then the final one). A method called a few times per burst reaches those
/// counts at an arbitrary later moment, in the middle of whatever the pool is then doing, and the background compiler
/// then holds a core for about a millisecond per method. In a process of two cores that is the core a worker needed:
/// a burst of timers measured after several warm-up rounds still compiled 10-20 of the pool's methods (the timer
/// wheel's slot search, the peer watch's end, the monitor's tick) while it ran, and the items queued meanwhile waited
/// behind the compiler for 1-3 ms. A burst of blocked work is the same on a larger scale: it starts a thread per item,
/// so the whole thread-start path crossed its thirtieth call in the middle of the first such burst, and 200 items of a
/// 100 ms sleep met some 330 compilations (about 150 ms of a core) while their threads were being started.</para>
/// <para>A method so marked is compiled once, fully optimised, at its first call (no unoptimised tier, no later
/// recompilation; it is also left out of ReadyToRun images), so the pool's behaviour does not change when such a path
/// has been taken for the thirtieth time. The methods the workers run per item are not marked: they reach their final
/// tier within the first milliseconds of work, with the profile dynamic PGO gathers for them.</para>
/// </remarks>
internal static class RarePath
{
    /// <summary>The <see cref="MethodImplOptions"/> of a rare path: compiled fully optimised at its first call.</summary>
    public const MethodImplOptions Compile = MethodImplOptions.AggressiveOptimization;
}
