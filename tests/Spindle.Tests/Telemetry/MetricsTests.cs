using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Linq;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests.Telemetry;

/// <summary>
/// The <c>Spindle</c> meter, read with a <see cref="MeterListener"/> as any collector does: its instruments describe the
/// pool they are tagged with, agree with the pool's own counters, and carry the lanes.
/// </summary>
public sealed class MetricsTests
{
    /// <summary>Collects every measurement of the Spindle meter tagged with one pool's name.</summary>
    private sealed class Collector : IDisposable
    {
        private readonly MeterListener _listener = new();
        private readonly string _pool;

        public Collector(string pool)
        {
            _pool = pool;
            _listener.InstrumentPublished = (instrument, listener) =>
            {
                if (instrument.Meter.Name == "Spindle")
                {
                    listener.EnableMeasurementEvents(instrument);
                }
            };
            _listener.SetMeasurementEventCallback<long>((instrument, value, tags, _) => Add(instrument, value, tags));
            _listener.SetMeasurementEventCallback<double>((instrument, value, tags, _) => Add(instrument, value, tags));
            _listener.Start();
        }

        public ConcurrentQueue<(string Instrument, double Value, Dictionary<string, object?> Tags)> Measurements { get; } = new();

        private void Add(Instrument instrument, double value, ReadOnlySpan<KeyValuePair<string, object?>> tags)
        {
            var copy = new Dictionary<string, object?>();
            foreach (KeyValuePair<string, object?> tag in tags)
            {
                copy[tag.Key] = tag.Value;
            }
            if (copy.TryGetValue("spindle.pool.name", out object? pool) && (string?)pool == _pool)
            {
                Measurements.Enqueue((instrument.Name, value, copy));
            }
        }

        public List<(string Instrument, double Value, Dictionary<string, object?> Tags)> Collect()
        {
            Measurements.Clear();
            _listener.RecordObservableInstruments();
            return [.. Measurements];
        }

        public void Dispose() => _listener.Dispose();
    }

    private static double Single(List<(string Instrument, double Value, Dictionary<string, object?> Tags)> measurements, string instrument) =>
        Assert.Single(measurements, m => m.Instrument == instrument).Value;

