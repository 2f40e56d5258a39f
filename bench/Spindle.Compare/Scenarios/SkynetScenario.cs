using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// The skynet benchmark: a 10-ary tree of 1,111,111 tasks, each started with <c>Run</c> (Spindle's, on its scheduler;
/// <c>Task.Run</c> on the built-in pool), whose leaves return their number and whose inner nodes await their ten
/// children (<c>await Task.WhenAll</c>) and sum them. The root must return 499999500000.
/// </summary>
internal sealed class SkynetScenario : IScenario
{
    private const long Expected = 499_999_500_000;
    private const int Size = 1_000_000;

    public string Id => "skynet";

    public string Description => "10-ary tree of 1,111,111 tasks summing 0..999,999";

    public IReadOnlyList<string> Variants { get; } = ["tasks"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("time", "ms", Better.Lower),
        new("alloc", "B/task", Better.Lower, NoiseFloor: 0.5),
    ];

    public string HeadlineMetric => "time";

    // Three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "tasks")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunOnce(pool, 10_000, 49_995_000));
        return RunOnce(pool, Size, Expected);
    }

    private static Measurement RunOnce(IPoolUnderTest pool, int size, long expected)
    {
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        Task<long> root = pool.Run(() => Node(pool, 0, size));
        if (!root.Wait(Waits.Stuck))
        {
            throw new TimeoutException("skynet did not complete.");
        }
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        if (root.Result != expected)
        {
            throw new InvalidOperationException($"skynet summed {root.Result}, expected {expected}.");
        }
        long tasks = 0;
        for (long level = size; level >= 1; level /= 10)
        {
            tasks += level;
        }
        return new Measurement { Items = tasks }
            .Set("time", Stopwatch.GetElapsedTime(start, end).TotalMilliseconds)
            .Set("alloc", (double)used.AllocatedBytes / tasks);
    }

    private static async Task<long> Node(IPoolUnderTest pool, long number, int size)
    {
        if (size == 1)
        {
            return number;
        }
        int childSize = size / 10;
        var children = new Task<long>[10];
        for (int i = 0; i < 10; i++)
        {
            long childNumber = number + (long)i * childSize;
            children[i] = pool.Run(() => Node(pool, childNumber, childSize));
        }
        // A plain await, as in the classic C# skynet: it resumes on the scheduler the node runs on. (ConfigureAwait(false)
        // would send the continuations of a custom scheduler's tasks to the built-in pool, mixing the two pools.)
        long[] sums = await Task.WhenAll(children);
        long sum = 0;
        foreach (long value in sums)
        {
            sum += value;
        }
        return sum;
    }
}
