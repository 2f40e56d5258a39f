using System;
using System.Collections.Concurrent;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Work that arrives from outside the pool in a burst reaches every parked worker, not only the first one woken.
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
