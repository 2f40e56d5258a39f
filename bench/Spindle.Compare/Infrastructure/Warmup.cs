using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// Warm-up before the timed run. It has to last long enough for tiered compilation to promote the hot methods of the
/// pool and the workload (call counting starts only after ~100 ms without new tier-0 code; with TieredPGO there is an
/// instrumented tier in between). A single short round would leave Spindle, which is JIT-compiled, measured at tier 0
/// against the precompiled built-in pool.
/// </summary>
/// <remarks>
/// <para>A fixed length is not enough: the background compilations compete with the workload for the cores, so how
/// far tiering has got after a given time depends on how busy the machine is. Measured on 2 cores with
/// <c>queue-drain mixed/no-ec</c> after the former fixed 500 ms: quiet, Spindle's measured round compiled 22-114 methods
/// (3.5 after 3 s of warm-up) and read 62-111 ms (54-79 after 3 s; the built-in pool 126-224 and 70-107 ms); beside two
/// busy processes, 58-212 methods while the background compiler was still at work on the pool's hot paths, and
/// 118-316 ms against 75-109 ms after 3 s. So the rounds go on past the minimum until the compiler has settled (a
/// stretch of rounds of at least <see cref="SettleWindow"/> that compiled fewer than <see cref="SettledCompilations"/>
/// methods) or until <see cref="Maximum"/>, and the pause before the timed run lasts until the compiler has been idle
/// for <see cref="QuietFor"/>.</para>
/// </remarks>
internal static class Warmup
{
    /// <summary>
    /// <c>SPINDLE_COMPARE_WARMUP_TRACE=1</c> prints each warm-up round's end time and the process's count of compiled
    /// methods to stderr, and the length of the pause after the rounds: the rounds after which the count stops growing
    /// are the ones a scenario's warm-up must cover.
    /// </summary>
    private static readonly bool s_trace = Environment.GetEnvironmentVariable("SPINDLE_COMPARE_WARMUP_TRACE") == "1";

    /// <summary>The shortest warm-up (500 ms, or <c>SPINDLE_COMPARE_WARMUP_MS</c>).</summary>
    public static TimeSpan Minimum { get; } = FromEnvironment("SPINDLE_COMPARE_WARMUP_MS", 500);

    /// <summary>
    /// The longest warm-up of a scenario that does not name its own (3 s, or <c>SPINDLE_COMPARE_WARMUP_MAX_MS</c>): the
    /// rounds stop here even if the compiler has not settled.
    /// </summary>
    public static TimeSpan Maximum { get; } = FromEnvironment("SPINDLE_COMPARE_WARMUP_MAX_MS", 3_000);

    /// <summary>
    /// Fewer methods than this compiled over a <see cref="SettleWindow"/> of rounds: tiered compilation has promoted
    /// the workload's hot methods. Steady rounds still compile a few (a timer's callback, an on-stack replacement, the
    /// per-round code of the comparison program itself reaching its call counts).
    /// </summary>
    private const int SettledCompilations = 10;

    /// <summary>The stretch of rounds (at least one whole round) whose compilations are counted: 100 ms.</summary>
    private static readonly TimeSpan SettleWindow = TimeSpan.FromMilliseconds(100);

    /// <summary>
    /// The pause before the timed run lasts at least this long (50 ms: the pool's threads park, a starvation boost decays
    /// in 10-20 ms)...
    /// </summary>
    private static readonly TimeSpan MinimumPause = TimeSpan.FromMilliseconds(50);

    /// <summary>...and until no method has been compiled for this long (50 ms)...</summary>
    private static readonly TimeSpan QuietFor = TimeSpan.FromMilliseconds(50);

    /// <summary>...or until this long (1 s) has passed.</summary>
    private static readonly TimeSpan MaximumPause = TimeSpan.FromSeconds(1);

