using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Outside work behind local chains: one self-requeuing chain per core keeps every worker busy (each item spins for
/// its length, 20 µs or 1 ms, then queues its successor to the running worker's local queue with the zero-allocation
/// work-item form and <c>preferLocal: true</c>), while an outside thread queues one trivial item every 5 ms
/// (<c>UnsafeQueueUserWorkItem(WaitCallback, state)</c>, the global queue; the thread sleeps between items, so it takes
/// no core from the workers). Metrics: the time from just before each outside
/// item is queued until it starts, p50 and p99. An item still waiting when the measured part ends (plus a grace of
/// 2 s) counts with the time it had waited by then, so a pool that starves outside work cannot look good by leaving
/// samples out.
/// </summary>
internal sealed class FairnessScenario : IScenario
{
    private static readonly TimeSpan QuickDuration = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan FullDuration = TimeSpan.FromSeconds(10);
    private static readonly TimeSpan WarmupDuration = TimeSpan.FromMilliseconds(100);
    private static readonly TimeSpan Grace = TimeSpan.FromSeconds(2);
    private const double IntervalMicroseconds = 5_000;

    public string Id => "fairness";

    public string Description =>
        $"a self-requeuing chain per core of 20 us or 1 ms items, one outside item every 5 ms for {QuickDuration.TotalSeconds:0.#} s ({FullDuration.TotalSeconds:N0} s with --full): time until it starts";

    public IReadOnlyList<string> Variants { get; } = ["20us", "1ms"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("p50", "us", Better.Lower),
        new("p99", "us", Better.Lower),
    ];

    public string HeadlineMetric => "p99";

    // Its effect is large (the built-in pool's p99 is thousands of times Spindle's): two runs per pool keep the quick
    // run of every scenario under 10 minutes.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        double itemMicroseconds = variant switch
        {
            "20us" => 20,
            "1ms" => 1_000,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        int chains = Environment.ProcessorCount;
        PoolWarmup.StartThreads(pool, chains);
        var load = new ChainLoad(pool, chains, Pacer.TicksFromMicroseconds(itemMicroseconds));
        load.Start();
        try
        {
            // The warm-up is a shorter run of the same shape, so the probe and the chains are compiled before timing.
            Warmup.Repeat(() => Probe(pool, WarmupDuration));
            double[] waits = Probe(pool, full ? FullDuration : QuickDuration);
            Array.Sort(waits);
            return new Measurement { Items = waits.Length }
                .Set("p50", Stats.Percentile(waits, 50))
                .Set("p99", Stats.Percentile(waits, 99));
        }
        finally
        {
            load.Stop();
        }
    }

    /// <summary>Queues one outside item every 5 ms for <paramref name="duration"/>; returns each one's wait in microseconds.</summary>
    private static double[] Probe(IPoolUnderTest pool, TimeSpan duration)
    {
        int count = Math.Max(1, (int)(duration.TotalMilliseconds * 1_000 / IntervalMicroseconds));
        var samples = new Sample[count];
        for (int i = 0; i < count; i++)
        {
            samples[i] = new Sample();
        }
        long interval = Pacer.TicksFromMicroseconds(IntervalMicroseconds);
        long next = Stopwatch.GetTimestamp();
        for (int i = 0; i < count; i++)
        {
            // Sleeps only: a spinning outside thread would take a core from a worker for the last stretch of every
            // interval, and a worker descheduled in the middle of an item finds the item's time used up when it comes
            // back, so it would look at the global queue early and flatter the figure.
            Pacer.WaitUntil(next, TimeSpan.Zero);
            Sample sample = samples[i];
            sample.Queued = Stopwatch.GetTimestamp();
            pool.UnsafeQueue(s_probe, sample);
            next += interval;
        }
        long deadline = Stopwatch.GetTimestamp() + Pacer.Ticks(Grace);
        var waits = new double[count];
        for (int i = 0; i < count; i++)
        {
            Sample sample = samples[i];
            long started = Volatile.Read(ref sample.Started);
            while (started == 0 && Stopwatch.GetTimestamp() < deadline)
            {
                Thread.Sleep(1);
                started = Volatile.Read(ref sample.Started);
            }
            // Censored at the deadline: the item had waited at least that long.
            waits[i] = Pacer.ToMicroseconds((started == 0 ? Stopwatch.GetTimestamp() : started) - sample.Queued);
        }
        return waits;
    }

    private static readonly WaitCallback s_probe = static boxed =>
    {
        var sample = (Sample)boxed!;
        Volatile.Write(ref sample.Started, Stopwatch.GetTimestamp());
    };

    private sealed class Sample
    {
        public long Queued;
        public long Started;
    }

    /// <summary>The background load: one chain per core, each item spinning for its length, then queueing itself locally.</summary>
    private sealed class ChainLoad(IPoolUnderTest pool, int chains, long itemTicks)
    {
        private readonly CountdownEvent _stopped = new(chains);
        private readonly Link[] _links = new Link[chains];
        private volatile bool _stopping;

        public void Start()
        {
            for (int i = 0; i < _links.Length; i++)
            {
                _links[i] = new Link(this);
                pool.UnsafeQueue(_links[i], preferLocal: false);
            }
        }

        public void Stop()
        {
            _stopping = true;
            if (!_stopped.Wait(Waits.Stuck))
            {
                throw new TimeoutException("The chains did not stop.");
            }
        }

        private sealed class Link(ChainLoad load) : PoolWorkItem
        {
            public override void Execute()
            {
                long until = Stopwatch.GetTimestamp() + load.ItemTicks;
                while (Stopwatch.GetTimestamp() < until)
                {
                    Thread.SpinWait(4);
                }
                if (load._stopping)
                {
                    load._stopped.Signal();
                    return;
                }
                load.Pool.UnsafeQueue(this, preferLocal: true);
            }
        }

        private long ItemTicks => itemTicks;

        private IPoolUnderTest Pool => pool;
    }
}
