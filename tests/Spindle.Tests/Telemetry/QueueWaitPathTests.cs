using System;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Threading;
using Xunit;

namespace Spindle.Tests.Telemetry;

/// <summary>
/// The queue-wait histogram on both enqueue paths: items a worker queues to its own local queue and items queued from
/// outside while no worker is free. A sampled enqueue wraps the item in a timing sample; every item still runs exactly
/// once, and the samples are recorded under the pool's name.
/// </summary>
public sealed class QueueWaitPathTests
{
    private const string WaitInstrument = "spindle.pool.work_item.wait.duration";

    /// <summary>Counts the queue-wait measurements tagged with one pool's name.</summary>
    private sealed class WaitCounter : IDisposable
    {
        private readonly MeterListener _listener = new();
        private int _count;

        public WaitCounter(string pool)
        {
            _listener.InstrumentPublished = (instrument, listener) =>
            {
                if (instrument.Meter.Name == "Spindle" && instrument.Name == WaitInstrument)
                {
                    listener.EnableMeasurementEvents(instrument);
                }
            };
            _listener.SetMeasurementEventCallback<double>((_, value, tags, _) =>
            {
                foreach (var tag in tags)
                {
                    if (tag.Key == "spindle.pool.name" && (string?)tag.Value == pool)
                    {
                        Assert.True(value >= 0, $"A queue wait of {value} s.");
                        Interlocked.Increment(ref _count);
                    }
                }
            });
            _listener.Start();
        }

        public int Count => Volatile.Read(ref _count);

        public void Dispose() => _listener.Dispose();
    }

    /// <summary>Spins for about 200 µs: enqueues further apart than the wait sampler's target pace (100 µs) are mostly sampled.</summary>
    private static void PauseBetweenEnqueues()
    {
        long until = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 5_000;
        while (Stopwatch.GetTimestamp() < until)
        {
            Thread.SpinWait(10);
        }
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void ItemsAWorkerQueuesToItself_WithTheWaitHistogramOn_RunOnceEach_AndAreSampled(bool asWorkItems)
    {
        string name = $"{nameof(QueueWaitPathTests)}-{Guid.NewGuid():N}";
        using var waits = new WaitCounter(name);
        using WorkerPool pool = SingleWorker.NewPool(name);
        const int Items = 300;
        using var ledger = new ExactlyOnceLedger(Items);
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            for (int i = 0; i < Items; i++)
            {
                PauseBetweenEnqueues();
                if (asWorkItems)
                {
                    pool.UnsafeQueueUserWorkItem(new LedgerItem(ledger, i), preferLocal: true);
                }
                else
                {
                    pool.UnsafeQueueUserWorkItem(static entry => entry.Ledger.Hit(entry.Index), new LedgerEntry(ledger, i), preferLocal: true);
                }
            }
        }, null);

        ledger.WaitForAll("the items the worker queued to itself");
        ledger.AssertExactlyOnce();
        Assert.True(waits.Count >= Items / 10, $"{waits.Count} sampled waits for {Items} local enqueues far apart.");
    }

    [Fact]
    public void ItemsQueuedFromOutside_WhileTheOnlyWorkerIsBlocked_WithTheWaitHistogramOn_RunOnceEach_AndAreSampled()
    {
        string name = $"{nameof(QueueWaitPathTests)}-{Guid.NewGuid():N}";
        using var waits = new WaitCounter(name);
        using WorkerPool pool = SingleWorker.NewPool(name);
        const int Items = 300;
        using var ledger = new ExactlyOnceLedger(Items);
        using ManualResetEventSlim gate = SingleWorker.Occupy(pool);

        // Nobody parked, nobody searching, the pool at its maximum: each enqueue finds no worker to wake or add.
        var producer = new Thread(() =>
        {
            for (int i = 0; i < Items; i++)
            {
                PauseBetweenEnqueues();
                pool.UnsafeQueueUserWorkItem(static entry => entry.Ledger.Hit(entry.Index), new LedgerEntry(ledger, i), preferLocal: false);
            }
        });
        producer.Start();
        Assert.True(producer.Join(Waits.MustHappen));
        gate.Set();

        ledger.WaitForAll("the items queued behind the blocked worker");
        ledger.AssertExactlyOnce();
        Assert.True(waits.Count >= Items / 10, $"{waits.Count} sampled waits for {Items} outside enqueues far apart.");
    }

    private sealed record LedgerEntry(ExactlyOnceLedger Ledger, int Index);

    private sealed class LedgerItem(ExactlyOnceLedger ledger, int index) : IWorkItem
    {
        public void Execute() => ledger.Hit(index);
    }
}
