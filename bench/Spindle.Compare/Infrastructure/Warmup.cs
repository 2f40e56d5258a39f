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
internal static class Warmup
{
    /// <summary>
    /// <c>SPINDLE_COMPARE_WARMUP_TRACE=1</c> prints each warm-up round's end time and the process's count of compiled
    /// methods to stderr: the rounds after which the count stops growing are the ones a scenario's minimum must cover.
    /// </summary>
    private static readonly bool s_trace = Environment.GetEnvironmentVariable("SPINDLE_COMPARE_WARMUP_TRACE") == "1";

    public static TimeSpan Minimum { get; } = TimeSpan.FromMilliseconds(
        int.TryParse(Environment.GetEnvironmentVariable("SPINDLE_COMPARE_WARMUP_MS"), NumberStyles.None, CultureInfo.InvariantCulture, out int ms) ? ms : 500);

    /// <summary>
    /// Repeats <paramref name="round"/> (a smaller run of the measured workload) until <see cref="Minimum"/> has passed,
    /// at least twice, then pauses briefly so that background compilations finish before the timed run.
    /// </summary>
    public static void Repeat(Action round) => Repeat(round, Minimum);

    /// <summary>
    /// As <see cref="Repeat(Action)"/>, for at least <paramref name="minimum"/> (or <see cref="Minimum"/> if that is
    /// longer): for workloads whose hot paths take longer to reach their final tier.
    /// </summary>
    public static void Repeat(Action round, TimeSpan minimum) => Repeat(round, minimum, untilJitSettles: null);

    /// <summary>
    /// Fewer methods than this compiled in a whole round: tiered compilation has promoted the workload's hot methods.
    /// A round of a steady workload still compiles a few (a timer's callback, an on-stack replacement).
    /// </summary>
    private const int SettledCompilations = 10;

    /// <summary>
    /// As <see cref="Repeat(Action, TimeSpan)"/>, and then on until a round compiles fewer than
    /// <see cref="SettledCompilations"/> methods (the process's JIT count, both pools alike), or until
    /// <paramref name="maximum"/>: for workloads of much code, such as a web server's request path, whose tiering ends
    /// at a time that depends on how many of its methods come precompiled (the framework's do; Spindle's do not).
    /// </summary>
    public static void RepeatUntilJitSettles(Action round, TimeSpan minimum, TimeSpan maximum) =>
        Repeat(round, minimum, untilJitSettles: maximum);

    /// <summary>
    /// The rounds: at least two, for at least <paramref name="minimum"/> (or <see cref="Minimum"/>), and with
    /// <paramref name="untilJitSettles"/> on until a round compiles few methods or that much time has passed.
    /// </summary>
    private static void Repeat(Action round, TimeSpan minimum, TimeSpan? untilJitSettles)
    {
        if (minimum < Minimum)
        {
            minimum = Minimum;
        }
        var elapsed = Stopwatch.StartNew();
        int rounds = 0;
        long compiled = JitInfo.GetCompiledMethodCount();
        while (true)
        {
            round();
            rounds++;
            long now = JitInfo.GetCompiledMethodCount();
            bool settled = untilJitSettles is not { } maximum || now - compiled < SettledCompilations || elapsed.Elapsed >= maximum;
            compiled = now;
            if (s_trace)
            {
                Console.Error.WriteLine($"warm-up round {rounds}: {elapsed.Elapsed.TotalMilliseconds:F0} ms, {now} methods compiled");
            }
            if (rounds >= 2 && elapsed.Elapsed >= minimum && settled)
            {
                break;
            }
        }
        Thread.Sleep(100);
        ProcessMeter.MarkMeasuredStart();
    }
}