    /// <summary>
    /// Repeats <paramref name="round"/> (a smaller run of the measured workload) at least twice, for at least
    /// <see cref="Minimum"/> and on until the compiler has settled (or <see cref="Maximum"/>), then pauses until the
    /// background compilations have finished.
    /// </summary>
    public static void Repeat(Action round) => Repeat(round, Minimum, Maximum);

    /// <summary>
    /// As <see cref="Repeat(Action)"/>, for at least <paramref name="minimum"/> (or <see cref="Minimum"/> if that is
    /// longer): for workloads whose hot paths take longer to reach their final tier.
    /// </summary>
    public static void Repeat(Action round, TimeSpan minimum) => Repeat(round, minimum, Maximum);

    /// <summary>
    /// As <see cref="Repeat(Action, TimeSpan)"/>, with a longest warm-up of its own: for workloads of much code, such
    /// as a web server's request path, whose tiering ends at a time that depends on how many of its methods come
    /// precompiled (the framework's do; Spindle's do not).
    /// </summary>
    public static void RepeatUntilJitSettles(Action round, TimeSpan minimum, TimeSpan maximum) =>
        Repeat(round, minimum, maximum);

    /// <summary>
    /// The rounds: at least two, for at least <paramref name="minimum"/> (or <see cref="Minimum"/>), and on until a
    /// window of rounds compiles few methods or <paramref name="maximum"/> (at least the minimum) has passed; then the
    /// pause.
    /// </summary>
    private static void Repeat(Action round, TimeSpan minimum, TimeSpan maximum)
    {
        if (minimum < Minimum)
        {
            minimum = Minimum;
        }
        if (maximum < minimum)
        {
            maximum = minimum;
        }
        var elapsed = Stopwatch.StartNew();
        int rounds = 0;
        long compiled = JitInfo.GetCompiledMethodCount();
        long windowCompiled = compiled;
        TimeSpan windowStart = TimeSpan.Zero;
        bool settled = false;
        while (true)
        {
            round();
            rounds++;
            compiled = JitInfo.GetCompiledMethodCount();
            TimeSpan now = elapsed.Elapsed;
            if (now - windowStart >= SettleWindow)
            {
                settled = compiled - windowCompiled < SettledCompilations;
                windowCompiled = compiled;
                windowStart = now;
            }
            if (s_trace)
            {
                Console.Error.WriteLine($"warm-up round {rounds}: {now.TotalMilliseconds:F0} ms, {compiled} methods compiled");
            }
            if (rounds >= 2 && now >= minimum && (settled || now >= maximum))
            {
                break;
            }
        }
        PauseUntilCompilerIdle();
        ProcessMeter.MarkMeasuredStart();
    }

    /// <summary>
    /// Waits at least <see cref="MinimumPause"/>, until no method has been compiled for <see cref="QuietFor"/> (the
    /// background compiler has emptied its queue), or <see cref="MaximumPause"/>.
    /// </summary>
    private static void PauseUntilCompilerIdle()
    {
        var paused = Stopwatch.StartNew();
        long compiled = JitInfo.GetCompiledMethodCount();
        TimeSpan lastCompilation = TimeSpan.Zero;
        while (true)
        {
            Thread.Sleep(10);
            TimeSpan now = paused.Elapsed;
            long count = JitInfo.GetCompiledMethodCount();
            if (count != compiled)
            {
                compiled = count;
                lastCompilation = now;
            }
            if ((now >= MinimumPause && now - lastCompilation >= QuietFor) || now >= MaximumPause)
            {
                if (s_trace)
                {
                    Console.Error.WriteLine($"warm-up pause: {now.TotalMilliseconds:F0} ms, {compiled} methods compiled");
                }
                return;
            }
        }
    }

    private static TimeSpan FromEnvironment(string variable, int defaultMilliseconds) =>
        TimeSpan.FromMilliseconds(int.TryParse(Environment.GetEnvironmentVariable(variable), NumberStyles.None,
            CultureInfo.InvariantCulture, out int ms) ? ms : defaultMilliseconds);
}
