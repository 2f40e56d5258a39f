using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// The shape of an async server: 1,000 concurrent async loops, started with <c>pool.Run</c> (Spindle) or
/// <c>Task.Run</c> (built-in), each repeating "await something, then about 5 µs of CPU" until a deadline. An operation
/// is one await and its work; its latency runs from just before the await to the end of the work (a loop's first
/// operation from the moment the loop was queued, so a loop that waits in the queue is not left out).
/// <list type="bullet">
/// <item><c>yield</c>: <c>await Task.Yield()</c>.</item>
/// <item><c>delay</c>: <c>await Task.Delay(1 ms, timeProvider)</c> on each pool's own timers (Spindle's
/// <c>pool.TimeProvider</c>; <see cref="TimeProvider.System"/> for the built-in pool).</item>
/// <item><c>handoff</c>: 500 pairs of loops passing a turn through two <see cref="SemaphoreSlim"/>s: each loop awaits
/// its own semaphore's <c>WaitAsync</c>, works, and releases its partner's.</item>
/// </list>
/// Metrics: operations per second, the 99th percentile of operation latency (each loop counts every operation's in a
/// <see cref="LatencyHistogram"/> of its own, allocated before the measured part), allocation per operation, and how many loops completed no operation at
/// all in the measured part (a pool that keeps running the same few pairs from a LIFO queue starves the others; their
/// waits would otherwise never reach the percentile, so a <c>handoff</c> wait that ends after the deadline is recorded
/// too, as the wait alone, and so is the wait of a <c>yield</c> or <c>delay</c> loop that first runs after it), and how evenly the operations were shared among the loops (Jain's index of the operations per
/// loop, <see cref="Stats.JainIndex"/>: 1 when every loop completed as many, 0.001 when one loop completed them all). The
/// percentile counts operations, so a pool that lets a few pairs pass their turn back and forth while the other loops
/// wait reads well there (most operations are the few pairs' fast ones) and badly in the index. The measured part lasts 1 s (5 s with
/// <c>--full</c>) after warm-up rounds of the same loops lasting at least 2 s (see <see cref="Run"/>).
/// </summary>
internal sealed class AsyncServerScenario : IScenario
{
    private const int Loops = 1_000;
    private static readonly TimeSpan s_quickDuration = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan s_fullDuration = TimeSpan.FromSeconds(5);
    private static readonly TimeSpan s_warmupDuration = TimeSpan.FromMilliseconds(200);
    private static readonly TimeSpan s_warmupMinimum = TimeSpan.FromSeconds(2);
    private static readonly TimeSpan s_delay = TimeSpan.FromMilliseconds(1);
    private static readonly long s_workTicks = Pacer.TicksFromMicroseconds(5);

    public string Id => "async-server";

    public string Description =>
        $"{Loops:N0} async loops (pool.Run / Task.Run), each awaiting then doing ~5 us of CPU, for {s_quickDuration.TotalSeconds:0.#} s "
        + $"({s_fullDuration.TotalSeconds:N0} s with --full); yield: Task.Yield, delay: Task.Delay(1 ms) on the pool's TimeProvider, handoff: SemaphoreSlim pairs";

