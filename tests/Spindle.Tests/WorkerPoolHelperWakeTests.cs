using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Liveness when items wait for other items, up to the pool's thread target (no injection beyond it is needed): work
/// left in a busy worker's ring must reach an idle or not-yet-created worker. See IdleCoordinator, where the last
/// searcher to find work decides whether to bring in one more.
/// </summary>
public sealed class WorkerPoolHelperWakeTests
{
    private static WorkerPool CreatePool(int threads) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolHelperWakeTests),
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void ItemsThatWaitForEachOther_UpToTheThreadTarget_AllStart()
    {
        // Three items queued from outside that each wait until all three have started, on a pool whose target is three
        // threads. Nothing is blocked that the pool could not run: it must bring in (or wake) a worker for each.
        const int items = 3;
        using var allStarted = new CountdownEvent(items);
        // The items hold their workers until the test has looked (not for a time of their own, which could run out
        // first and free a worker for the missing item, hiding the failure).
        using var release = new ManualResetEventSlim();
        using WorkerPool pool = CreatePool(threads: items); // disposed first: it drains while the events still exist
        try
        {
            for (int i = 0; i < items; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    allStarted.Signal();
                    release.Wait(2 * Waits.MustHappen);
                }, null);
            }
            Assert.True(allStarted.Wait(Waits.MustHappen),
                $"Only {items - allStarted.CurrentCount} of {items} rendezvous items started within {Waits.MustHappen.TotalSeconds} s " +
                $"on a pool of {items} threads (threads now: {pool.ThreadCount}, pending: {pool.PendingWorkItemCount}).");
        }
        finally
        {
            release.Set();
        }
    }

    [Fact]
    public void ItemsLeftInABusyWorkersRing_AreRunByIdleWorkers()
    {
        // A worker queues two items locally and then waits for both to start; a third worker is available (the thread
        // target is three), so both must start while the producer waits.
        using var bothStarted = new CountdownEvent(2);
        using var producerDone = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim(); // holds the started items until the test has looked
        using WorkerPool pool = CreatePool(threads: 3); // disposed first: it drains while the events still exist
        bool sawBoth = false;
        try
        {
            pool.QueueUserWorkItem(_ =>
            {
                for (int i = 0; i < 2; i++)
                {
                    pool.QueueUserWorkItem(__ =>
                    {
                        bothStarted.Signal();
                        release.Wait(2 * Waits.MustHappen);
                    }, null);
                }
                sawBoth = bothStarted.Wait(Waits.MustHappen);
                producerDone.Set();
            }, null);
            Waits.For(producerDone, "the producing item");
            Assert.True(sawBoth,
                $"{2 - bothStarted.CurrentCount} of 2 items queued locally by a waiting worker started within " +
                $"{Waits.MustHappen.TotalSeconds} s although the pool may run 3 threads (threads now: {pool.ThreadCount}).");
        }
        finally
        {
            release.Set();
        }
    }
}
