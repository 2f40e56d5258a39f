using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Linq;
using System.Threading;
using Xunit;

namespace Spindle.Tests.Fuzzing;

/// <summary>
/// What a fuzz run does. Every operation is on by default; the switches exist to take a family of operations out when
/// one of them breaks the pool so badly (a crashed test host, say) that the rest could not be judged. They are set from
/// <c>SPINDLE_FUZZ_OFF</c> (a comma-separated list of <see cref="SwitchNames"/>) or by code.
/// </summary>
internal sealed class ApiFuzzerOptions
{
    /// <summary>The names accepted in <c>SPINDLE_FUZZ_OFF</c>.</summary>
    public static readonly string[] SwitchNames =
        [
            "continuations", "run-token-cancel", "valuetask-token-cancel", "timer-firings-cancel", "wait-firings-cancel", "disposed-handles",
            "lanes", "lane-waits", "lane-shutdowns", "serial-lanes", "serial-order", "lane-list", "limit-options",
        ];

    public int Seed { get; init; }

    /// <summary>How many iterations (one pool each) the seed runs, unless <see cref="Duration"/> is set.</summary>
    public int Iterations { get; init; } = 7;

    /// <summary>When set, iterations run until this much time has passed (at least one).</summary>
    public TimeSpan? Duration { get; init; }

    /// <summary>
    /// Awaits inside pool code (Run delegates, scheduler tasks, posted callbacks) that resume on the pool's
    /// SynchronizationContext or TaskScheduler, including awaits of tasks completed after shutdown returned. Off: every
    /// such await uses ConfigureAwait(false), so nothing resumes on the pool.
    /// </summary>
    public bool ContinuationsAcrossShutdown { get; set; } = true;

    /// <summary>Run calls with a token that is cancelled while the item may still be queued. Off: such tokens are never cancelled.</summary>
    public bool RunTokensCancelledWhileQueued { get; set; } = true;

    /// <summary>RunAsValueTask calls with a token that is cancelled while the item may still be queued. Off: never cancelled.</summary>
    public bool ValueTaskTokensCancelledWhileQueued { get; set; } = true;

    /// <summary>
    /// Timers (CreateTimer, TimeProvider, Task.Delay and CancellationTokenSource on the pool's clock) in iterations that
    /// end with Shutdown(CancelPending), where their firings may be queued when it starts. Off: those iterations create no
    /// timers.
    /// </summary>
    public bool TimerFiringsAcrossCancelPending { get; set; } = true;

    /// <summary>
    /// Registered waits (PoolSignal and WaitHandle) in iterations that end with Shutdown(CancelPending), where their
    /// callbacks may be queued when it starts. Off: those iterations register no waits.
    /// </summary>
    public bool WaitFiringsAcrossCancelPending { get; set; } = true;

    /// <summary>RegisterWaitForSingleObject on a disposed handle (must be refused).</summary>
    public bool DisposedWaitHandles { get; set; } = true;

    /// <summary>Lanes on the fuzzed pool, and work queued through them. Off: every operation goes to the pool's own queue.</summary>
    public bool Lanes { get; set; } = true;

    /// <summary>
    /// Bounded lanes in <see cref="LaneFullMode.Wait"/> mode, whose producers wait for room (blocking calls and
    /// QueueUserWorkItemAsync). Off: every bounded lane rejects when full.
    /// </summary>
    public bool LaneWaits { get; set; } = true;

    /// <summary>Lanes shut down on their own (Dispose, DisposeAsync, Shutdown and ShutdownAsync in each mode). Off: lanes stop with the pool.</summary>
    public bool LaneShutdowns { get; set; } = true;

    /// <summary>Serial lanes (a concurrency cap of 1). Off: no lane has a cap of 1.</summary>
    public bool SerialLanes { get; set; } = true;

    /// <summary>The check that a serial lane starts one producer's items and posts in the order they were queued. Off: only overlap is checked.</summary>
    public bool SerialOrder { get; set; } = true;

    /// <summary>The checks of pool.Lanes: it lists every lane that has not begun to shut down, and none that has stopped. Off: not read.</summary>
    public bool LaneList { get; set; } = true;

    /// <summary>Pool options at the limits of their ranges (1, int.MaxValue, the largest and smallest delays). Off: ordinary values.</summary>
    public bool LimitOptions { get; set; } = true;