    [Fact]
    public void ThePoolsInstruments_AgreeWithItsCounters()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 2, MaxThreads = 2 });
        using var done = new CountdownEvent(1_000);
        for (int i = 0; i < 1_000; i++)
        {
            pool.QueueUserWorkItem(_ => done.Signal());
        }
        Waits.For(done, "the items");
        Waits.Until(() => pool.CompletedWorkItemCount == 1_000, "the completed count");
        using ITimer timer = pool.CreateTimer(_ => { }, null, TimeSpan.FromHours(1), Timeout.InfiniteTimeSpan);

        List<(string Instrument, double Value, Dictionary<string, object?> Tags)> seen = collector.Collect();

        Assert.Equal(pool.ThreadCount, Single(seen, "spindle.pool.thread.count"));
        Assert.Equal(1_000, Single(seen, "spindle.pool.work_item.count"));
        Assert.Equal(0, Single(seen, "spindle.pool.queue.length"));
        Assert.Equal(0, Single(seen, "spindle.pool.work_item.cancelled.count"));
        Assert.Equal(0, Single(seen, "spindle.pool.dedicated_thread.count"));
        Assert.Equal(0, Single(seen, "spindle.pool.thread.blocking.count"));
        Assert.Equal(1, Single(seen, "spindle.pool.timer.count"));
        Assert.Equal(0, Single(seen, "spindle.pool.registered_wait.count"));
        Assert.True(Single(seen, "spindle.pool.park.count") >= 0);
        Assert.True(Single(seen, "spindle.pool.steal.count") >= 0);
        Assert.DoesNotContain(seen, m => m.Instrument == "spindle.pool.thread.injection.count");
        var added = seen.Where(m => m.Instrument == "spindle.pool.thread.added.count").ToList();
        Assert.Equal(["blocking_region", "demand", "long_running", "minimum_raised", "starvation"],
            added.Select(m => (string?)m.Tags["spindle.thread.reason"]).Order());
        double demand = Assert.Single(added, m => (string?)m.Tags["spindle.thread.reason"] == "demand").Value;
        Assert.Equal(pool.GetThreadInjectionCount(ThreadInjectionReason.Demand), demand);
        double minimum = Assert.Single(added, m => (string?)m.Tags["spindle.thread.reason"] == "minimum_raised").Value;
        Assert.Equal(pool.GetThreadInjectionCount(ThreadInjectionReason.MinimumRaised), minimum);
        var retired = seen.Where(m => m.Instrument == "spindle.pool.thread.retired.count").ToList();
        Assert.Equal(["idle", "surplus"], retired.Select(m => (string?)m.Tags["spindle.thread.reason"]).Order());
        var failures = seen.Where(m => m.Instrument == "spindle.pool.thread.creation_failure.count").ToList();
        Assert.Contains(failures, m => (string?)m.Tags["spindle.thread.kind"] == "worker");
        Assert.All(failures, m => Assert.Equal(0, m.Value));
        Assert.All(failures, m => Assert.Matches("^[a-z_]+$", (string?)m.Tags["spindle.thread.kind"]));
    }

    [Fact]
    public void RetiredThreads_AreCountedApartFromAddedOnes()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 0, MaxThreads = 1, IdleTimeout = TimeSpan.FromMilliseconds(50) });
        using var ran = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => ran.Set());
        Waits.For(ran, "the item");
        Waits.Until(() => pool.ThreadCount == 0, "the idle worker retired");

        List<(string Instrument, double Value, Dictionary<string, object?> Tags)> seen = collector.Collect();

        Assert.Equal(1, Assert.Single(seen, m => m.Instrument == "spindle.pool.thread.added.count" && (string?)m.Tags["spindle.thread.reason"] == "demand").Value);
        Assert.Equal(1, Assert.Single(seen, m => m.Instrument == "spindle.pool.thread.retired.count" && (string?)m.Tags["spindle.thread.reason"] == "idle").Value);
        Assert.Equal(0, Assert.Single(seen, m => m.Instrument == "spindle.pool.thread.retired.count" && (string?)m.Tags["spindle.thread.reason"] == "surplus").Value);
    }

    [Fact]
    public void BothHistograms_AdviseBucketsFromMicrosecondsToSeconds()
    {
        // What an exporter reads when it sets up a histogram's aggregation: the instrument's advice.
        var advised = new ConcurrentDictionary<string, IReadOnlyList<double>?>();
        using var listener = new MeterListener
        {
            InstrumentPublished = (instrument, _) =>
            {
                if (instrument.Meter.Name == "Spindle" && instrument is Histogram<double> histogram)
                {
                    advised[instrument.Name] = histogram.Advice?.HistogramBucketBoundaries;
                }
            },
        };
        listener.Start();
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name });

        foreach (string instrument in new[] { "spindle.pool.work_item.duration", "spindle.pool.work_item.wait.duration" })
        {
            Assert.True(advised.TryGetValue(instrument, out IReadOnlyList<double>? buckets), $"{instrument} was not published");
            Assert.NotNull(buckets);
            Assert.Equal(buckets.Order(), buckets);
            Assert.Equal(1e-6, buckets[0]);
            Assert.Equal(10, buckets[^1]);
            // Microseconds are told apart: a 15 µs item and a 60 µs one land in different buckets.
            Assert.Contains(buckets, b => b > 15e-6 && b < 60e-6);
        }
    }

    [Fact]
    public void TheMeter_CarriesThePackagesVersion()
    {
        string? version = null;
        using var listener = new MeterListener
        {
            InstrumentPublished = (instrument, _) =>
            {
                if (instrument.Meter.Name == "Spindle")
                {
                    version = instrument.Meter.Version;
                }
            },
        };
        listener.Start();
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}" });

        string informational = typeof(WorkerPool).Assembly.GetCustomAttribute<AssemblyInformationalVersionAttribute>()!.InformationalVersion;
        Assert.NotNull(version);
        Assert.StartsWith(version, informational, StringComparison.Ordinal);
        Assert.DoesNotContain('+', version);
        Assert.NotEqual(typeof(WorkerPool).Assembly.GetName().Version!.ToString(), version); // not the four-part assembly version
    }

    [Fact]
    public void ItemExceptions_AreCountedByType()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using var reported = new CountdownEvent(3);
        pool.UnhandledException += (_, _) => reported.Signal();
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("one"));
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("two"));
        pool.QueueUserWorkItem(_ => throw new TimeoutException("three"));
        Waits.For(reported, "the three exceptions");

        var counted = collector.Measurements.Where(m => m.Instrument == "spindle.pool.work_item.exception.count").ToList();
        Assert.Equal(3, counted.Sum(m => m.Value));
        Assert.Equal(2, counted.Where(m => (string?)m.Tags["error.type"] == typeof(InvalidOperationException).FullName).Sum(m => m.Value));
        Assert.Equal(1, counted.Where(m => (string?)m.Tags["error.type"] == typeof(TimeoutException).FullName).Sum(m => m.Value));
    }

    [Fact]
    public void StuckItems_AreCounted_WithTheirLane()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1, StuckItemThreshold = TimeSpan.FromMilliseconds(50) });
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "slow" });
        using var release = new ManualResetEventSlim();
        using var done = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            release.Wait(Waits.MustHappen);
            done.Set();
        });
        try
        {
            Waits.Until(() => collector.Measurements.Any(m => m.Instrument == "spindle.pool.work_item.stuck.count"), "the stuck item counted");
        }
        finally
        {
            release.Set();
        }
        Waits.For(done, "the stuck item's end");

        var stuck = Assert.Single(collector.Measurements, m => m.Instrument == "spindle.pool.work_item.stuck.count");
        Assert.Equal(1, stuck.Value);
        Assert.Equal("slow", stuck.Tags["spindle.lane.name"]);
    }

    [Fact]
    public void LaneInstruments_CarryTheLanesNameAndPriority()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1 });
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "interactive", Priority = LanePriority.High });
        WorkerPoolLane low = pool.CreateLane(new LaneOptions { Name = "batch", Priority = LanePriority.Low, MaxConcurrency = 1 });
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        try
        {
            for (int i = 0; i < 3; i++)
            {
                high.QueueUserWorkItem(_ => { });
            }
            for (int i = 0; i < 5; i++)
            {
                low.QueueUserWorkItem(_ => { });
            }

            List<(string Instrument, double Value, Dictionary<string, object?> Tags)> seen = collector.Collect();

            double Lane(string instrument, string lane) =>
                Assert.Single(seen, m => m.Instrument == instrument && (string?)m.Tags["spindle.lane.name"] == lane).Value;
            Assert.Equal(3, Lane("spindle.lane.queue.length", "interactive"));
            Assert.Equal(5, Lane("spindle.lane.queue.length", "batch"));
            Assert.Equal(0, Lane("spindle.lane.work_item.count", "batch"));
            Assert.Equal(8, Single(seen, "spindle.pool.queue.length"));
            Assert.Equal("high", Assert.Single(seen, m => m.Instrument == "spindle.lane.queue.length" && (string?)m.Tags["spindle.lane.name"] == "interactive").Tags["spindle.lane.priority"]);
        }
        finally
        {
            gate.Set();
        }
        Waits.Until(() => low.CompletedWorkItemCount == 5 && high.CompletedWorkItemCount == 3, "the lanes' items");
        List<(string Instrument, double Value, Dictionary<string, object?> Tags)> after = collector.Collect();
        Assert.Equal(5, Assert.Single(after, m => m.Instrument == "spindle.lane.work_item.count" && (string?)m.Tags["spindle.lane.name"] == "batch").Value);
    }

    [Fact]
    public async Task TheRunTimeHistogram_SamplesItemsOnlyWhileEnabled()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1 });
        // Nobody listens yet: the sampled items are not timed (and nothing is recorded anywhere).
        await pool.Run(() => { }).WaitAsync(Waits.MustHappen);

        using var collector = new Collector(name);
        // Items longer than the pacer's target (100 µs): once it has noticed the listener, it times every one.
        const int Items = 128;
        using var done = new CountdownEvent(Items);
        for (int i = 0; i < Items; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                long until = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 5_000; // 200 µs
                while (Stopwatch.GetTimestamp() < until)
                {
                    Thread.SpinWait(10);
                }
                done.Signal();
            });
        }
        Waits.For(done, "the items");
        Waits.Until(() => collector.Measurements.Count(m => m.Instrument == "spindle.pool.work_item.duration") >= Items / 4, "sampled run times");

        Assert.All(collector.Measurements.Where(m => m.Instrument == "spindle.pool.work_item.duration"), m => Assert.True(m.Value >= 150e-6));
    }

    [Fact]
    public void TheRunTimeHistogram_TimesEveryItemOfADedicatedThread()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1 });
        // Long-running items: each one runs on a dedicated thread, not on the worker, and no worker item lasts 40 ms.
        const int Items = 3;
        using var done = new CountdownEvent(Items);
        for (int i = 0; i < Items; i++)
        {
            pool.QueueUserWorkItem(static d => { Thread.Sleep(50); d.Signal(); }, done, WorkItemOptions.LongRunning);
        }
        Waits.For(done, "the long-running items");
        Waits.Until(() => collector.Measurements.Count(m => m.Instrument == "spindle.pool.work_item.duration" && m.Value >= 0.04) >= Items,
            "a run time of 40 ms or more for every long-running item");
        Assert.All(collector.Measurements.Where(m => m.Instrument == "spindle.pool.work_item.duration" && m.Value >= 0.04),
            m => Assert.False(m.Tags.ContainsKey("spindle.lane.name")));
    }

    [Fact]
    public void TheQueueWaitHistogram_SamplesEnqueues_AndSampledItemsKeepTheirContextAndLane()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 2, MaxThreads = 2 });
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "sampled", MaxConcurrency = 1 });
        var flowed = new AsyncLocal<string?> { Value = "caller" };
        const int Items = 1_000;
        int sawContext = 0;
        int laneItemsInLane = 0;
        using var done = new CountdownEvent(2 * Items);
        // A fresh thread: a thread's sampling pace carries over from whatever it queued before (another test's pool).
        var producer = new Thread(() =>
        {
            for (int i = 0; i < Items; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    if (flowed.Value == "caller")
                    {
                        Interlocked.Increment(ref sawContext);
                    }
                    done.Signal();
                });
            }
        });
        producer.Start();
        Assert.True(producer.Join(Waits.MustHappen));
        // The lane items from a fresh thread too: a burst grows a thread's sampling interval, and the countdown it leaves
        // is counted in enqueues, not time.
        producer = new Thread(() =>
        {
            for (int i = 0; i < Items; i++)
            {
                // Lane items queued further apart than the pacer's target (100 µs): most of them are sampled.
                long until = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 5_000;
                while (Stopwatch.GetTimestamp() < until)
                {
                    Thread.SpinWait(10);
                }
                lane.QueueUserWorkItem(_ =>
                {
                    if (WorkerPoolLane.Current == lane)
                    {
                        Interlocked.Increment(ref laneItemsInLane);
                    }
                    done.Signal();
                });
            }
        });
        producer.Start();
        Assert.True(producer.Join(Waits.MustHappen));
        Waits.For(done, "the items");

        var waits = collector.Measurements.Where(m => m.Instrument == "spindle.pool.work_item.wait.duration").ToList();
        Assert.True(waits.Count >= Items / 10 && waits.Count <= 2 * Items, $"{waits.Count} sampled waits for {2 * Items} items");
        Assert.All(waits, m => Assert.True(m.Value >= 0));
        Assert.Contains(waits, m => m.Tags.TryGetValue("spindle.lane.name", out object? l) && (string?)l == "sampled");
        Assert.Equal(Items, sawContext);
        Assert.Equal(Items, laneItemsInLane);
    }

    [Fact]
    public void AfterABurst_AQuietProducersEnqueuesAreSampledAgain()
    {
        // A burst of enqueues grows the producing thread's sampling interval to thousands of items; the few enqueues of
        // the quiet spell after it, far apart, must still be sampled (the pace is bounded in time, not only in count).
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 2, MaxThreads = 2 });
        const int Burst = 200_000;
        const int Quiet = 5;
        using var burstDone = new CountdownEvent(Burst);
        using var quietDone = new CountdownEvent(Quiet);
        int sampledBeforeQuiet = 0;
        var producer = new Thread(() =>
        {
            for (int i = 0; i < Burst; i++)
            {
                pool.UnsafeQueueUserWorkItem(static d => d.Signal(), burstDone, preferLocal: false);
            }
            burstDone.Wait(Waits.MustHappen);
            sampledBeforeQuiet = collector.Measurements.Count(m => m.Instrument == "spindle.pool.work_item.wait.duration");
            for (int i = 0; i < Quiet; i++)
            {
                Thread.Sleep(20);
                pool.UnsafeQueueUserWorkItem(static d => d.Signal(), quietDone, preferLocal: false);
            }
        });
        producer.Start();
        Assert.True(producer.Join(Waits.MustHappen));
        Waits.For(quietDone, "the quiet spell's items");

        int sampledInQuiet = collector.Measurements.Count(m => m.Instrument == "spindle.pool.work_item.wait.duration") - sampledBeforeQuiet;
        Assert.True(sampledInQuiet >= Quiet - 1,
            $"{sampledInQuiet} of the {Quiet} enqueues made 20 ms apart after a burst of {Burst:N0} were sampled");
    }

    [Fact]
    public void ASampledItem_IsCancelledByShutdownLikeAnyOther()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1 });
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        int ran = 0;
        for (int i = 0; i < 256; i++)
        {
            pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }
        var cancel = System.Threading.Tasks.Task.Run(() => pool.Shutdown(ShutdownMode.CancelPending));
        Waits.Until(() => pool.CancelledWorkItemCount == 256, "every queued item cancelled, sampled ones included");
        gate.Set();
        Assert.True(cancel.Wait(Waits.MustHappen));
        Assert.Equal(256, cancel.Result);
        Assert.Equal(0, Volatile.Read(ref ran));
    }

    [Fact]
    public void AStoppedPoolsMeter_IsDisposed()
    {
        string name = $"{nameof(MetricsTests)}-{Guid.NewGuid():N}";
        using var collector = new Collector(name);
        var pool = new WorkerPool(new WorkerPoolOptions { Name = name });
        Assert.Contains(collector.Collect(), m => m.Instrument == "spindle.pool.thread.count");

        pool.Dispose();

        Assert.DoesNotContain(collector.Collect(), m => m.Instrument == "spindle.pool.thread.count");
    }
}
