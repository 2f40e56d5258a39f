using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A worker that queues one item to itself does not wake a helper; if its current item then blocks, the stall monitor
/// (the stall monitor) must get the queued item run by another worker.
/// </summary>
public sealed class WorkerPoolStallRescueTests
{
    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void LoneItemQueuedLocallyByAWorkerThatThenWaitsForIt_IsRunByAnotherWorker(bool secondWorkerAlreadyExists)
    {
        // A worker queues one item to itself and then blocks until that item has run (sync-over-async). The pool may
        // run two threads, so the item must be run by the other one, whether it is parked or not created yet.
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolStallRescueTests),
            MinThreads = 2,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        if (secondWorkerAlreadyExists)
        {
            using var both = new CountdownEvent(2);
            for (int i = 0; i < 2; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    both.Signal();
                    both.Wait(Waits.MustHappen);
                });
            }
            Waits.For(both, "both workers to exist");
            Waits.Until(() => pool.CompletedWorkItemCount == 2, "the warm-up items to finish");
            Assert.Equal(2, pool.ThreadCount);
        }
        Assert.True(QueueLocallyThenWaitForIt(pool),
            $"An item a worker queued to itself before blocking did not run within {Waits.MustHappen.TotalSeconds} s " +
            $"although the pool may run two threads (threads: {pool.ThreadCount}).");
    }

    /// <summary>
    /// Runs an item that queues a child to its own worker and then blocks until the child has run; returns whether it
    /// ran within <see cref="Waits.MustHappen"/>.
    /// </summary>
    private static bool QueueLocallyThenWaitForIt(WorkerPool pool)
    {
        using var ran = new ManualResetEventSlim();
        using var producerDone = new ManualResetEventSlim();
        bool sawItRun = false;
        pool.QueueUserWorkItem(_ =>
        {
            pool.QueueUserWorkItem(static state => ((ManualResetEventSlim)state!).Set(), ran, preferLocal: true);
            sawItRun = ran.Wait(Waits.MustHappen);
            producerDone.Set();
        }, null);
        Waits.For(producerDone, "the producing item");
        return sawItRun;
    }

    [Fact]
    public void ItemQueuedLocallyByAWorkerThatThenBlocks_IsStolenByAWorkerThatKeepsFeedingItself()
    {
        // The pool is at its thread limit and nobody is parked, so queueing the item wakes nobody; the other worker
        // runs a chain that re-queues itself to its own queue for ever, so it never runs out of work and never goes
        // looking in the blocked worker's queue on its own. Its items keep completing, so the pool is not stalled
        // either: the monitor must notice the blocked worker's stranded item and have it stolen.
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(ItemQueuedLocallyByAWorkerThatThenBlocks_IsStolenByAWorkerThatKeepsFeedingItself),
            MinThreads = 2,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        using var chainRunning = new ManualResetEventSlim();
        bool stop = false;
        Action<object?>? link = null;
        link = _ =>
        {
            chainRunning.Set();
            Thread.SpinWait(200);
            if (!Volatile.Read(ref stop))
            {
                pool.UnsafeQueueUserWorkItem(link!, null, preferLocal: true);
            }
        };
        pool.UnsafeQueueUserWorkItem(link, null, preferLocal: false);
        Waits.For(chainRunning, "the chain");

        bool sawItRun = QueueLocallyThenWaitForIt(pool);
        Volatile.Write(ref stop, true);
        Assert.True(sawItRun,
            $"An item a worker queued to itself before blocking did not run within {Waits.MustHappen.TotalSeconds} s " +
            "while the pool's other worker kept feeding itself.");
    }
}
