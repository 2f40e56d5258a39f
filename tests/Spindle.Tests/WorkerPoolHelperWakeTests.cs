using System;
using System.Threading;
using Spindle.Queues;
using Spindle.Scheduling;
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
    public void AnItemInABusyWorkersRing_ThatWokeNobody_IsTakenByTheWorkerThatParkedBeforeItArrived()
    {
        // A local push is unfenced: its store may still be on its way when a parking worker takes its last look, and
        // the pusher, having read that worker as searching, wakes nobody. Here the item is put in the ring directly,
        // after the other worker has parked, and nothing wakes anyone: the parked worker must still find it (its first
        // sleep is bounded while another worker is awake), since its owner waits for it and never returns to its ring.
        using var otherRan = new ManualResetEventSlim();
        using var ringItemRan = new ManualResetEventSlim();
        using var producerDone = new ManualResetEventSlim();
        // The look after the bounded sleep must come after the push below, whatever the machine's load: it is set to
        // 2 s here (10 ms by default), which the push, a few milliseconds after the park is seen, precedes.
        using WorkerPool pool = new(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolHelperWakeTests),
            MinThreads = 2,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            RecheckAfterParkMs = 2_000,
        }); // disposed first: it drains while the events still exist
        bool taken = false;
        int parkedBefore = -1;
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            // Wake the other worker with an item of its own, then wait until it has parked again, while this one is busy.
            pool.UnsafeQueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), otherRan, preferLocal: false);
            Waits.For(otherRan, "the other worker's item");
            Waits.Until(() => pool.SchedulerCore.ParkedWorkerCount == 1, "the other worker to park again");
            parkedBefore = pool.SchedulerCore.ParkedWorkerCount;
            Assert.True(Worker.Current!.Local.Ring.TryPush(
                new WorkItemEntry((Action<object?>)(static s => ((ManualResetEventSlim)s!).Set()), ringItemRan, null)));
            taken = ringItemRan.Wait(Waits.MustHappen);
            producerDone.Set();
        }, null);
        Waits.For(producerDone, "the producing item");
        Assert.Equal(1, parkedBefore);
        Assert.True(taken, $"The item left in the busy worker's ring was not taken within {Waits.MustHappen.TotalSeconds} s by the parked worker.");
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

    [Fact]
    public void TheRestOfABatchWhoseFirstItemBlocks_WakesAParkedWorker()
    {
        // The state a worker can reach when another one parks while it takes a batch from the global queue: two outside
        // items wait there, the other worker is parked, nobody searches and no wake is on its way (the parked worker's
        // last look came before the items left the queue, and the items were queued while it still searched). Queued
        // here without a wake, from an item on the one awake worker. That worker takes both at its next dispatch; the
        // first waits for the second. The second must be run by the parked worker: the stall monitor sleeps while a
        // worker is parked, so nothing else would come for it.
        using var secondRan = new ManualResetEventSlim();
        using var firstDone = new ManualResetEventSlim();
        using var queued = new ManualResetEventSlim();
        using WorkerPool pool = CreatePool(threads: 2); // disposed first: it drains while the events still exist
        try
        {
            StartBothWorkers(pool);
            Waits.Until(() => pool.ThreadCount == 2 && pool.ParkedWorkerCount == 2, "both workers parked");

            WaitCallback first = _ =>
            {
                secondRan.Wait(2 * Waits.MustHappen);
                firstDone.Set();
            };
            WaitCallback second = _ => secondRan.Set();
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                // One enqueue wakes one worker: this one. The other stays parked.
                Scheduler scheduler = pool.SchedulerCore;
                scheduler.EnqueueOverflow(new WorkItemEntry(first, null, null));
                scheduler.EnqueueOverflow(new WorkItemEntry(second, null, null));
                queued.Set();
            }, null);
            Waits.For(queued, "the item that queues the pair");
            Assert.True(secondRan.Wait(Waits.MustHappen),
                $"The second item of a batch whose first item waits for it did not run within {Waits.MustHappen.TotalSeconds} s " +
                $"(parked workers: {pool.ParkedWorkerCount}, pending: {pool.PendingWorkItemCount}).");
            Waits.For(firstDone, "the first item");
        }
        finally
        {
            secondRan.Set();
        }
    }

    [Fact]
    public void ABurstOfTimerFirings_WakesTwoParkedWorkers()
    {
        // The timer service hands a burst of firings over in one call, then asks the scheduler to wake workers for it:
        // with two workers parked, both are woken there, the second without waiting for the first to run and hand the
        // search on. Asked here with nothing queued, each woken worker finds nothing and parks again: two more parks,
        // where one wake would give one (and leave the other worker parked throughout).
        using WorkerPool pool = CreatePool(threads: 2);
        StartBothWorkers(pool);
        // Parked, and counted: a worker is on the idle stack just before its park is counted.
        long parksBefore = -1;
        Waits.Until(() =>
        {
            long parks = pool.WorkerParkCount;
            bool settled = pool.ThreadCount == 2 && pool.ParkedWorkerCount == 2 && parks == parksBefore;
            parksBefore = parks;
            Thread.Sleep(20);
            return settled;
        }, "both workers parked");

        pool.SchedulerCore.WakeForUrgent(count: 2);

        Waits.Until(() => pool.WorkerParkCount >= parksBefore + 2 && pool.ParkedWorkerCount == 2,
            "both workers woken and parked again");
    }

    /// <summary>
    /// Two items that wait for each other: both of the pool's two threads exist once they have run. Returns once both
    /// items have returned (the event they wait on is disposed here).
    /// </summary>
    private static void StartBothWorkers(WorkerPool pool)
    {
        using var warm = new CountdownEvent(2);
        int returned = 0;
        for (int i = 0; i < 2; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                warm.Signal();
                warm.Wait(Waits.MustHappen);
                Interlocked.Increment(ref returned);
            }, null);
        }
        Waits.For(warm, "the warm-up items");
        Waits.Until(() => Volatile.Read(ref returned) == 2, "the warm-up items to return");
    }
}
