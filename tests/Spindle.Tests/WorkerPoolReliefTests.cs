using System;
using System.Collections.Generic;
using System.Diagnostics;
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

    private static WorkerPool CreatePool(int minThreads, int maxThreads, TimeSpan? reliefDelay = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolReliefTests),
            MinThreads = minThreads,
            MaxThreads = maxThreads,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
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

    private static Probe QueueProbe(WorkerPool pool, ConcurrencyMeter? meter = null, ManualResetEventSlim? gate = null)
    {
        var probe = new Probe();
        pool.UnsafeQueueUserWorkItem(p =>
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
        }, probe, preferLocal: false);
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
        // probes are queued until one runs on the relief thread, and then ten more: each runs once, on the pool, and
        // most on the relief thread (a worker whose item happens to end first may take one).
        using WorkerPool pool = CreatePool(minThreads: 2, maxThreads: 8);
        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(2), viaSlot);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(3, Waits.MustHappen) && second.WaitForItems(3, Waits.MustHappen), "The chains did not start.");
        Assert.True(ProbeUntilRelieved(pool) is not null, "No outside probe ever ran on the relief thread while both workers ran 2 ms items.");

        const int probes = 10;
        int onRelief = 0;
        var where = new List<string>();
        for (int i = 0; i < probes; i++)
        {
            Probe probe = QueueProbe(pool);
            Assert.True(probe.Ran.Wait(Waits.MustHappen), "An outside probe never ran.");
            Assert.True(probe.OnPool, "A probe ran on a thread that is not the pool's.");
            onRelief += probe.OnRelief ? 1 : 0;
            where.Add($"{probe.ThreadName} ({pool.ThreadCount} workers)");
            Thread.Sleep(3);
            Assert.Equal(1, Volatile.Read(ref probe.Runs));
        }
        Assert.True(onRelief >= probes / 2, $"Only {onRelief} of {probes} probes ran on the relief thread while both workers ran 2 ms items: {string.Join(", ", where)}.");
        Assert.False(first.Faulted || second.Faulted);
    }

    /// <summary>Queues probes one at a time until one runs on the relief thread (held at <paramref name="gate"/>, if any); null if none did.</summary>
    private static Probe? ProbeUntilRelieved(WorkerPool pool, ManualResetEventSlim? gate = null)
    {
        for (int attempt = 0; attempt < 100; attempt++)
        {
            Probe probe = QueueProbe(pool, gate: gate);
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
    public void APoolAtItsMaximum_OrWithReliefOff_NeverRunsOutsideWorkBesideItsWorkers(int minThreads, int maxThreads, bool reliefOff)
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
        Assert.True(meter.Most <= minThreads, $"{meter.Most} items ran at once on a pool of {minThreads} workers.");
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
}
