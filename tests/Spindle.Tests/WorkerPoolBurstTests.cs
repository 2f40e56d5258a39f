using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Work that arrives from outside the pool in a burst reaches every parked worker, not only the first one woken; bursts
/// that come back to back find a worker still searching instead of waking one each, and the worker parks once they stop.
/// </summary>
public sealed class WorkerPoolBurstTests
{
    private static readonly TimeSpan Generous = TimeSpan.FromSeconds(10);

    [Fact]
    public void ABurstFromOutside_ReachesEveryParkedWorker()
    {
        // Items that meet at a barrier of four can only finish on four workers at once, and MaxThreads = 4 means the
        // pool cannot add a thread instead of waking one: the round completes only if the burst wakes every parked
        // worker (each woken worker blocks at the barrier, so it cannot run a second item in the meantime).
        const int workers = 4;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolBurstTests),
            MinThreads = workers,
            MaxThreads = workers,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });

        int[] first = RunBarrierRound(pool, workers); // creates the four workers
        Assert.Equal(workers, pool.ThreadCount);
        Thread.Sleep(200); // with the queues empty, every worker parks (within microseconds: the wait is generous)
        int[] second = RunBarrierRound(pool, workers);

        Assert.Equal(workers, pool.ThreadCount);
        Assert.Equal(workers, first.Length);
        Assert.Equal(workers, second.Length);
    }

    [Fact]
    public void BackToBackBurstsFromOutside_FindTheWorkerSearching()
    {
        // One worker, and an extension long enough (a million yields, a third of a second or more) that no scheduling
        // hiccup of this thread between two bursts outlasts it. Without the extension the worker parks after nearly
        // every burst: this thread needs a wake-up of its own before it queues the next one, far longer than a search.
        const int bursts = 200;
        const int items = 32;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolBurstTests),
            MinThreads = 1,
            MaxThreads = 1,
            BurstYieldAttempts = 1_000_000,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        // Each burst is queued 50 µs after the previous one completed (this thread sleeps on an event that does not spin,
        // then computes): a gap between bursts, well past the end of a plain search, far shorter than a long park.
        var round = new BurstRound();
        WaitCallback item = static state => ((BurstRound)state!).ItemDone();

        long parksBefore = pool.WorkerParkCount;
        for (int burst = 0; burst < bursts; burst++)
        {
            SpinFor(TimeSpan.FromMicroseconds(50));
            round.Start(items);
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueueUserWorkItem(item, round);
            }
            Assert.True(round.Done.Wait(Generous), $"Burst {burst} did not complete.");
        }
        long parks = pool.WorkerParkCount - parksBefore;
        // The first bursts wake the worker from parks (the first from a long one); after one short park and a burst it
        // stays searching. Each hiccup long enough to make a park long costs one more.
        Assert.True(parks < bursts / 4, $"The worker parked {parks} times in {bursts} back-to-back bursts.");
    }

    [Fact]
    public void ASearchExtendedByBackToBackBursts_EndsOnceTheyStop()
    {
        // The extension is bounded: with no more work the worker parks. The extension here is short (two thousand
        // yields) so that the bound stays well inside the wait even on a busy machine, where each yield can hand the
        // core to another process for a time slice; a million yields, as above, could then outlast any wait.
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolBurstTests),
            MinThreads = 1,
            MaxThreads = 1,
            BurstYieldAttempts = 2_000,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        var round = new BurstRound();
        WaitCallback item = static state => ((BurstRound)state!).ItemDone();
        for (int burst = 0; burst < 50; burst++)
        {
            SpinFor(TimeSpan.FromMicroseconds(50));
            round.Start(32);
            for (int i = 0; i < 32; i++)
            {
                pool.UnsafeQueueUserWorkItem(item, round);
            }
            Assert.True(round.Done.Wait(Generous), $"Burst {burst} did not complete.");
        }

        Assert.True(SpinWait.SpinUntil(() => pool.ParkedWorkerCount == 1, TimeSpan.FromSeconds(30)),
            "The worker kept searching after the bursts stopped.");
    }

    private static void SpinFor(TimeSpan duration)
    {
        long end = Stopwatch.GetTimestamp() + (long)(duration.TotalSeconds * Stopwatch.Frequency);
        while (Stopwatch.GetTimestamp() < end)
        {
            Thread.SpinWait(8);
        }
    }

    /// <summary>A burst's countdown, with an event its waiter sleeps on at once (no spinning).</summary>
    private sealed class BurstRound
    {
        public readonly ManualResetEventSlim Done = new(false, spinCount: 0);
        private int _remaining;

        public void Start(int items)
        {
            Done.Reset();
            Volatile.Write(ref _remaining, items);
        }

        public void ItemDone()
        {
            if (Interlocked.Decrement(ref _remaining) == 0)
            {
                Done.Set();
            }
        }
    }

    /// <summary>Queues <paramref name="count"/> barrier items from this thread; returns the distinct threads that ran them.</summary>
    private static int[] RunBarrierRound(WorkerPool pool, int count)
    {
        using var barrier = new Barrier(count);
        using var done = new CountdownEvent(count);
        var threads = new ConcurrentDictionary<int, bool>();
        int missed = 0;
        for (int i = 0; i < count; i++)
        {
            pool.UnsafeQueueUserWorkItem<object?>(_ =>
            {
                threads[Environment.CurrentManagedThreadId] = true;
                if (!barrier.SignalAndWait(Generous))
                {
                    Interlocked.Increment(ref missed);
                }
                done.Signal();
            }, null, preferLocal: false);
        }
        Assert.True(done.Wait(Generous + Generous), "The burst's items did not all finish.");
        Assert.Equal(0, Volatile.Read(ref missed)); // every item met the others: all workers ran at once
        return [.. threads.Keys];
    }
}
