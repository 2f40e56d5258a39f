using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Fork-join code as libraries write it, through each pool's <see cref="TaskScheduler"/> (Spindle's
/// <c>pool.TaskScheduler</c>; <see cref="TaskScheduler.Default"/> for the built-in pool).
/// <list type="bullet">
/// <item><c>fork-latency</c>: an item running on the pool forks a child task
/// (<c>Task.Factory.StartNew(…, scheduler)</c>) and keeps computing until the child starts; metric: the time from the
/// fork until the child starts. Between samples the outside thread waits a random 0–1 ms (the same seeded sequence for
/// every pool), so the other workers are found searching, spinning or parked.</item>
/// <item><c>parallel-for</c>: <c>Parallel.For</c> over 10,000,000 tiny bodies with
/// <c>ParallelOptions.TaskScheduler</c> = the pool's scheduler; calls repeat until 300 ms have passed (3 s with
/// <c>--full</c>); metrics: time per call and allocation per call.</item>
/// <item><c>nested</c>: the same 10,000,000 bodies as 1,000 outer iterations each running an inner
/// <c>Parallel.For</c> of 10,000 bodies, both on the pool's scheduler.</item>
/// </list>
/// </summary>
internal sealed class ForkJoinScenario : IScenario
{
    private const int Bodies = 10_000_000;
    private const int OuterIterations = 1_000;
    private const int QuickSamples = 300;
    private const int FullSamples = 3_000;
    private const int WarmupSamples = 30;
    private const int MaxGapMicroseconds = 1_000;
    private static readonly TimeSpan s_sleepAbove = TimeSpan.FromMilliseconds(1.1);
    private static readonly TimeSpan s_quickMinimum = TimeSpan.FromMilliseconds(300);
    private static readonly TimeSpan s_fullMinimum = TimeSpan.FromSeconds(3);

    private static readonly MetricInfo s_p50 = new("p50", "us", Better.Lower);
    private static readonly MetricInfo s_p99 = new("p99", "us", Better.Lower);
    private static readonly MetricInfo s_time = new("time", "ms", Better.Lower);
    private static readonly MetricInfo s_alloc = new("alloc", "KB/call", Better.Lower, NoiseFloor: 0.1);

    public string Id => "fork-join";

    public string Description =>
        $"fork-latency: a busy item forks a child task, time until it starts ({QuickSamples:N0} samples, {FullSamples:N0} with --full); "
        + $"parallel-for / nested: Parallel.For over {Bodies:N0} tiny bodies (nested: {OuterIterations:N0} x {Bodies / OuterIterations:N0}) on the pool's TaskScheduler";

    public IReadOnlyList<string> Variants { get; } = ["fork-latency", "parallel-for", "nested"];

    public IReadOnlyList<MetricInfo> Metrics { get; } = [s_p50, s_p99, s_time, s_alloc];

    public IReadOnlyList<MetricInfo> MetricsFor(string variant) =>
        variant == "fork-latency" ? [s_p50, s_p99] : [s_time, s_alloc];

    public string HeadlineMetric => "p50";

    // Two runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        switch (variant)
        {
            case "fork-latency":
                var state = new ForkState(pool.Scheduler);
                Warmup.Repeat(() => SampleForks(pool, state, WarmupSamples, new Random(7)));
                GcSnapshot.CollectFully();
                double[] latencies = SampleForks(pool, state, full ? FullSamples : QuickSamples, new Random(42));
                Array.Sort(latencies);
                return new Measurement { Items = latencies.Length }
                    .Set("p50", Stats.Percentile(latencies, 50))
                    .Set("p99", Stats.Percentile(latencies, 99));
            case "parallel-for":
            case "nested":
                bool nested = variant == "nested";
                var options = new ParallelOptions { TaskScheduler = pool.Scheduler };
                Warmup.Repeat(() => ParallelCall(options, nested));
                return MeasureCalls(options, nested, full ? s_fullMinimum : s_quickMinimum);
            default:
                throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
    }

    /// <summary>Takes <paramref name="count"/> fork samples; returns the latencies in microseconds.</summary>
    private static double[] SampleForks(IPoolUnderTest pool, ForkState state, int count, Random random)
    {
        var latencies = new double[count];
        for (int i = 0; i < count; i++)
        {
            long gap = Pacer.TicksFromMicroseconds(random.Next(0, MaxGapMicroseconds + 1));
            Pacer.WaitUntil(Stopwatch.GetTimestamp() + gap, s_sleepAbove);

            state.Done.Reset();
            pool.UnsafeQueue(s_parent, state, preferLocal: false);
            Waits.OrThrow(state.Done, "a forking item and its child to run");
            latencies[i] = Pacer.ToMicroseconds(state.ChildStarted - state.Forked);
        }
        return latencies;
    }

    private static readonly Action<object?> s_child = static boxed =>
        Volatile.Write(ref ((ForkState)boxed!).ChildStarted, Stopwatch.GetTimestamp());

    /// <summary>
    /// The busy parent: forks the child, then computes until the child has started (at most 10 s, after which the
    /// sample fails: a child that never starts while its parent computes is a stranded item).
    /// </summary>
    private static readonly Action<object?> s_parent = static boxed =>
    {
        var state = (ForkState)boxed!;
        Volatile.Write(ref state.ChildStarted, 0);
        state.Forked = Stopwatch.GetTimestamp();
        Task child = Task.Factory.StartNew(s_child, state, CancellationToken.None, TaskCreationOptions.None, state.Scheduler);
        long deadline = state.Forked + Stopwatch.Frequency * 10;
        while (Volatile.Read(ref state.ChildStarted) == 0)
        {
            Thread.SpinWait(20); // the parent's own computation
            if (Stopwatch.GetTimestamp() > deadline)
            {
                throw new TimeoutException("A child task forked by a running item did not start within 10 s.");
            }
        }
        child.ContinueWith(static (_, s) => ((ForkState)s!).Done.Set(), state, CancellationToken.None,
            TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
    };

    /// <summary>Calls until <paramref name="minimum"/> has passed: time and allocation per call.</summary>
    private static Measurement MeasureCalls(ParallelOptions options, bool nested, TimeSpan minimum)
    {
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        int calls = 0;
        do
        {
            ParallelCall(options, nested);
            calls++;
        }
        while (Stopwatch.GetElapsedTime(start) < minimum || calls < 3);
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        return new Measurement { Items = (long)calls * Bodies }
            .Set("time", Pacer.ToMilliseconds(end - start) / calls)
            .Set("alloc", used.AllocatedBytes / 1024.0 / calls);
    }

    private static void ParallelCall(ParallelOptions options, bool nested)
    {
        ParallelLoopResult result = nested
            ? Parallel.For(0, OuterIterations, options, _ => Parallel.For(0, Bodies / OuterIterations, options, s_body))
            : Parallel.For(0, Bodies, options, s_body);
        if (!result.IsCompleted)
        {
            throw new InvalidOperationException("Parallel.For did not complete.");
        }
    }

    // Never throws: the check keeps the body from being an empty call.
    private static readonly Action<int> s_body = static i => ArgumentOutOfRangeException.ThrowIfNegative(i);

    private sealed class ForkState(TaskScheduler scheduler)
    {
        public readonly TaskScheduler Scheduler = scheduler;
        // The measuring thread blocks at once instead of spinning first, so that it never competes with the pool's
        // workers for a core while a fork is timed (on 2 cores it changed neither pool's figures).
        public readonly ManualResetEventSlim Done = new(false, spinCount: 0);
        public long Forked;
        public long ChildStarted;
    }
}
