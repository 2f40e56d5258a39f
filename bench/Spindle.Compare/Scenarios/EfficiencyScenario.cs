using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// The shape of dotnet/performance's scheduling-efficiency test: transactions of <see cref="EfficiencyPlan.Steps"/> steps, each step a
/// work item of CPU work (5-5,000 µs, log-uniform from a fixed seed, so both pools get the same sequence) that
/// allocates 32 KB and queues the next step (<c>preferLocal: false</c>, as <c>QueueUserWorkItem</c> does), with a fixed
/// number of transactions in flight: a driver thread starts a transaction whenever one ends, from outside the pool, at
/// each level of <see cref="EfficiencyPlan.Levels"/> in turn. A transaction's efficiency is the CPU time its steps took (their threads'
/// CPU clocks) over its latency (from the driver's queueing of its first step to the end of its last): 100 % with one
/// in flight means the pool never made it wait, and at N in flight on C cores a pool that only ever runs steps reaches
/// about C / N. <c>efficiency @N</c> is the median over the level's transactions; <c>p5 efficiency @1</c> the fifth
/// percentile with one in flight, where each transaction starts on a pool that has just gone idle (the wake of a
/// parked worker); <c>cpu per work</c> is the process's CPU time over all levels, the driver's own left out, divided by
/// the steps' CPU time: what the pool's threads burn besides the work (spinning, parking, injected threads).
/// </summary>
/// <remarks>
/// A step's work is a fixed number of iterations of an arithmetic loop, sized from a calibration at the child's start:
/// the host's speed changes what a step costs, not the measure, which is the CPU time the step really took. A step
/// preempted by another step (a pool that runs more threads than cores) takes longer in wall time for the same CPU
/// time, which is what lowers its transaction's efficiency.
/// </remarks>
internal sealed class EfficiencyScenario : IScenario
{
    /// <summary>What each step allocates.</summary>
    private const int StepAllocationBytes = 32 * 1024;

    public string Id => "efficiency";

    public string Description =>
        $"transactions of {EfficiencyPlan.Steps} steps of {EfficiencyPlan.ShortestStepUs:F0}-{EfficiencyPlan.LongestStepUs:N0} µs CPU at 1-256 in flight: CPU work over latency (dotnet/performance's scheduling efficiency)";

    public IReadOnlyList<string> Variants { get; } = ["3-steps"];

    public IReadOnlyList<MetricInfo> Metrics { get; } = EfficiencyPlan.Metrics();

    public string HeadlineMetric => EfficiencyPlan.MetricName(1);

    // Each run measures six levels; two runs per pool keep the quick comparison within its time budget.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "3-steps")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        if (!CpuClock.IsThreadClockSupported)
        {
            throw new PlatformNotSupportedException("efficiency needs per-thread CPU time (Linux or macOS).");
        }
        double iterationsPerUs = StepWork.Calibrate();
        // The warm-up: a few transactions at a low, a middle and a high level, with a seed of their own.
        Warmup.Repeat(() =>
        {
            foreach (int level in (int[])[1, 4, 64])
            {
                RunLevel(pool, level, transactions: Math.Max(24, level), iterationsPerUs, seed: 7);
            }
        });
        GcSnapshot.CollectFully(); // restarts the measured part after its collection

