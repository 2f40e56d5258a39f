using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Timers: Spindle's <c>WorkerPool.CreateTimer</c> (an entry of the pool's timing wheel) against
/// <see cref="System.Threading.Timer"/> (the runtime's timer queues, whose callbacks run on the built-in pool).
/// <list type="bullet">
/// <item><c>schedule-cancel</c>: schedule 1,000,000 one-shot timers due in 30–34 s (a server's outstanding timeouts),
/// then cancel them all; time and bytes per timer.</item>
/// <item><c>lateness</c>: 100,000 one-shot timers due at random times over one second, the first 250 ms after they are
/// scheduled; a gen1 collection right after the scheduling loop (50-100 ms here) clears the allocation budget that the
/// loop used up, so that no collection falls inside the firing window at a point that depends on each pool's bytes
/// per timer (one there stops every callback for 10-25 ms, which is a measure of the collector, not the timers); how
/// late each callback starts after its exact due time (never early is Spindle's contract; early firings are counted).</item>
/// <item><c>saturated</c>: the same while the pool is saturated: 4 × cores CPU-bound 1 ms items keep every thread busy
/// and a backlog queued, re-queueing themselves until the timers are done.</item>
/// <item><c>burst</c>: 1,000 timers due at the same instant, each callback computing for 20 µs (10 ms of callbacks per
/// core on this machine's 2), while an outside thread queues 50 small ordinary items about a millisecond apart (it
/// sleeps in between), from 10 ms before the burst; how late the callbacks start, and how long the ordinary items wait
/// to start (p99 and max): work queued behind a burst of timers should not wait for the whole burst.</item>
/// </list>
/// </summary>
internal sealed class TimersScenario : IScenario
{
    private const int ScheduleCount = 1_000_000;
    private const int FiringCount = 100_000;
    private const int SpreadMs = 1_000;
    private const int MinDueMs = 250; // after the scheduling loop (and any collection it causes) is over

    private static readonly MetricInfo s_schedule = new("schedule+cancel", "ns/timer", Better.Lower);
    private static readonly MetricInfo s_alloc = new("alloc", "B/timer", Better.Lower, NoiseFloor: 0.5);
    private static readonly MetricInfo s_p50 = new("p50 late", "ms", Better.Lower, NoiseFloor: 0.01);
    private static readonly MetricInfo s_p99 = new("p99 late", "ms", Better.Lower, NoiseFloor: 0.01);
    private static readonly MetricInfo s_max = new("max late", "ms", Better.Lower, NoiseFloor: 0.01);
    private static readonly MetricInfo s_early = new("early", "timers", Better.Lower);
    private static readonly MetricInfo s_itemP99 = new("item p99 wait", "ms", Better.Lower, NoiseFloor: 0.01);
    private static readonly MetricInfo s_itemMax = new("item max wait", "ms", Better.Lower, NoiseFloor: 0.01);
    private const int BurstCount = 1_000;
    private const int BurstDueMs = 250;
    private static readonly long s_burstCallbackTicks = Pacer.TicksFromMicroseconds(20);
    private const int ItemCount = 50;

    public string Id => "timers";

    public string Description =>
        $"schedule+cancel {ScheduleCount:N0} timers; {FiringCount:N0} timers firing over {SpreadMs / 1000} s: lateness, idle and with the pool saturated";

    public IReadOnlyList<string> Variants { get; } = ["schedule-cancel", "lateness", "saturated", "burst"];

    public IReadOnlyList<MetricInfo> Metrics { get; } = [s_schedule, s_alloc, s_p50, s_p99, s_max, s_early, s_itemP99, s_itemMax];

    public IReadOnlyList<MetricInfo> MetricsFor(string variant) => variant switch
    {
        "schedule-cancel" => [s_schedule, s_alloc],
        "burst" => [s_p99, s_max, s_itemP99, s_itemMax],
        _ => [s_p50, s_p99, s_max, s_early],
    };

    public string HeadlineMetric => "p99 late";

    // Two runs per pool in the default (quick) run, which must stay under ten minutes (the effects are large and
    // stable: spreads within 25 % of the medians, ratios of 2.4-5.4x).
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        switch (variant)
        {
            case "schedule-cancel":
                Warmup.Repeat(() => ScheduleAndCancel(pool, ScheduleCount / 10));
                return ScheduleAndCancel(pool, ScheduleCount);
            case "lateness":
            case "saturated":
                bool saturate = variant == "saturated";
                PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
                Warmup.Repeat(() => Fire(pool, FiringCount / 10, SpreadMs / 10, saturate));
                return Fire(pool, FiringCount, SpreadMs, saturate);
            case "burst":
                PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
                Warmup.Repeat(() => Burst(pool));
                return Burst(pool);
            default:
                throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
    }

