using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

// Counters (ThreadCount, PendingWorkItemCount, CompletedWorkItemCount) match what the test knows, and completed items
// are not retained.
public abstract partial class WorkerPoolContractTests
{
    // ---- Counters ------------------------------------------------------------------------------------------

    [Fact]
    public void Counters_MatchWhatTheTestKnows()
    {
        const int local = 5;
        const int outside = 10;
        using var ledger = new ExactlyOnceLedger(local + outside);
        WorkerPool pool = CreatePool(threads: 1);
        Assert.Equal(0, pool.ThreadCount); // threads are created lazily
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(0, pool.CompletedWorkItemCount);
        Assert.False(pool.IsShutdownStarted);

        using var queuedLocally = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < local; i++)
            {
                pool.UnsafeQueueUserWorkItem(new LedgerItem(ledger, i), preferLocal: true);
            }
            queuedLocally.Set();
            release.Wait(Waits.MustHappen);
        }, null);
        Waits.For(queuedLocally, "the gate item");
        for (int i = 0; i < outside; i++)
        {
            pool.UnsafeQueueUserWorkItem(new LedgerItem(ledger, local + i), preferLocal: false);
        }

        // The only worker is inside the gate item: nothing is queueing or dispatching, so the counts are exact.
        Assert.Equal(1, pool.ThreadCount);
        Assert.Equal(local + outside, pool.PendingWorkItemCount);
        Assert.Equal(0, pool.CompletedWorkItemCount);

        release.Set();
        ledger.WaitForAll("items behind the gate");
        Waits.Until(() => pool.CompletedWorkItemCount == local + outside + 1, "the completed count to include every item");
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(1, pool.ThreadCount);

        pool.Dispose();
        Assert.True(pool.IsShutdownStarted);
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(local + outside + 1, pool.CompletedWorkItemCount);
        ledger.AssertExactlyOnce();
    }

    [Fact]
    public void ThreadCount_ReachesTheConfiguredCount_AndNeverExceedsIt()
    {
        const int threads = 2;
        WorkerPool pool = CreatePool(threads);
        int maxSeen = 0;
        using (pool)
        {
            // Two items that wait for each other need both threads.
            using var bothStarted = new CountdownEvent(threads);
            using var sawTwo = new CountdownEvent(threads);
            for (int i = 0; i < threads; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    bothStarted.Signal();
                    if (bothStarted.Wait(Waits.MustHappen) && pool.ThreadCount == threads)
                    {
                        sawTwo.Signal();
                    }
                }, null);
            }
            Waits.For(sawTwo, "both items to see two threads");

            // Under a burst the count stays within the limit.
            using var ledger = new ExactlyOnceLedger(20_000);
            for (int i = 0; i < ledger.Count; i++)
            {
                pool.QueueUserWorkItem(index =>
                {
                    int seen = pool.ThreadCount;
                    int max;
                    while (seen > (max = Volatile.Read(ref maxSeen)) && Interlocked.CompareExchange(ref maxSeen, seen, max) != max)
                    {
                    }
                    ledger.Hit(index);
                }, i, preferLocal: false);
            }
            ledger.WaitForAll("the burst");
            Assert.Equal(threads, pool.ThreadCount);
        }
        Assert.Equal(threads, maxSeen);
        Assert.Equal(0, pool.ThreadCount);
    }

    // ---- No retention: a completed item becomes collectable --------------------------------------------------

    /// <summary>What an item's state points to; the test checks that it becomes collectable.</summary>
    private sealed class Payload(CountdownEvent done)
    {
        public void Run() => done.Signal();
    }

    private sealed class PayloadItem(Payload payload) : IWorkItem
    {
        public void Execute() => payload.Run();
    }

    private static readonly AsyncLocal<Payload?> s_flowedPayload = new();

    public static TheoryData<int, bool> RetentionCases()
    {
        var cases = new TheoryData<int, bool>();
        for (int way = 0; way < 7; way++)
        {
            cases.Add(way, false);
            cases.Add(way, true);
        }
        return cases;
    }

    [Theory]
    [MemberData(nameof(RetentionCases))]
    public void CompletedItem_IsNotRetainedByThePool(int way, bool queuedFromAWorker)
    {
        // One worker, so the item is not stolen (see the next test for that case).
        using WorkerPool pool = CreatePool(threads: 1);
        using var done = new CountdownEvent(1);
        WeakReference weak;
        if (queuedFromAWorker)
        {
            WeakReference? fromWorker = null;
            using var queued = new ManualResetEventSlim();
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                fromWorker = QueueWithPayload(pool, way, done);
                queued.Set();
            }, null);
            Waits.For(queued, "the queueing item");
            weak = fromWorker!;
        }
        else
        {
            weak = QueueWithPayload(pool, way, done);
        }
        Waits.For(done, "the item holding the payload");
        Waits.Until(() => pool.CompletedWorkItemCount == (queuedFromAWorker ? 2 : 1), "the item to finish");
        Retention.AssertCollected(weak, $"the state of a completed item (way {way}, from a worker: {queuedFromAWorker})");
    }

    [Fact]
    public void CompletedItemStolenFromABusyWorker_IsNotRetainedOnceThatWorkerIsIdle()
    {
        using WorkerPool pool = CreatePool(threads: 2);
        using var done = new CountdownEvent(1);
        using var producerFinished = new ManualResetEventSlim();
        WeakReference? weak = null;
        bool ranElsewhere = false;
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            // Two items onto this worker's ring (the second makes it share); the idle worker steals the older one,
            // which holds the payload.
            weak = QueueWithPayload(pool, way: 1, done);
            pool.UnsafeQueueUserWorkItem(static _ => { }, null);
            // This worker stays busy until the payload item has run, so it must have been stolen.
            ranElsewhere = done.Wait(Waits.MustHappen);
            producerFinished.Set();
        }, null);
        Waits.For(producerFinished, "the producing item");
        Assert.True(ranElsewhere, "The older of two items queued by a busy worker was not stolen by the idle one.");
        Waits.Until(() => pool.CompletedWorkItemCount == 3, "all three items to finish");
        // Both workers are idle now; the ring the item was stolen from has not been pushed to since.
        Retention.AssertCollected(weak!, "the state of a completed item that was stolen from another worker's ring");
    }

    [Fact]
    public void CompletedItemsTakenFromTheGlobalQueueInBatches_AreNotRetained()
    {
        const int items = 100;
        using WorkerPool pool = CreatePool(threads: 1);
        using var done = new CountdownEvent(items);
        WeakReference[] weak = QueueManyWithPayloads(pool, items, done);
        Waits.For(done, "the items holding payloads");
        Waits.Until(() => pool.CompletedWorkItemCount == items, "the items to finish");
        Retention.AssertCollected(weak, "the states of completed items taken from the global queue in batches");
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference[] QueueManyWithPayloads(WorkerPool pool, int count, CountdownEvent done)
    {
        var weak = new WeakReference[count];
        for (int i = 0; i < count; i++)
        {
            var payload = new Payload(done);
            weak[i] = new WeakReference(payload);
            pool.UnsafeQueueUserWorkItem(static p => ((Payload)p!).Run(), payload);
        }
        return weak;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference QueueWithPayload(WorkerPool pool, int way, CountdownEvent done)
    {
        var payload = new Payload(done);
        var weak = new WeakReference(payload);
        switch (way)
        {
            case 0:
                pool.QueueUserWorkItem(static p => ((Payload)p!).Run(), payload);
                break;
            case 1:
                pool.UnsafeQueueUserWorkItem(static p => ((Payload)p!).Run(), payload);
                break;
            case 2:
                pool.QueueUserWorkItem(static p => p.Run(), payload, preferLocal: true);
                break;
            case 3:
                pool.UnsafeQueueUserWorkItem(static p => p.Run(), payload, preferLocal: false);
                break;
            case 4:
                // A value-typed state that references the payload.
                pool.QueueUserWorkItem(static s => s.Payload.Run(), (Payload: payload, Tag: 4), preferLocal: true);
                break;
            case 5:
                pool.UnsafeQueueUserWorkItem(new PayloadItem(payload), preferLocal: true);
                break;
            default:
                // Only the captured ExecutionContext references the payload.
                QueueWithFlowedPayload(pool, payload);
                break;
        }
        return weak;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void QueueWithFlowedPayload(WorkerPool pool, Payload payload)
    {
        ExecutionContext? saved = ExecutionContext.Capture();
        s_flowedPayload.Value = payload;
        pool.QueueUserWorkItem(static _ => s_flowedPayload.Value!.Run());
        s_flowedPayload.Value = null;
        if (saved is not null)
        {
            ExecutionContext.Restore(saved);
        }
    }
}