    public IEnumerable<string> SwitchedOff()
    {
        if (!ContinuationsAcrossShutdown)
        {
            yield return "continuations";
        }
        if (!RunTokensCancelledWhileQueued)
        {
            yield return "run-token-cancel";
        }
        if (!ValueTaskTokensCancelledWhileQueued)
        {
            yield return "valuetask-token-cancel";
        }
        if (!TimerFiringsAcrossCancelPending)
        {
            yield return "timer-firings-cancel";
        }
        if (!WaitFiringsAcrossCancelPending)
        {
            yield return "wait-firings-cancel";
        }
        if (!DisposedWaitHandles)
        {
            yield return "disposed-handles";
        }
        if (!Lanes)
        {
            yield return "lanes";
        }
        if (!LaneWaits)
        {
            yield return "lane-waits";
        }
        if (!LaneShutdowns)
        {
            yield return "lane-shutdowns";
        }
        if (!SerialLanes)
        {
            yield return "serial-lanes";
        }
        if (!SerialOrder)
        {
            yield return "serial-order";
        }
        if (!LaneList)
        {
            yield return "lane-list";
        }
        if (!LimitOptions)
        {
            yield return "limit-options";
        }
    }

    /// <summary>Applies <c>SPINDLE_FUZZ_OFF</c>.</summary>
    public ApiFuzzerOptions WithSwitchesFromEnvironment()
    {
        string? off = Environment.GetEnvironmentVariable(ApiFuzzer.OffVariable);
        if (string.IsNullOrWhiteSpace(off))
        {
            return this;
        }
        foreach (string raw in off.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
        {
            switch (raw)
            {
                case "continuations":
                    ContinuationsAcrossShutdown = false;
                    break;
                case "run-token-cancel":
                    RunTokensCancelledWhileQueued = false;
                    break;
                case "valuetask-token-cancel":
                    ValueTaskTokensCancelledWhileQueued = false;
                    break;
                case "timer-firings-cancel":
                    TimerFiringsAcrossCancelPending = false;
                    break;
                case "wait-firings-cancel":
                    WaitFiringsAcrossCancelPending = false;
                    break;
                case "disposed-handles":
                    DisposedWaitHandles = false;
                    break;
                case "lanes":
                    Lanes = false;
                    break;
                case "lane-waits":
                    LaneWaits = false;
                    break;
                case "lane-shutdowns":
                    LaneShutdowns = false;
                    break;
                case "serial-lanes":
                    SerialLanes = false;
                    break;
                case "serial-order":
                    SerialOrder = false;
                    break;
                case "lane-list":
                    LaneList = false;
                    break;
                case "limit-options":
                    LimitOptions = false;
                    break;
                default:
                    throw new ArgumentException($"{ApiFuzzer.OffVariable}: unknown switch '{raw}' (known: {string.Join(", ", SwitchNames)}).");
            }
        }
        return this;
    }
}

/// <summary>
/// A seeded random-operation fuzzer over the public API of <see cref="WorkerPool"/> and its lanes. One seed drives
/// everything: the pool's options, its lanes and their options, the shutdown form of each iteration, the moments the
/// pool and its lanes are shut down, and the sequence of operations each producer
/// thread issues (each producer has its own <see cref="Random"/> derived from the seed, the iteration and its index, so
/// its sequence is the same on every run; only the interleaving differs). See FuzzIteration for the contracts checked.
/// </summary>
/// <remarks>
/// Replay: <c>SPINDLE_FUZZ_SEED=N</c> runs exactly seed N (with <c>SPINDLE_FUZZ_ITERATIONS</c> iterations, or for
/// <c>SPINDLE_FUZZ_SECONDS</c> seconds); <c>SPINDLE_FUZZ_OFF</c> switches operation families off
/// (<see cref="ApiFuzzerOptions.SwitchNames"/>); <c>SPINDLE_FUZZ_KEEP_GOING=1</c> reports every failing iteration
/// instead of stopping at the first.
/// </remarks>
internal static class ApiFuzzer
{
    public const string SeedVariable = "SPINDLE_FUZZ_SEED";
    public const string IterationsVariable = "SPINDLE_FUZZ_ITERATIONS";
    public const string SecondsVariable = "SPINDLE_FUZZ_SECONDS";
    public const string OffVariable = "SPINDLE_FUZZ_OFF";
    public const string KeepGoingVariable = "SPINDLE_FUZZ_KEEP_GOING";

    /// <summary>The seed from <c>SPINDLE_FUZZ_SEED</c>, if set.</summary>
    public static int? SeedFromEnvironment() =>
        int.TryParse(Environment.GetEnvironmentVariable(SeedVariable), NumberStyles.Integer, CultureInfo.InvariantCulture, out int seed)
            ? seed
            : null;

