using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// Shutdown: drain or cancel each accepted item exactly once, enqueue racing dispose, dispose from anywhere, idempotent.
public abstract partial class WorkerPoolContractTests
{
    // ---- Drain or cancel: every accepted item runs or is cancelled exactly once ----------------------------

    [Fact]
    public void Dispose_WithWorkQueued_RunsEveryAcceptedItemOnce_AndStopsEveryWorker()
    {
        const int outside = 5_000;
        const int local = 1_000;
        using var ledger = new ExactlyOnceLedger(outside + local);
        WorkerPool pool = CreatePool(SmallThreadCount);
        using var queuedLocally = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < local; i++)
            {
                QueueAnyWay(pool, new LedgerItem(ledger, outside + i), i);
            }
            queuedLocally.Set();
            // Keep this worker (and its ring) busy until shutdown has begun.
            Waits.Poll(() => pool.IsShutdownStarted, Waits.MustHappen);
        }, null);
        for (int i = 0; i < outside; i++)
        {
            QueueAnyWay(pool, new LedgerItem(ledger, i), i);
        }
        Waits.For(queuedLocally, "the item that queues locally");

        Waits.RunBounded(pool.Dispose, "Dispose with work queued");

        ledger.AssertExactlyOnce(); // Dispose returned, so everything accepted has run
        Assert.Equal(outside + local + 1, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.True(pool.IsShutdownStarted);
    }

    [Fact]
    public void ShutdownCancelPending_CancelsEveryItemThatHasNotStarted_ExactlyOnce()
    {
        const int outside = 1_000;
        const int local = 100;
        using var ledger = new ExactlyOnceLedger(outside + local);
        WorkerPool pool = CreatePool(threads: 1);
        using var queuedLocally = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < local; i++)
            {
                QueueAnyWay(pool, new LedgerItem(ledger, outside + i), i);
            }
            queuedLocally.Set();
            Waits.Poll(() => pool.IsShutdownStarted, Waits.MustHappen); // the only worker is busy until shutdown
        }, null);
        Waits.For(queuedLocally, "the item that queues locally");
        for (int i = 0; i < outside; i++)
        {
            QueueAnyWay(pool, new LedgerItem(ledger, i), i);
        }

        int cancelled = -1;
        Waits.RunBounded(() => cancelled = pool.Shutdown(ShutdownMode.CancelPending), "Shutdown(CancelPending)");

        Assert.Equal(0, ledger.AssertAtMostOnce()); // none had started, so none may run
        Assert.Equal(outside + local, cancelled);
        Assert.Equal(1, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
        // Idempotent, and the figure does not change.
        Assert.Equal(cancelled, pool.Shutdown(ShutdownMode.CancelPending));
        Assert.Equal(cancelled, pool.Shutdown(ShutdownMode.Drain));
        pool.Dispose();
        Assert.Equal(0, ledger.AssertAtMostOnce());
    }

    [Fact]
    public void CancelPending_AfterDrainHasBegun_RunsOrCancelsEachItemExactlyOnce()
    {
        const int items = 20_000;
        using var ledger = new ExactlyOnceLedger(items);
        WorkerPool pool = CreatePool(SmallThreadCount);
        for (int i = 0; i < items; i++)
        {
            int index = i;
            pool.QueueUserWorkItem(_ =>
            {
                Thread.SpinWait(100);
                ledger.Hit(index);
            }, null);
        }
        TestThread drain = Waits.Start(pool.Dispose, "Dispose (drain)");
        Waits.Poll(() => ledger.Total >= items / 10, Waits.MustHappen);
        int cancelled = -1;
        Waits.RunBounded(() => cancelled = pool.Shutdown(ShutdownMode.CancelPending), "Shutdown(CancelPending)");
        drain.Join();

        int ran = ledger.AssertAtMostOnce();
        Assert.Equal(items, ran + cancelled);
        Assert.Equal(ran, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Fact]
    public void Shutdown_OfAPoolThatNeverRan_ReturnsAtOnceWithNothingCancelled()
    {
        WorkerPool pool = CreatePool();
        int cancelled = -1;
        Waits.RunBounded(() => cancelled = pool.Shutdown(ShutdownMode.CancelPending), "Shutdown of an unused pool");
        Assert.Equal(0, cancelled);
        Assert.Equal(0, pool.ThreadCount);
        pool.Dispose();
    }

    [Fact]
    public async Task DisposeAsync_DrainsEveryItem_AndStopsEveryWorker()
    {
        const int items = 5_000;
        using var ledger = new ExactlyOnceLedger(items);
        WorkerPool pool = CreatePool(SmallThreadCount);
        for (int i = 0; i < items; i++)
        {
            QueueAnyWay(pool, new LedgerItem(ledger, i), i);
        }
        await pool.DisposeAsync().AsTask().WaitAsync(Waits.MustHappen);
        ledger.AssertExactlyOnce();
        Assert.Equal(0, pool.ThreadCount);
        Assert.Throws<ObjectDisposedException>(() => pool.QueueUserWorkItem(_ => { }));
    }

    // ---- Enqueue racing dispose: each enqueue either runs once or is rejected -------------------------------

    [Fact]
    public void EnqueueRacingDispose_EveryEnqueueIsEitherRunOnceOrRejected() =>
        RunEnqueueRacingDispose(rounds: 10, producers: 3, requeuers: 4);

    internal void RunEnqueueRacingDispose(int rounds, int producers, int requeuers)
    {
        // Items per producer or requeuer. One that gets this far waits for the shutdown to begin before its last
        // attempt, so each of them does meet a rejection however the threads are scheduled.
        const int capacity = 50_000;
        var random = new Random(rounds * 31 + producers);
        for (int round = 0; round < rounds; round++)
        {
            using var ledger = new ExactlyOnceLedger((producers + requeuers) * capacity);
            WorkerPool pool = CreatePool(SmallThreadCount);
            var accepted = new int[producers];
            var acceptedAfterShutdownStarted = new bool[producers];
            var threads = new TestThread[producers];
            using var go = new ManualResetEventSlim();
            for (int p = 0; p < producers; p++)
            {
                int producer = p;
                threads[p] = Waits.Start(() =>
                {
                    go.Wait();
                    int first = producer * capacity;
                    for (int i = 0; i < capacity; i++)
                    {
                        bool last = i == capacity - 1;
                        if (last)
                        {
                            Assert.True(Waits.Poll(() => pool.IsShutdownStarted, Waits.MustHappen), "The shutdown never began.");
                        }
                        try
                        {
                            QueueAnyWay(pool, new LedgerItem(ledger, first + i), i + producer);
                        }
                        catch (ObjectDisposedException)
                        {
                            return;
                        }
                        accepted[producer]++;
                        acceptedAfterShutdownStarted[producer] = last;
                    }
                }, $"producer {p}");
            }
            // Workers that keep requeueing themselves race the dispose on the local path.
            var loops = new RejectableLoop[requeuers];
            for (int r = 0; r < requeuers; r++)
            {
                loops[r] = new RejectableLoop(pool, ledger, (producers + r) * capacity, capacity);
                pool.UnsafeQueueUserWorkItem(loops[r], preferLocal: false);
            }
            go.Set();
            Waits.Poll(() => ledger.Total >= 2_000, Waits.MustHappen);
            Thread.SpinWait(random.Next(0, 200_000)); // dispose at a different point of the race each round
            Waits.RunBounded(pool.Dispose, "Dispose racing enqueues");
            foreach (TestThread thread in threads)
            {
                thread.Join();
            }

            for (int p = 0; p < producers; p++)
            {
                Assert.False(acceptedAfterShutdownStarted[p],
                    $"Round {round}: producer {p} saw IsShutdownStarted return true, and its next enqueue was still accepted.");
                AssertRange(ledger, p * capacity, accepted[p], capacity, $"round {round}, producer {p}");
            }
            for (int r = 0; r < requeuers; r++)
            {
                Assert.False(loops[r].GaveUp, $"Round {round}: requeuer {r} waited for the shutdown in vain.");
                Assert.True(loops[r].AcceptedLinks > 0, $"Round {round}: requeuer {r} was never rejected.");
                AssertRange(ledger, (producers + r) * capacity, loops[r].AcceptedLinks, capacity, $"round {round}, requeuer {r}");
            }
            Assert.Equal(0, pool.ThreadCount);
        }

        static void AssertRange(ExactlyOnceLedger ledger, int first, int accepted, int capacity, string who)
        {
            // Every accepted item ran once; the rejected one (and everything after it) never ran.
            for (int i = 0; i < capacity; i++)
            {
                int expected = i < accepted ? 1 : 0;
                int hits = ledger.HitsOf(first + i);
                if (hits != expected)
                {
                    Assert.Fail($"{who}: item {i} ran {hits} times; {accepted} were accepted before the rejection.");
                }
            }
        }
    }

    /// <summary>Hits the ledger, then requeues itself locally until the pool rejects it.</summary>
    private sealed class RejectableLoop(WorkerPool pool, ExactlyOnceLedger ledger, int first, int capacity) : IWorkItem
    {
        private int _next;             // the number of the link that runs next; links run one after another
        private volatile int _accepted; // set once, when a requeue is rejected: the links accepted before it
        private volatile bool _gaveUp;

        /// <summary>How many links were accepted before the rejection; 0 while the loop has not been rejected.</summary>
        public int AcceptedLinks => _accepted;

        /// <summary>Whether the loop reached its capacity and the shutdown did not begin within the bound.</summary>
        public bool GaveUp => _gaveUp;

        public void Execute()
        {
            int step = _next;
            ledger.Hit(first + step);
            if (step + 2 == capacity && !Waits.Poll(() => pool.IsShutdownStarted, Waits.MustHappen))
            {
                _gaveUp = true; // stop here rather than run past this loop's range of the ledger
                return;
            }
            _next = step + 1; // published to the next link by the queue
            try
            {
                pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
            }
            catch (ObjectDisposedException)
            {
                _accepted = step + 1;
            }
        }
    }

    [Fact]
    public void DisposeRacingTheFirstEnqueues_IsClean() => RunDisposeRacingFirstEnqueues(rounds: 300);

    internal void RunDisposeRacingFirstEnqueues(int rounds)
    {
        // The first enqueues create the workers; Dispose may begin while a worker is being created and started.
        for (int round = 0; round < rounds; round++)
        {
            using var ledger = new ExactlyOnceLedger(4);
            WorkerPool pool = CreatePool(SmallThreadCount);
            int accepted = 0;
            using var go = new CountdownEvent(2);
            TestThread producer = Waits.Start(() =>
            {
                go.Signal();
                go.Wait();
                try
                {
                    for (int i = 0; i < 4; i++)
                    {
                        QueueAnyWay(pool, new LedgerItem(ledger, i), i + round);
                        accepted++;
                    }
                }
                catch (ObjectDisposedException)
                {
                }
            }, "producer");
            TestThread disposer = Waits.Start(() =>
            {
                go.Signal();
                go.Wait();
                if (round % 2 == 1)
                {
                    Thread.SpinWait(round * 10 % 2_000);
                }
                pool.Dispose();
            }, "disposer");
            producer.Join();
            disposer.Join();
            for (int i = 0; i < 4; i++)
            {
                Assert.Equal(i < accepted ? 1 : 0, ledger.HitsOf(i));
            }
            Assert.Equal(0, pool.ThreadCount);
        }
    }

    // ---- Dispose from inside an item, twice, concurrently -------------------------------------------------

    [Fact]
    public void DisposeFromInsideAWorkItem_ReturnsAtOnce_AndTheAcceptedItemsStillRun()
    {
        const int queuedBefore = 50;
        using var ledger = new ExactlyOnceLedger(queuedBefore);
        WorkerPool pool = CreatePool(threads: 1);
        using var returned = new ManualResetEventSlim();
        bool rejectedAfterwards = false;
        bool disposeAsyncCompleted = false;
        int cancelled = -1;
        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < queuedBefore; i++)
            {
                QueueAnyWay(pool, new LedgerItem(ledger, i), i);
            }
            pool.Dispose();
            pool.Dispose();
            disposeAsyncCompleted = IsCompletedAtOnce(pool.DisposeAsync());
            cancelled = pool.Shutdown(ShutdownMode.Drain);
            try
            {
                pool.QueueUserWorkItem(__ => { });
            }
            catch (ObjectDisposedException)
            {
                rejectedAfterwards = true;
            }
            returned.Set();
        }, null);
        Waits.For(returned, "Dispose called from inside a work item to return");
        ledger.WaitForAll("items accepted before Dispose from inside a work item");
        Waits.Until(() => pool.ThreadCount == 0, "the workers to exit after Dispose from inside a work item");

        Assert.True(rejectedAfterwards);
        Assert.True(disposeAsyncCompleted);
        Assert.Equal(0, cancelled);
        Waits.RunBounded(pool.Dispose, "a later Dispose from outside");
        ledger.AssertExactlyOnce();
        Assert.Equal(queuedBefore + 1, pool.CompletedWorkItemCount);
    }

    private static bool IsCompletedAtOnce(ValueTask task)
    {
        bool completed = task.IsCompleted;
        task.AsTask().Wait(Waits.MustHappen);
        return completed;
    }

    [Fact]
    public void DoubleAndConcurrentDispose_AreIdempotent_AndDoNotDeadlock()
    {
        const int items = 10_000;
        using var ledger = new ExactlyOnceLedger(items);
        WorkerPool pool = CreatePool(SmallThreadCount);
        for (int i = 0; i < items; i++)
        {
            QueueAnyWay(pool, new LedgerItem(ledger, i), i);
        }
        using var go = new ManualResetEventSlim();
        var disposers = new TestThread[6];
        for (int d = 0; d < disposers.Length; d++)
        {
            int which = d;
            disposers[d] = Waits.Start(() =>
            {
                go.Wait();
                switch (which % 3)
                {
                    case 0:
                        pool.Dispose();
                        break;
                    case 1:
                        Assert.Equal(0, pool.Shutdown(ShutdownMode.Drain));
                        break;
                    default:
                        Assert.True(pool.DisposeAsync().AsTask().Wait(Waits.MustHappen));
                        break;
                }
            }, $"disposer {d}");
        }
        go.Set();
        foreach (TestThread disposer in disposers)
        {
            disposer.Join();
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(0, pool.ThreadCount);
        Waits.RunBounded(() =>
        {
            pool.Dispose();
            pool.Dispose();
            Assert.True(pool.DisposeAsync().AsTask().Wait(Waits.MustHappen));
        }, "Dispose after Dispose");
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void ConcurrentDisposeAndShutdown_EachReturnOnlyOnceTheWaitThreadHasExited(bool secondIsAsync)
    {
        // A wait thread that has left the pool's code (the registry lists it as exited) but has not ended: the factory's
        // wrapper holds it until the test lets it go. Both calls find the pool stopped only after that, so each must
        // find the thread in what the pool hands it, whichever of them looks first.
        using var leftPoolCode = new ManualResetEventSlim();
        using var letEnd = new ManualResetEventSlim();
        Thread? waitThread = null;
        WorkerPool pool = CreatePool(threads: 1, configure: o => o.WaitThreadFactory = start => waitThread = new Thread(() =>
        {
            start();
            leftPoolCode.Set();
            letEnd.Wait(Waits.MustHappen);
        }));
        try
        {
            using var registered = new AutoResetEvent(false);
            pool.RegisterWaitForSingleObject(registered, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
            Assert.NotNull(waitThread);
            // An item that holds the drain, so that the pool stops only once the wait thread has left the pool's code.
            using var started = new ManualResetEventSlim();
            using var release = new ManualResetEventSlim();
            pool.QueueUserWorkItem(_ =>
            {
                started.Set();
                release.Wait(Waits.MustHappen);
            }, null);
            Waits.For(started, "the item holding the drain to start");
            bool firstSawItAlive = true;
            bool secondSawItAlive = true;
            int returned = 0;
            TestThread first = Waits.Start(() =>
            {
                pool.Dispose();
                firstSawItAlive = waitThread.IsAlive;
                Interlocked.Increment(ref returned);
            }, "first Dispose");
            Waits.For(leftPoolCode, "the wait thread to leave the pool's code once shutdown has begun");
            TestThread second = Waits.Start(() =>
            {
                if (secondIsAsync)
                {
                    Assert.True(pool.ShutdownAsync(ShutdownMode.Drain).Wait(Waits.MustHappen));
                }
                else
                {
                    pool.Shutdown(ShutdownMode.Drain);
                }
                secondSawItAlive = waitThread.IsAlive;
                Interlocked.Increment(ref returned);
            }, "second shutdown call");
            release.Set();
            Waits.Never(() => Volatile.Read(ref returned) != 0, "a shutdown call returned while the wait thread still ran");
            letEnd.Set();
            first.Join();
            second.Join();
            Assert.False(firstSawItAlive, "the first call returned before the wait thread had exited");
            Assert.False(secondSawItAlive, "the second call returned before the wait thread had exited");
        }
        finally
        {
            letEnd.Set();
        }
    }

    [Fact]
    public void DisposingOnePool_FromAnotherPoolsWorkItem_Drains()
    {
        const int items = 1_000;
        using var ledger = new ExactlyOnceLedger(items);
        WorkerPool target = CreatePool(threads: 2);
        using WorkerPool other = CreatePool(threads: 1);
        for (int i = 0; i < items; i++)
        {
            QueueAnyWay(target, new LedgerItem(ledger, i), i);
        }
        using var disposed = new ManualResetEventSlim();
        other.QueueUserWorkItem(_ =>
        {
            target.Dispose();
            disposed.Set();
        }, null);
        Waits.For(disposed, "Dispose of one pool from another pool's work item");
        ledger.AssertExactlyOnce();
        Assert.Equal(0, target.ThreadCount);
    }
}