        var measurement = new Measurement();
        long workNs = 0, driverNs = 0;
        long processStart = CpuClock.ProcessNanoseconds();
        foreach (int level in EfficiencyPlan.Levels)
        {
            LevelResult result = RunLevel(pool, level, EfficiencyPlan.TransactionsAt(level, full), iterationsPerUs, seed: 1_000 + level);
            Array.Sort(result.Efficiencies);
            measurement.Set(EfficiencyPlan.MetricName(level), 100 * Stats.Percentile(result.Efficiencies, 50));
            if (level == 1)
            {
                measurement.Set("p5 efficiency @1", 100 * Stats.Percentile(result.Efficiencies, 5));
            }
            workNs += result.WorkNs;
            driverNs += result.DriverNs;
            measurement.Items += result.Efficiencies.Length * EfficiencyPlan.Steps;
        }
        long processNs = CpuClock.ProcessNanoseconds() - processStart;
        return measurement.Set("cpu per work", (double)(processNs - driverNs) / workNs);
    }

    /// <summary>
    /// Runs <paramref name="transactions"/> transactions with <paramref name="level"/> in flight (fewer at the end) and
    /// returns each one's efficiency, the steps' CPU time and the driver thread's.
    /// </summary>
    private static LevelResult RunLevel(IPoolUnderTest pool, int level, int transactions, double iterationsPerUs, int seed)
    {
        var random = new Random(seed);
        var run = new LevelRun(pool, level, transactions);
        long driverStart = CpuClock.CurrentThreadNanoseconds();
        for (int i = 0; i < transactions; i++)
        {
            var transaction = new Transaction(run, i);
            for (int step = 0; step < EfficiencyPlan.Steps; step++)
            {
                transaction.Iterations[step] = EfficiencyPlan.Iterations(EfficiencyPlan.LogUniformUs(random.NextDouble()), iterationsPerUs);
            }
            if (!run.Slots.Wait(Waits.Stuck))
            {
                throw new TimeoutException($"Timed out waiting for a transaction to end at {level} in flight.");
            }
            transaction.StartedAt = Stopwatch.GetTimestamp();
            pool.UnsafeQueue(s_step, transaction, preferLocal: false);
        }
        if (!run.Done.Wait(Waits.Stuck))
        {
            throw new TimeoutException($"Timed out waiting for the last transactions at {level} in flight.");
        }
        long driverNs = CpuClock.CurrentThreadNanoseconds() - driverStart;
        return new LevelResult(run.Efficiencies, Interlocked.Read(ref run.WorkNs), driverNs);
    }

    private static readonly Action<object?> s_step = Step;

    /// <summary>One step: its work and allocation, then the next step, or the transaction's end.</summary>
    private static void Step(object? boxed)
    {
        var transaction = (Transaction)boxed!;
        LevelRun run = transaction.Run;
        long cpuStart = CpuClock.CurrentThreadNanoseconds();
        StepWork.Spin(transaction.Iterations[transaction.Step]);
        byte[] scratch = new byte[StepAllocationBytes];
        scratch[transaction.Step] = 1;
        StepWork.Keep(scratch);
        transaction.CpuNs += CpuClock.CurrentThreadNanoseconds() - cpuStart;
        if (++transaction.Step < EfficiencyPlan.Steps)
        {
            run.Pool.UnsafeQueue(s_step, transaction, preferLocal: false);
            return;
        }
        double latencyNs = Stopwatch.GetElapsedTime(transaction.StartedAt).Ticks * 100.0;
        run.Efficiencies[transaction.Index] = Math.Min(1, transaction.CpuNs / latencyNs);
        Interlocked.Add(ref run.WorkNs, transaction.CpuNs);
        run.Slots.Release();
        run.Done.Signal();
    }

    private readonly record struct LevelResult(double[] Efficiencies, long WorkNs, long DriverNs);

    /// <summary>One level's run: its pool, the driver's slots (one per transaction in flight) and the results.</summary>
    private sealed class LevelRun(IPoolUnderTest pool, int level, int transactions)
    {
        public readonly IPoolUnderTest Pool = pool;
        public readonly SemaphoreSlim Slots = new(level, level);
        public readonly CountdownEvent Done = new(transactions);
        public readonly double[] Efficiencies = new double[transactions];
        public long WorkNs;
    }

    /// <summary>One transaction: its steps' sizes, the step it is at, the CPU time its steps took so far.</summary>
    private sealed class Transaction(LevelRun run, int index)
    {
        public readonly LevelRun Run = run;
        public readonly int Index = index;
        public readonly int[] Iterations = new int[EfficiencyPlan.Steps];
        public int Step;
        public long StartedAt;
        public long CpuNs;
    }
}
