using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// The everyday shape of work arriving from outside: a thread that is not one of the pool's queues a burst of
/// 10,000 trivial items, waits until all have run, and does it again, 50 rounds back to back (the pool goes idle
/// between rounds while the outside thread sees the last item complete). Variant <c>items</c>: each item queued with
/// <c>QueueUserWorkItem(WaitCallback, state)</c> (ExecutionContext flowing, as the built-in form does), the last one to
/// run sets an event. Variant <c>tasks</c>: Spindle's <c>WorkerPool.Run(Action)</c> against <c>Task.Run(Action)</c>,
/// then <c>Task.WaitAll</c>. Metric: the time of the 50 rounds, from the first enqueue to the last completion seen.
/// </summary>
internal sealed class BurstRemoteScenario : IScenario
{
    private const int ItemsPerRound = 10_000;
    private const int QuickRounds = 50;
    private const int FullRounds = 500;

    /// <summary>
    /// The warm-up's minimum. Warm-up rounds last a few milliseconds each, and the JIT keeps promoting hot methods
    /// in waves until 1.5-2.5 s into the process (JitInfo's compiled-method count, traced per round on 2 cores). After
    /// the default 500 ms, a Spindle child often measured code still at tier 0 or instrumented: the tasks variant
    /// spread from 90 to 330 ms over single runs, and 2 s of warm-up (like tiering disabled) brought it to 80-125 ms.
    /// The built-in pool, whose code is precompiled, gains less from it (about 90 against 70 ms).
    /// </summary>
    private static readonly TimeSpan s_warmupMinimum = TimeSpan.FromSeconds(2);

    public string Id => "burst-remote";

    public string Description =>
        $"an outside thread queues {ItemsPerRound:N0} trivial items and waits for all, {QuickRounds} rounds ({FullRounds} with --full)";

    public IReadOnlyList<string> Variants { get; } = ["items", "tasks"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("time", "ms", Better.Lower),
    ];

    public string HeadlineMetric => "time";

    /// <summary>Three runs per pool by default: a child lasts about a second, and the quick run of every scenario must stay under 10 minutes.</summary>
    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        Func<IPoolUnderTest, int, double> rounds = variant switch
        {
            "items" => RunItems,
            "tasks" => RunTasks,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => rounds(pool, 5), s_warmupMinimum);
        int count = full ? FullRounds : QuickRounds;
        GcSnapshot.CollectFully();
        double milliseconds = rounds(pool, count);
        return new Measurement { Items = (long)count * ItemsPerRound }.Set("time", milliseconds);
    }

    /// <summary>Rounds of <see cref="ItemsPerRound"/> queued items; returns their total time in milliseconds.</summary>
    private static double RunItems(IPoolUnderTest pool, int rounds)
    {
        var round = new Round();
        long start = Stopwatch.GetTimestamp();
        for (int r = 0; r < rounds; r++)
        {
            round.Reset(ItemsPerRound);
            for (int i = 0; i < ItemsPerRound; i++)
            {
                pool.Queue(s_item, round);
            }
            Waits.OrThrow(round.Done, $"a burst of {ItemsPerRound:N0} items to complete");
        }
        return Pacer.ToMilliseconds(Stopwatch.GetTimestamp() - start);
    }

    /// <summary>Rounds of <see cref="ItemsPerRound"/> Run tasks, each round awaited with WaitAll; total milliseconds.</summary>
    private static double RunTasks(IPoolUnderTest pool, int rounds)
    {
        var tasks = new Task[ItemsPerRound];
        Action work = s_work;
        long start = Stopwatch.GetTimestamp();
        for (int r = 0; r < rounds; r++)
        {
            for (int i = 0; i < ItemsPerRound; i++)
            {
                tasks[i] = pool.Run(work);
            }
            if (!Task.WaitAll(tasks, Waits.Stuck))
            {
                throw new TimeoutException($"A burst of {ItemsPerRound:N0} tasks did not complete.");
            }
        }
        double milliseconds = Pacer.ToMilliseconds(Stopwatch.GetTimestamp() - start);
        Array.Clear(tasks);
        return milliseconds;
    }

    private static readonly WaitCallback s_item = static boxed =>
    {
        var round = (Round)boxed!;
        if (Interlocked.Decrement(ref round.Remaining) == 0)
        {
            round.Done.Set();
        }
    };

    private static int s_sink;

    private static readonly Action s_work = static () => Volatile.Write(ref s_sink, 1);

    /// <summary>One round's countdown. The items decrement one counter, as a fan-out's join does on both pools.</summary>
    private sealed class Round
    {
        public readonly ManualResetEventSlim Done = new(false);
        public int Remaining;

        public void Reset(int items)
        {
            Done.Reset();
            Volatile.Write(ref Remaining, items);
        }
    }
}
