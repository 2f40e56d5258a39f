using System;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The relief thread (<see cref="WorkerPoolOptions.OutsideWorkReliefDelay"/>): while every worker is inside a long item,
/// items queued from outside run on it instead of waiting for the first of those items to end; a pool at its maximum
/// thread count, or with relief turned off, never runs one beside its workers; shutdown waits for what it runs and joins
/// it. The chains keep every core busy, so the class runs alone.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolReliefTests
{
    private const string ReliefSuffix = " relief";

    private static WorkerPool CreatePool(int minThreads, int maxThreads, TimeSpan? reliefDelay = null, TimeSpan? stuckThreshold = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolReliefTests),
            MinThreads = minThreads,
            MaxThreads = maxThreads,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        if (stuckThreshold is TimeSpan threshold)
        {
            options.StuckItemThreshold = threshold;
        }
        if (reliefDelay is TimeSpan delay)
        {
            options.OutsideWorkReliefDelay = delay;
        }
        return new WorkerPool(options);
    }

    /// <summary>Where an outside probe ran: its thread, whether that thread is the pool's, and its name.</summary>
    private sealed class Probe
    {
        public readonly ManualResetEventSlim Ran = new();
        public int Runs;
        public bool OnPool;
        public Thread? Thread;
        public string? ThreadName;

        public bool OnRelief => ThreadName?.EndsWith(ReliefSuffix, StringComparison.Ordinal) == true;
    }

    private static Probe QueueProbe(WorkerPool pool, ConcurrencyMeter? meter = null, ManualResetEventSlim? gate = null, bool viaRun = false)
    {
        var probe = new Probe();
        Action<Probe> body = p =>
        {
            using (meter?.Enter())
            {
                Interlocked.Increment(ref p.Runs);
                p.OnPool = WorkerPool.Current == pool;
                p.Thread = Thread.CurrentThread;
                p.ThreadName = Thread.CurrentThread.Name;
                p.Ran.Set();
                if (p.OnRelief)
                {
                    gate?.Wait(Waits.MustHappen); // only the relief thread waits: a worker would hold its chain
                }
            }
        };
        if (viaRun)
        {
            _ = pool.Run(() => body(probe)); // from outside the pool: to its own queue, as a Run item with a shared callback
        }
        else
        {
            pool.UnsafeQueueUserWorkItem(body, probe, preferLocal: false);
        }
        return probe;
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void OutsideItems_RunOnTheReliefThread_WhileEveryWorkerIsInsideALongItem(bool viaSlot)
    {
        // Two workers, each in a chain of 2 ms items: an outside item would wait for the first of them to end (0.7 ms on
        // average). Nobody takes outside work for the relief delay (20 µs), so the relief thread runs it, as one of the
        // pool's threads. The workers count as being in long items only once their looks have timed them (a fresh
        // worker first looks after 61 items; an outside item waiting makes the stall monitor ask for a look sooner), so
        // probes are queued until one runs on the relief thread; then ten more, each of which runs once, on the pool
        // (on the relief thread or at a worker's look: which one wins is timing, measured by the comparison program).
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
        Probe? relieved = ProbeUntilRelieved(pool);
        Assert.True(relieved is not null, "No outside probe ever ran on the relief thread while both workers ran 2 ms items.");
        Assert.True(relieved.OnPool, "The relief thread is not one of the pool's threads for WorkerPool.Current.");

        for (int i = 0; i < 10; i++)
        {
            Probe probe = QueueProbe(pool);
            Assert.True(probe.Ran.Wait(Waits.MustHappen), "An outside probe never ran.");
            Assert.True(probe.OnPool, "A probe ran on a thread that is not the pool's.");
            Thread.Sleep(3);
            Assert.Equal(1, Volatile.Read(ref probe.Runs));
        }
        Assert.Equal(1, Volatile.Read(ref relieved.Runs));
        Assert.False(first.Faulted || second.Faulted);
    }

    [Fact]
    public void AnItemTheReliefThreadRuns_IsTimedForTheRunTimeHistogram()
    {
        // Both workers run chains of 2 ms items; the probe the relief thread takes is held for 40 ms, which no other
        // item lasts, so a run time of 30 ms or more can only come from the relief thread.
        var runTimes = new System.Collections.Concurrent.ConcurrentQueue<double>();
        using var listener = new System.Diagnostics.Metrics.MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == "Spindle" && instrument.Name == "spindle.pool.work_item.duration")
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<double>((_, value, tags, _) =>
        {
            foreach (System.Collections.Generic.KeyValuePair<string, object?> tag in tags)
            {
                if (tag.Key == "spindle.pool.name" && (string?)tag.Value == nameof(WorkerPoolReliefTests))
                {
                    runTimes.Enqueue(value);
                }
            }
        });
        listener.Start();
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: false);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: false);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
        using var gate = new ManualResetEventSlim();
        Probe? relieved = ProbeUntilRelieved(pool, gate);
        Assert.True(relieved is not null, "No outside probe ever ran on the relief thread while both workers ran 2 ms items.");
        Thread.Sleep(40);
        gate.Set();
        Waits.Until(() => runTimes.Any(t => t >= 0.03), "the relief thread's item in the run-time histogram");
        Assert.False(first.Faulted || second.Faulted);
    }

    /// <summary>Queues probes one at a time until one runs on the relief thread (held at <paramref name="gate"/>, if any); null if none did.</summary>
    private static Probe? ProbeUntilRelieved(WorkerPool pool, ManualResetEventSlim? gate = null, bool viaRun = false)
    {
        for (int attempt = 0; attempt < 100; attempt++)
        {
            Probe probe = QueueProbe(pool, gate: gate, viaRun: viaRun);
            Assert.True(probe.Ran.Wait(Waits.MustHappen), "An outside probe never ran.");
            if (probe.OnRelief)
            {
                return probe;
            }
            Thread.Sleep(3);
        }
        return null;
    }

    [Theory]
    [InlineData(1, 1, false)] // a one-thread pool, used to run items one at a time
    [InlineData(2, 2, false)] // a pool at its maximum
    [InlineData(2, 8, true)]  // relief turned off
    public void APoolAtItsMaximum_OrWithReliefOff_RunsOutsideWorkOnItsWorkersOnly(int minThreads, int maxThreads, bool reliefOff)
    {
        using WorkerPool pool = CreatePool(minThreads, maxThreads, reliefOff ? Timeout.InfiniteTimeSpan : null);
        var meter = new ConcurrencyMeter();
        var chains = new SpinChain[minThreads];
        for (int i = 0; i < chains.Length; i++)
        {
            chains[i] = new SpinChain(pool, TimeSpan.FromMilliseconds(5), viaSlot: true, meter);
            chains[i].Start();
        }
        try
        {
            foreach (SpinChain chain in chains)
            {
                Assert.True(chain.WaitForItems(3, Waits.MustHappen), "A chain did not start.");
            }
            for (int i = 0; i < 10; i++)
            {
                Probe probe = QueueProbe(pool, meter);
                Assert.True(probe.Ran.Wait(Waits.MustHappen), "An outside probe never ran.");
                Assert.False(probe.OnRelief, $"A probe ran on the relief thread ({probe.ThreadName}).");
                Thread.Sleep(2);
            }
        }
        finally
        {
            foreach (SpinChain chain in chains)
            {
                chain.Dispose();
            }
        }
        // The pool's own thread policy may add workers up to the maximum (starvation); nothing may go beyond it.
        Assert.True(meter.Most <= maxThreads, $"{meter.Most} items ran at once on a pool of at most {maxThreads} threads.");
    }

    [Fact]
    public async Task Shutdown_WaitsForAnItemTheReliefThreadRuns_AndJoinsTheThread()
    {
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        using var gate = new ManualResetEventSlim();
        Probe? relieved;
        using (var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true))
        using (var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true))
        {
            first.Start();
            second.Start();
            Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
            // The probe that runs on the relief thread waits there at the gate (one a worker takes returns at once).
            relieved = ProbeUntilRelieved(pool, gate);
            Assert.NotNull(relieved);
        }

        Task shutdown = pool.ShutdownAsync(ShutdownMode.Drain);
        await Task.Delay(Waits.MustNotHappen);
        Assert.False(shutdown.IsCompleted, "Shutdown finished while the relief thread was still running an item.");
        gate.Set();
        await shutdown.WaitAsync(Waits.MustHappen);
        Assert.True(Waits.Poll(() => !relieved!.Thread!.IsAlive, Waits.MustHappen), "The relief thread outlived its pool.");
        Assert.Equal(1, Volatile.Read(ref relieved!.Runs));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void AnItemStuckOnTheReliefThread_IsReported_NamingTheThreadAndTheCallersDelegate(bool viaRun)
    {
        // The workers run 2 ms items (far below the threshold); the probe the relief thread takes waits at the gate, so
        // it is the only item that runs past the threshold. The detector names the relief thread and the probe's own
        // delegate, also when it is wrapped in a Run item (whose queued callback is shared by every Run).
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8, stuckThreshold: TimeSpan.FromMilliseconds(100));
        var reports = new System.Collections.Concurrent.ConcurrentQueue<StuckWorkItemEventArgs>();
        pool.StuckWorkItemDetected += (_, e) => reports.Enqueue(e);
        using var gate = new ManualResetEventSlim();
        Probe? relieved;
        try
        {
            using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true);
            using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true);
            first.Start();
            second.Start();
            Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
            relieved = ProbeUntilRelieved(pool, gate, viaRun);
            Assert.True(relieved is not null, "No outside probe ever ran on the relief thread while both workers ran 2 ms items.");
            Assert.True(Waits.Poll(() => reports.Any(r => r.WorkerThreadName == relieved.ThreadName), Waits.MustHappen),
                "The item held on the relief thread was never reported.");
        }
        finally
        {
            gate.Set();
        }

        // A worker's 2 ms item could be reported only if the machine stalled it for the whole threshold: not asserted.
        StuckWorkItemEventArgs report = Assert.Single(reports, r => r.WorkerThreadName == relieved.ThreadName);
        Assert.Equal(relieved.ThreadName, report.WorkerThreadName);
        Assert.Equal(relieved.Thread!.ManagedThreadId, report.ManagedThreadId);
        Assert.Contains(nameof(QueueProbe), report.Description, StringComparison.Ordinal);
        Assert.True(report.RunningTime >= TimeSpan.FromMilliseconds(100), $"Reported after {report.RunningTime}, before the threshold.");
        Assert.Null(report.LaneName);
    }

    [Theory]
    [InlineData(ShutdownMode.Drain)]
    [InlineData(ShutdownMode.CancelPending)]
    public void OutsideItemsFromManyProducers_RunOnce_OrAreCancelled_WhileTheReliefThreadAndTheWorkersTakeThem(ShutdownMode mode)
    {
        // Two workers in chains of 1 ms items, so the relief thread is armed, and three producers queueing from outside in
        // small bursts: the relief thread and the workers' looks take items from the same queue. Every item runs once
        // (drain), or runs once or is cancelled and counted (a shutdown racing the producers and the relief thread).
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        var first = new SpinChain(pool, TimeSpan.FromMilliseconds(1), viaSlot: true);
        var second = new SpinChain(pool, TimeSpan.FromMilliseconds(1), viaSlot: false);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
        Assert.True(ProbeUntilRelieved(pool) is not null, "The relief thread never ran an outside item.");

        const int producers = 3;
        int perProducer = Stress.Scale(2_000, 50_000);
        using var ledger = new ExactlyOnceLedger(producers * perProducer);
        int onRelief = 0;
        int accepted = 0;
        Action<int> item = index =>
        {
            if (Thread.CurrentThread.Name?.EndsWith(ReliefSuffix, StringComparison.Ordinal) == true)
            {
                Interlocked.Increment(ref onRelief);
            }
            ledger.Hit(index);
        };
        var threads = new Thread[producers];
        for (int p = 0; p < producers; p++)
        {
            int start = p * perProducer;
            threads[p] = new Thread(() =>
            {
                for (int i = 0; i < perProducer; i++)
                {
                    try
                    {
                        pool.UnsafeQueueUserWorkItem(item, start + i, preferLocal: false);
                        Interlocked.Increment(ref accepted);
                    }
                    catch (ObjectDisposedException)
                    {
                        return; // shutdown began: the rest is refused, not lost
                    }
                    if (i % 20 == 19)
                    {
                        Thread.Sleep(i % 60 == 59 ? 1 : 0);
                    }
                }
            })
            { IsBackground = true };
            threads[p].Start();
        }

        if (mode == ShutdownMode.Drain)
        {
            foreach (Thread thread in threads)
            {
                Assert.True(thread.Join(Waits.MustHappen), "A producer did not finish.");
            }
            ledger.WaitForAll("outside items beside the relief thread");
            ledger.AssertExactlyOnce();
            Assert.True(Volatile.Read(ref onRelief) > 0, "No item ran on the relief thread.");
            first.Dispose();
            second.Dispose();
            pool.Shutdown(ShutdownMode.Drain);
        }
        else
        {
            Assert.True(Waits.Poll(() => ledger.Total >= perProducer, Waits.MustHappen), "The items did not start running.");
            int cancelled = pool.Shutdown(ShutdownMode.CancelPending);
            foreach (Thread thread in threads)
            {
                Assert.True(thread.Join(Waits.MustHappen), "A producer did not finish.");
            }
            int ran = ledger.AssertAtMostOnce();
            int total = Volatile.Read(ref accepted);
            // Each chain may have had its next item queued when the shutdown began: that one is cancelled and counted too.
            Assert.InRange(cancelled, total - ran, total - ran + 2);
            first.Dispose();
            second.Dispose();
        }
    }
}
