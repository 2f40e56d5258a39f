using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Wise's registered-wait benchmark: 63,000 repeating registrations; each round signals every 63rd (1,000 signals, one
/// per wait thread when handles are batched 63 to a thread) and waits for the 1,000 callbacks.
/// <list type="bullet">
/// <item><c>event</c>: registrations on <see cref="AutoResetEvent"/>s, on both pools (Spindle's
/// <c>RegisterWaitForSingleObject</c>, the built-in <see cref="ThreadPool.RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, int, bool)"/>).</item>
/// <item><c>signal</c>: Spindle registers on its thread-free <c>PoolSignal</c>; the built-in pool has no such type, so
/// its column is its <c>event</c> run of the same round (measured once, see <see cref="SameRunAs"/>).</item>
/// </list>
/// Reports the median time per round, the threads the process gained by registering (and running the rounds), and
/// the time the 63,000 registrations took.
/// </summary>
internal sealed class RegisteredWaitsScenario : IScenario
{
    private const int Registrations = 63_000;
    private const int Stride = 63;
    private const int QuickRounds = 20;
    private const int FullRounds = 100;

    public string Id => "registered-waits";

    public string Description => $"{Registrations:N0} repeating registered waits, signal every {Stride}th, wait for the callbacks (Wise)";

    public IReadOnlyList<string> Variants { get; } = ["event", "signal"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("round", "ms", Better.Lower),
        new("extra threads", "threads", Better.Lower),
        new("register", "ms", Better.Lower),
    ];

    public string HeadlineMetric => "round";

    // The built-in pool's runs take 5-13 s each here (it starts a wait thread per 63 registrations and a pool thread
    // at a time for their callbacks): two runs keep the quick comparison under its time budget.
    public int? MaxDefaultRuns => 2;

    /// <summary>The built-in pool's <c>signal</c> column is its <c>event</c> run: it has no thread-free signal to register on.</summary>
    public string? SameRunAs(string variant, PoolKind pool) => variant == "signal" && pool == PoolKind.BuiltIn ? "event" : null;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        bool native = variant switch
        {
            "event" => false,
            "signal" => true,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        var run = new Round();
        WaitOrTimerCallback callback = s_callback;
        var registrations = new IRegisteredSignal[Registrations];
        int threadsBefore = ProcessThreads();
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < registrations.Length; i++)
        {
            registrations[i] = native ? pool.RegisterNativeWait(callback, run) : pool.RegisterEventWait(callback, run);
        }
        double registerMs = Stopwatch.GetElapsedTime(start).TotalMilliseconds;

        // Warm-up rounds (compiling the signal and callback paths), then the timed ones.
        var warmup = Stopwatch.StartNew();
        for (int i = 0; i < 3 || warmup.Elapsed < Warmup.Minimum; i++)
        {
            RunRound(registrations, run);
        }
        ProcessMeter.MarkMeasuredStart();
        int rounds = full ? FullRounds : QuickRounds;
        var times = new double[rounds];
        for (int i = 0; i < rounds; i++)
        {
            times[i] = RunRound(registrations, run);
        }
        int extraThreads = ProcessThreads() - threadsBefore;
        foreach (IRegisteredSignal registration in registrations)
        {
            registration.Unregister();
        }
        return new Measurement { Items = (long)rounds * (Registrations / Stride) }
            .Set("round", Stats.Median(times))
            .Set("extra threads", Math.Max(0, extraThreads))
            .Set("register", registerMs);
    }

    private static double RunRound(IRegisteredSignal[] registrations, Round run)
    {
        run.Done.Reset();
        Volatile.Write(ref run.Remaining, registrations.Length / Stride);
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < registrations.Length; i += Stride)
        {
            registrations[i].Set();
        }
        Waits.OrThrow(run.Done, "the registered-wait callbacks of a round");
        return Stopwatch.GetElapsedTime(start).TotalMilliseconds;
    }

    /// <summary>The process's thread count (every thread, not only pool threads).</summary>
    private static int ProcessThreads()
    {
        using var process = Process.GetCurrentProcess();
        return process.Threads.Count;
    }

    private static readonly WaitOrTimerCallback s_callback = static (state, timedOut) =>
    {
        var run = (Round)state!;
        if (Interlocked.Decrement(ref run.Remaining) == 0)
        {
            run.Done.Set();
        }
    };

    private sealed class Round
    {
        public readonly ManualResetEventSlim Done = new(false);
        public int Remaining;
    }
}
