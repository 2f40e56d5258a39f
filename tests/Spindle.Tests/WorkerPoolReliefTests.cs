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

    /// <summary>Where a lane probe ran: whether on the relief thread, and which lane the thread said it was running.</summary>
    private sealed class LaneProbe
    {
        public readonly ManualResetEventSlim Ran = new();
        public int Runs;
        public bool OnRelief;
        public WorkerPoolLane? CurrentLane;
        public string? ThreadName;
    }

    /// <summary>Whether the calling thread is a pool's relief thread.</summary>
    private static bool OnReliefThread => Thread.CurrentThread.Name?.EndsWith(ReliefSuffix, StringComparison.Ordinal) == true;

    /// <summary>
    /// Queues a probe to <paramref name="lane"/> from this (outside) thread; if it runs on the relief thread, it runs
    /// <paramref name="onRelief"/> there before it returns.
    /// </summary>
    private static LaneProbe QueueLaneProbe(WorkerPoolLane lane, Action? onRelief = null)
    {
        var probe = new LaneProbe();
        lane.UnsafeQueueUserWorkItem(p =>
        {
            Interlocked.Increment(ref p.Runs);
            p.ThreadName = Thread.CurrentThread.Name;
            p.OnRelief = OnReliefThread;
            p.CurrentLane = WorkerPoolLane.Current;
            if (p.OnRelief)
            {
                onRelief?.Invoke();
            }
            p.Ran.Set();
        }, probe, preferLocal: false);
        return probe;
    }

    /// <summary>
    /// Queues probes to <paramref name="lane"/> (<see cref="QueueLaneProbe"/>), one at a time, until one runs on the
    /// relief thread. Null if none did.
    /// </summary>
    private static LaneProbe? LaneProbeUntilRelieved(WorkerPoolLane lane, Action? onRelief = null)
    {
        for (int attempt = 0; attempt < 100; attempt++)
        {
            LaneProbe probe = QueueLaneProbe(lane, onRelief);
            Assert.True(probe.Ran.Wait(Waits.MustHappen), "A lane probe never ran.");
            if (probe.OnRelief)
            {
                return probe;
            }
            Thread.Sleep(3);
        }
        return null;
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void AHighLanesItem_RunsOnTheReliefThread_AsTheLanesOwn_WhileEveryWorkerIsInsideALongItem(bool longItemsInALowLane)
    {
        // Both workers run chains of 2 ms items: of the pool's own queue, or of a Low lane (whose items the workers run in
        // turns, timed by the same look interval). A High lane's item queued from outside would wait for the first of
        // them to end; nobody takes it for the relief delay, so the relief thread runs it, as the High lane's item.
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "interactive", Priority = LanePriority.High });
        WorkTarget chainTarget = longItemsInALowLane
            ? pool.CreateLane(new LaneOptions { Name = "batch", Priority = LanePriority.Low })
            : pool;
        using var first = new SpinChain(chainTarget, TimeSpan.FromMilliseconds(2), viaSlot: true);
        using var second = new SpinChain(chainTarget, TimeSpan.FromMilliseconds(2), viaSlot: false);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");

        LaneProbe? relieved = LaneProbeUntilRelieved(high);
        Assert.True(relieved is not null, "No High lane item ever ran on the relief thread while both workers ran 2 ms items.");
        Assert.Same(high, relieved.CurrentLane);
        Thread.Sleep(5);
        Assert.Equal(1, Volatile.Read(ref relieved.Runs));
        Assert.Equal(0, high.PendingWorkItemCount);
        Assert.True(Waits.Poll(() => high.RunningWorkItemCount == 0, Waits.MustHappen), "The relief thread kept the lane's slot.");
        Assert.False(first.Faulted || second.Faulted);
    }

    [Fact]
    public void ASerialLanesItems_KeepTheirOrderAndCap_WhenTheReliefThreadRunsSomeOfThem()
    {
        // Both workers run chains of 2 ms items of the pool's queue. A serial lane gets bursts of short items from outside:
        // the relief thread runs some, the workers' dispatches others; every item runs once, one at a time, in order.
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "strand", MaxConcurrency = 1 });
        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: false);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
        Assert.True(LaneProbeUntilRelieved(serial) is not null, "No serial lane item ever ran on the relief thread.");

        const int items = 400;
        var meter = new ConcurrencyMeter();
        var order = new System.Collections.Concurrent.ConcurrentQueue<int>();
        int onRelief = 0;
        using var done = new CountdownEvent(items);
        for (int i = 0; i < items; i++)
        {
            serial.UnsafeQueueUserWorkItem(index =>
            {
                using (meter.Enter())
                {
                    if (OnReliefThread)
                    {
                        Interlocked.Increment(ref onRelief);
                    }
                    order.Enqueue(index);
                    long until = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 20_000; // 50 us
                    while (Stopwatch.GetTimestamp() < until)
                    {
                        Thread.SpinWait(8);
                    }
                }
                done.Signal();
            }, i, preferLocal: false);
            if (i % 20 == 19)
            {
                Thread.Sleep(1);
            }
        }
        Assert.True(done.Wait(Waits.MustHappen), "The serial lane's items did not all run.");
        Assert.Equal(Enumerable.Range(0, items), order);
        Assert.Equal(1, meter.Most);
        Assert.True(Volatile.Read(ref onRelief) > 0, "The relief thread ran none of the serial lane's items.");
        Assert.False(first.Faulted || second.Faulted);
    }

    [Fact]
    public void AnItemOfACappedLane_OnTheReliefThread_CannotBlockWaitingForRoomInItsOwnLane()
    {
        // As on a worker: the relief thread holds the lane's only slot while the item runs, so waiting for room in the lane
        // would wait for itself. The call is refused instead of hanging the relief thread.
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        WorkerPoolLane mailbox = pool.CreateLane(new LaneOptions { Name = "mailbox", MaxConcurrency = 1, QueueLimit = 1 });
        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: false);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
        Exception? error = null;
        bool triedAndFailed = false;
        LaneProbe? relieved = LaneProbeUntilRelieved(mailbox, () =>
        {
            mailbox.QueueUserWorkItem(_ => { }); // takes the lane's one place
            triedAndFailed = !mailbox.TryQueueUserWorkItem(_ => { }, 0, preferLocal: false);
            try
            {
                mailbox.QueueUserWorkItem(_ => { });
            }
            catch (InvalidOperationException e)
            {
                error = e;
            }
        });
        Assert.True(relieved is not null, "No item of the capped lane ever ran on the relief thread.");
        Assert.True(triedAndFailed, "TryQueueUserWorkItem on the full lane did not refuse.");
        Assert.IsType<InvalidOperationException>(error);
        Assert.Contains("wait for itself", error!.Message, StringComparison.Ordinal);
        Assert.False(first.Faulted || second.Faulted);
    }

    [Fact]
    public void ALaneGivenLongRunningItems_IsLeftToTheWorkers()
    {
        // A long-running item on the relief thread would hold it for its whole length (a worker runs one inside a blocking
        // region, and the pool adds a thread; nothing replaces the relief thread), so the relief thread leaves alone a lane
        // that has been given one: that lane's items wait for the workers, while another lane's are still relieved.
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        WorkerPoolLane blocking = pool.CreateLane(new LaneOptions { Name = "blocking" });
        WorkerPoolLane other = pool.CreateLane(new LaneOptions { Name = "other" });
        using (var ran = new ManualResetEventSlim())
        {
            blocking.UnsafeQueueUserWorkItem(r => r.Set(), ran, WorkItemOptions.LongRunning);
            Assert.True(ran.Wait(Waits.MustHappen), "The long-running item never ran.");
        }
        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: true);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot: false);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");

        Assert.True(LaneProbeUntilRelieved(other) is not null, "No item of a plain lane ever ran on the relief thread.");
        for (int i = 0; i < 30; i++)
        {
            LaneProbe probe = QueueLaneProbe(blocking);
            Assert.True(probe.Ran.Wait(Waits.MustHappen), "An item of the lane given long-running items never ran.");
            Assert.False(probe.OnRelief, "The relief thread ran an item of a lane given long-running items.");
            Thread.Sleep(3);
        }
        Assert.False(first.Faulted || second.Faulted);
    }
}