    public static int? IterationsFromEnvironment() =>
        int.TryParse(Environment.GetEnvironmentVariable(IterationsVariable), NumberStyles.Integer, CultureInfo.InvariantCulture, out int n) && n > 0
            ? n
            : null;

    public static TimeSpan? DurationFromEnvironment() =>
        double.TryParse(Environment.GetEnvironmentVariable(SecondsVariable), NumberStyles.Float, CultureInfo.InvariantCulture, out double s) && s > 0
            ? TimeSpan.FromSeconds(s)
            : null;

    /// <summary>
    /// Runs one seed: its iterations one after another, each on a fresh pool. Throws (an xunit assertion) at the first
    /// iteration that breaks a contract, with a message that starts with the seed and says how to replay it; with
    /// <paramref name="failures"/> given, it adds the message there and goes on with the next iteration instead.
    /// </summary>
    /// <returns>How many iterations ran.</returns>
    public static int Run(ApiFuzzerOptions options, List<string>? failures = null)
    {
        EnsureCrashNote();
        var clock = Stopwatch.StartNew();
        int iteration = 0;
        while (true)
        {
            s_running = $"seed {options.Seed}, iteration {iteration}; replay: {ReplayCommand(options, iteration + 1)}";
            string? failure = new FuzzIteration(options, iteration).Run();
            s_running = null;
            if (failure is not null)
            {
                string message = $"Seed {options.Seed}, iteration {iteration}: {failure}\nReplay: {ReplayCommand(options, iteration + 1)}";
                if (failures is null)
                {
                    Assert.Fail(message);
                }
                failures.Add(message);
            }
            iteration++;
            bool more = options.Duration is { } duration ? clock.Elapsed < duration : iteration < options.Iterations;
            if (!more)
            {
                return iteration;
            }
        }
    }

    private static volatile string? s_running;
    private static int s_crashNoteInstalled;

    /// <summary>
    /// An exception that kills the process (one thrown on a thread the test cannot catch, as the await machinery does)
    /// ends the test host without an assertion message; this note on stderr, which the crash report shows, names the
    /// seed and iteration that were running.
    /// </summary>
    private static void EnsureCrashNote()
    {
        if (Interlocked.Exchange(ref s_crashNoteInstalled, 1) == 0)
        {
            AppDomain.CurrentDomain.UnhandledException += static (_, _) =>
            {
                if (s_running is { } running)
                {
                    Console.Error.WriteLine($"ApiFuzzer: the process is failing while {running}");
                }
            };
        }
    }

    /// <summary><c>SPINDLE_FUZZ_KEEP_GOING=1</c>: run every seed and iteration, then report every failing iteration.</summary>
    public static bool KeepGoing => Environment.GetEnvironmentVariable(KeepGoingVariable) == "1";

    /// <summary>Fails with every collected message (each starts with its seed), if there are any.</summary>
    public static void AssertNone(List<string> failures)
    {
        if (failures.Count > 0)
        {
            Assert.Fail($"{failures.Count} failing iteration(s):\n\n" + string.Join("\n\n", failures));
        }
    }

    public static string ReplayCommand(ApiFuzzerOptions options, int iterations)
    {
        string off = string.Join(',', options.SwitchedOff());
        return $"{SeedVariable}={options.Seed} {IterationsVariable}={iterations}"
            + (off.Length == 0 ? "" : $" {OffVariable}={off}")
            + " dotnet test -c Release --filter \"FullyQualifiedName~ApiFuzzer\"";
    }

    /// <summary>A well-mixed, process-independent seed for one random stream (HashCode is randomized per process).</summary>
    public static int Mix(int seed, int iteration, int stream)
    {
        ulong x = ((ulong)(uint)seed << 32) ^ ((ulong)(uint)iteration * 0x9E3779B97F4A7C15UL) ^ ((ulong)(uint)stream * 0xC2B2AE3D27D4EB4FUL);
        x ^= x >> 30;
        x *= 0xBF58476D1CE4E5B9UL;
        x ^= x >> 27;
        x *= 0x94D049BB133111EBUL;
        x ^= x >> 31;
        return (int)(x & 0x7FFF_FFFF);
    }

    /// <summary>Seeds for the stress form after the fixed ones: derived from the clock, printed in every failure.</summary>
    public static IEnumerable<int> FreshSeeds()
    {
        int start = Environment.TickCount ^ Environment.ProcessId;
        return Enumerable.Range(0, int.MaxValue).Select(i => Mix(start, i, 0x5eed));
    }
}