    private static Measurement ScheduleAndCancel(IPoolUnderTest pool, int count)
    {
        var timers = new ITimer[count];
        TimerCallback callback = s_nothing;
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < timers.Length; i++)
        {
            timers[i] = pool.CreateTimer(callback, null, TimeSpan.FromMilliseconds(30_000 + (i & 4095)), Timeout.InfiniteTimeSpan);
        }
        for (int i = 0; i < timers.Length; i++)
        {
            timers[i].Dispose();
        }
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        return new Measurement { Items = count }
            .Set(s_schedule.Name, Stopwatch.GetElapsedTime(start, end).TotalNanoseconds / count)
            .Set(s_alloc.Name, (double)used.AllocatedBytes / count); // the array of timers is allocated before the snapshot
    }

    private static Measurement Fire(IPoolUnderTest pool, int count, int spreadMs, bool saturate)
    {
        var run = new FiringRun(count);
        var probes = new Probe[count];
        var random = new Random(12345);
        for (int i = 0; i < count; i++)
        {
            probes[i] = new Probe(run, MinDueMs + random.Next(spreadMs));
        }
        var timers = new ITimer[count];
        Saturation? load = saturate ? Saturation.Start(pool) : null;
        try
        {
            TimerCallback callback = s_probe;
            for (int i = 0; i < count; i++)
            {
                Probe probe = probes[i];
                probe.Scheduled = Stopwatch.GetTimestamp();
                timers[i] = pool.CreateTimer(callback, probe, TimeSpan.FromMilliseconds(probe.DueMs), Timeout.InfiniteTimeSpan);
            }
            // The collection that the loop's allocations have made due happens now, before the first timer is due,
            // instead of at a point of the firing window that depends on each pool's bytes per timer.
            GC.Collect(1, GCCollectionMode.Forced, blocking: true);
            Waits.OrThrow(run.Done, $"{count:N0} timers to fire");
        }
        finally
        {
            load?.Stop();
        }
        foreach (ITimer timer in timers)
        {
            timer.Dispose();
        }
        var late = new double[count];
        int early = 0;
        for (int i = 0; i < count; i++)
        {
            Probe probe = probes[i];
            late[i] = Stopwatch.GetElapsedTime(probe.Scheduled, probe.Fired).TotalMilliseconds - probe.DueMs;
            if (late[i] < 0)
            {
                early++;
            }
        }
        Array.Sort(late);
        return new Measurement { Items = count }
            .Set(s_p50.Name, Stats.Percentile(late, 50))
            .Set(s_p99.Name, Stats.Percentile(late, 99))
            .Set(s_max.Name, late[^1])
            .Set(s_early.Name, early);
    }

    private static Measurement Burst(IPoolUnderTest pool)
    {
        var run = new FiringRun(BurstCount);
        var probes = new Probe[BurstCount];
        var timers = new ITimer[BurstCount];
        long scheduled = Stopwatch.GetTimestamp();
        TimerCallback callback = s_burstProbe;
        for (int i = 0; i < BurstCount; i++)
        {
            probes[i] = new Probe(run, BurstDueMs) { Scheduled = scheduled };
            timers[i] = pool.CreateTimer(callback, probes[i], TimeSpan.FromMilliseconds(BurstDueMs), Timeout.InfiniteTimeSpan);
        }
        GC.Collect(1, GCCollectionMode.Forced, blocking: true);

        // The ordinary items: queued from this thread about every millisecond around the burst (it sleeps in between, so
        // it leaves the cores to the pool), each recording when it started.
        long due = scheduled + Pacer.Ticks(TimeSpan.FromMilliseconds(BurstDueMs));
        long from = due - Pacer.Ticks(TimeSpan.FromMilliseconds(10));
        var items = new ItemProbe[ItemCount];
        for (int i = 0; i < ItemCount; i++)
        {
            items[i] = new ItemProbe();
        }
        var itemsDone = new CountdownEvent(ItemCount);
        Pacer.WaitUntil(from, TimeSpan.FromMilliseconds(2));
        for (int i = 0; i < ItemCount; i++)
        {
            Thread.Sleep(1);
            ItemProbe item = items[i];
            item.Done = itemsDone;
            item.Queued = Stopwatch.GetTimestamp();
            pool.UnsafeQueue(s_itemProbe, item, preferLocal: false);
        }
        Waits.OrThrow(run.Done, $"{BurstCount:N0} timers to fire");
        if (!itemsDone.Wait(Waits.Stuck))
        {
            throw new TimeoutException("The ordinary items queued around the burst did not all run.");
        }
        foreach (ITimer timer in timers)
        {
            timer.Dispose();
        }
        var late = new double[BurstCount];
        for (int i = 0; i < BurstCount; i++)
        {
            late[i] = Stopwatch.GetElapsedTime(probes[i].Scheduled, probes[i].Fired).TotalMilliseconds - BurstDueMs;
        }
        var waits = new double[ItemCount];
        for (int i = 0; i < ItemCount; i++)
        {
            waits[i] = Stopwatch.GetElapsedTime(items[i].Queued, items[i].Started).TotalMilliseconds;
        }
        Array.Sort(late);
        Array.Sort(waits);
        return new Measurement { Items = BurstCount + ItemCount }
            .Set(s_p99.Name, Stats.Percentile(late, 99))
            .Set(s_max.Name, late[^1])
            .Set(s_itemP99.Name, Stats.Percentile(waits, 99))
            .Set(s_itemMax.Name, waits[^1]);
    }

    /// <summary>A burst timer's callback: records its start, then computes for 20 µs.</summary>
    private static readonly TimerCallback s_burstProbe = static state =>
    {
        long now = Stopwatch.GetTimestamp();
        var probe = (Probe)state!;
        probe.Fired = now;
        long until = now + s_burstCallbackTicks;
        while (Stopwatch.GetTimestamp() < until)
        {
            Thread.SpinWait(4);
        }
        if (Interlocked.Decrement(ref probe.Run.Remaining) == 0)
        {
            probe.Run.Done.Set();
        }
    };

    private static readonly Action<object?> s_itemProbe = static state =>
    {
        var item = (ItemProbe)state!;
        item.Started = Stopwatch.GetTimestamp();
        item.Done!.Signal();
    };

    private sealed class ItemProbe
    {
        public CountdownEvent? Done;
        public long Queued;
        public long Started;
    }

    private static readonly TimerCallback s_nothing = static _ => { };

    private static readonly TimerCallback s_probe = static state =>
    {
        var probe = (Probe)state!;
        probe.Fired = Stopwatch.GetTimestamp();
        if (Interlocked.Decrement(ref probe.Run.Remaining) == 0)
        {
            probe.Run.Done.Set();
        }
    };

    private sealed class FiringRun(int count)
    {
        public readonly ManualResetEventSlim Done = new(false);
        public int Remaining = count;
    }

    private sealed class Probe(FiringRun run, int dueMs)
    {
        public readonly FiringRun Run = run;
        public readonly int DueMs = dueMs;
        public long Scheduled;
        public long Fired;
    }

    /// <summary>CPU-bound 1 ms items, 4 per core, each queueing itself again (from outside the worker's local queue) until stopped.</summary>
    private sealed class Saturation
    {
        private static readonly long s_itemTicks = Stopwatch.Frequency / 1000;
        private readonly IPoolUnderTest _pool;
        private readonly ManualResetEventSlim _drained = new(false);
        private volatile bool _stop;
        private int _live;

        private Saturation(IPoolUnderTest pool) => _pool = pool;

        public static Saturation Start(IPoolUnderTest pool)
        {
            var load = new Saturation(pool);
            int items = 4 * Environment.ProcessorCount;
            load._live = items;
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueue(s_spin, load, preferLocal: false);
            }
            Thread.Sleep(50); // let the backlog form before the first timer
            return load;
        }

        public void Stop()
        {
            _stop = true;
            Waits.OrThrow(_drained, "the saturating items to stop");
        }

        private static readonly Action<object?> s_spin = Spin;

        private static void Spin(object? boxed)
        {
            var load = (Saturation)boxed!;
            long until = Stopwatch.GetTimestamp() + s_itemTicks;
            while (Stopwatch.GetTimestamp() < until)
            {
                Thread.SpinWait(20);
            }
            if (load._stop)
            {
                if (Interlocked.Decrement(ref load._live) == 0)
                {
                    load._drained.Set();
                }
                return;
            }
            load._pool.UnsafeQueue(s_spin, load, preferLocal: false);
        }
    }
}