    public IReadOnlyList<string> Variants { get; } = ["yield", "delay", "handoff"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "ops/s", Better.Higher),
        new("p99", "us", Better.Lower),
        new("alloc", "B/op", Better.Lower, NoiseFloor: 0.5),
        new("starved", "loops", Better.Lower),
        new("loop fairness", "Jain index", Better.Higher),
    ];

    public string HeadlineMetric => "throughput";

    // Each run warms up for 2 s: two runs per pool keep the quick run of every scenario under 10 minutes.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant is not ("yield" or "delay" or "handoff"))
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        // Warm-up rounds for at least 2 s, so that tiered compilation has promoted the hot paths of the pool and of the
        // loops themselves (the built-in pool's code is precompiled; Spindle's is not). Counted with
        // JitInfo.GetCompiledMethodCount per 230 ms round, both pools still compile 100-260 methods a round during the
        // first 0.5-1 s and tail off around 2-2.4 s. With the former 500 ms warm-up, a profile of a Spindle child found
        // most samples of the loops' MoveNext and of the pool's item runner in instrumented or tier-0 code, and Spindle
        // ran at 0.82x the built-in pool on delay and 0.90-0.97x on yield; after 2 s, 0.99x and 1.05x.
        Warmup.Repeat(() => RunLoops(pool, variant, s_warmupDuration), s_warmupMinimum);
        return RunLoops(pool, variant, full ? s_fullDuration : s_quickDuration);
    }

    private static Measurement RunLoops(IPoolUnderTest pool, string variant, TimeSpan duration)
    {
        var loops = new LoopState[Loops];
        for (int i = 0; i < Loops; i++)
        {
            loops[i] = new LoopState();
        }
        if (variant == "handoff")
        {
            for (int i = 0; i < Loops; i += 2)
            {
                loops[i].Partner = loops[i + 1];
                loops[i + 1].Partner = loops[i];
            }
        }
        var run = new ServerRun(pool.TimeProvider);
        var tasks = new Task[Loops];
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        run.Start = start;
        run.Deadline = start + Pacer.Ticks(duration);
        for (int i = 0; i < Loops; i++)
        {
            LoopState loop = loops[i];
            bool first = i % 2 == 0;
            tasks[i] = variant switch
            {
                "yield" => pool.Run(() => YieldLoop(run, loop)),
                "delay" => pool.Run(() => DelayLoop(run, loop)),
                _ => pool.Run(() => HandoffLoop(run, loop, first)),
            };
        }
        if (!Task.WaitAll(tasks, duration + TimeSpan.FromSeconds(60)))
        {
            throw new TimeoutException($"The async loops did not finish within {duration.TotalSeconds + 60:N0} s.");
        }
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;

        long operations = 0;
        int starved = 0;
        var latencies = new LatencyHistogram();
        var shares = new double[Loops];
        for (int i = 0; i < Loops; i++)
        {
            LoopState loop = loops[i];
            operations += loop.Operations;
            latencies.Add(loop.Latencies);
            starved += loop.Operations == 0 ? 1 : 0;
            shares[i] = loop.Operations;
        }
        double seconds = (end - start) / (double)Stopwatch.Frequency;
        return new Measurement { Items = operations }
            .Set("throughput", operations / seconds)
            .Set("p99", latencies.Count == 0 ? double.NaN : latencies.Percentile(99))
            .Set("alloc", (double)used.AllocatedBytes / Math.Max(1, operations))
            .Set("starved", starved)
            .Set("loop fairness", Stats.JainIndex(shares));
    }

    private static async Task YieldLoop(ServerRun run, LoopState loop)
    {
        if (StartedAfterTheDeadline(run, loop))
        {
            return;
        }
        long began = run.Start;
        while (Stopwatch.GetTimestamp() < run.Deadline)
        {
            await Task.Yield();
            Work();
            long done = Stopwatch.GetTimestamp();
            loop.Record(done - began);
            began = done;
        }
    }

    private static async Task DelayLoop(ServerRun run, LoopState loop)
    {
        if (StartedAfterTheDeadline(run, loop))
        {
            return;
        }
        long began = run.Start;
        while (Stopwatch.GetTimestamp() < run.Deadline)
        {
            await Task.Delay(s_delay, run.TimeProvider);
            Work();
            long done = Stopwatch.GetTimestamp();
            loop.Record(done - began);
            began = done;
        }
    }

    /// <summary>
    /// A loop the pool first ran after the deadline has completed nothing: its wait to start still counts in the
    /// percentile (as a handoff wait the deadline cut short does), or a pool that starts some loops late would read
    /// better for it.
    /// </summary>
    private static bool StartedAfterTheDeadline(ServerRun run, LoopState loop)
    {
        long now = Stopwatch.GetTimestamp();
        if (now < run.Deadline)
        {
            return false;
        }
        loop.RecordWait(now - run.Start);
        return true;
    }

    /// <summary>
    /// One side of a pair: the first side starts with the turn. A side that sees the deadline passes the turn once more
    /// and stops, so its partner (waiting for that turn) sees the deadline too.
    /// </summary>
    private static async Task HandoffLoop(ServerRun run, LoopState loop, bool first)
    {
        if (first)
        {
            loop.Partner!.Turn.Release();
        }
        long began = run.Start;
        while (true)
        {
            await loop.Turn.WaitAsync().ConfigureAwait(continueOnCapturedContext: true);
            long now = Stopwatch.GetTimestamp();
            bool over = now >= run.Deadline;
            if (over)
            {
                loop.RecordWait(now - began); // a wait the deadline cut short still counts: it may be a starved loop's only one
            }
            else
            {
                Work();
                loop.Record(Stopwatch.GetTimestamp() - began);
            }
            loop.Partner!.Turn.Release();
            if (over)
            {
                return;
            }
            began = Stopwatch.GetTimestamp();
        }
    }

    /// <summary>About 5 µs of CPU: a spin on the clock.</summary>
    private static void Work()
    {
        long until = Stopwatch.GetTimestamp() + s_workTicks;
        while (Stopwatch.GetTimestamp() < until)
        {
            Thread.SpinWait(4);
        }
    }

    private sealed class ServerRun(TimeProvider timeProvider)
    {
        public readonly TimeProvider TimeProvider = timeProvider;
        public long Start;
        public long Deadline;
    }

    /// <summary>One loop's figures (written only by the loop, which runs one step at a time), and its semaphore.</summary>
    private sealed class LoopState
    {
        /// <summary>Every operation's latency, and a final cut-short wait.</summary>
        public readonly LatencyHistogram Latencies = new();
        public readonly SemaphoreSlim Turn = new(0);
        public LoopState? Partner;

        /// <summary>Operations completed before the deadline.</summary>
        public int Operations;

        public void Record(long ticks)
        {
            RecordWait(ticks);
            Operations++;
        }

        public void RecordWait(long ticks)
        {
            Latencies.Record(ticks);
        }
    }
}
