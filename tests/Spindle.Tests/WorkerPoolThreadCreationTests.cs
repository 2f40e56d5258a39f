using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Thread creation through the internal <see cref="WorkerPoolOptions.ThreadFactory"/> seam: failures lose nothing,
/// enqueue never throws because of them, and work accepted while no worker could be created still runs (or is
/// cancelled) exactly once at shutdown.
/// </summary>
public sealed class WorkerPoolThreadCreationTests
{
    private static readonly AsyncLocal<string?> s_flowed = new();

    /// <summary>A factory whose first <paramref name="failures"/> calls throw what <paramref name="failure"/> makes.</summary>
    private sealed class FlakyFactory(int failures, Func<Exception> failure)
    {
        public FlakyFactory(int failures)
            : this(failures, static () => new OutOfMemoryException())
        {
        }

        private int _calls;
        private int _created;

        public int Calls => Volatile.Read(ref _calls);

        public int Created => Volatile.Read(ref _created);

        public int LastStackSize { get; private set; } = -1;

        public Thread Create(ThreadStart start, int stackSize)
        {
            LastStackSize = stackSize;
            if (Interlocked.Increment(ref _calls) <= failures)
            {
                throw failure();
            }
            Interlocked.Increment(ref _created);
            return new Thread(start, stackSize);
        }
    }

    private static WorkerPool NewPool(Func<ThreadStart, int, Thread> factory, int threads = 2, int stackSize = 0) =>
        new(new WorkerPoolOptions
        {
            MinThreads = threads,
            MaxThreads = threads,
            StackSize = stackSize,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            ThreadFactory = factory,
        });

    [Theory]
    [InlineData(1)]
    [InlineData(3)]
    [InlineData(6)]
    public void CreationFailingKTimes_LosesNothing(int failures)
    {
        const int items = 2_000;
        var factory = new FlakyFactory(failures);
        using var ledger = new ExactlyOnceLedger(items);
        WorkerPool pool = NewPool(factory.Create);
        using (pool)
        {
            for (int i = 0; i < items; i++)
            {
                int index = i;
                // Must not throw although creating a thread fails.
                Assert.True(pool.QueueUserWorkItem(_ => ledger.Hit(index), null));
            }
            ledger.WaitForAll("items queued while thread creation failed");
            Assert.True(pool.CreationFailureCount >= failures,
                $"CreationFailureCount is {pool.CreationFailureCount}, but the factory failed {failures} times.");
            Assert.InRange(pool.ThreadCount, 1, 2);
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(items, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(factory.Created, factory.Calls - failures);
    }

    [Fact]
    public void CreationFailing_WithEachRecognisedExceptionType_IsRetried()
    {
        AssertRetried(new FlakyFactory(2, static () => new OutOfMemoryException()).Create);
        // ThreadStartException has no public constructor.
        AssertRetried(new FlakyFactory(2, static () => (Exception)Activator.CreateInstance(typeof(ThreadStartException), nonPublic: true)!).Create);
        AssertRetried(new FlakyFactory(2, static () => new InvalidOperationException()).Create);

        static void AssertRetried(Func<ThreadStart, int, Thread> factory)
        {
            using WorkerPool pool = NewPool(factory, threads: 1);
            using var ran = new ManualResetEventSlim();
            pool.QueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), ran);
            Waits.For(ran, "an item once creation succeeds");
            Assert.True(pool.CreationFailureCount >= 2);
        }
    }

    [Fact]
    public void CreationFailingAlways_DisposeRunsEveryAcceptedItemOnce_OnTheDisposingThread()
    {
        const int items = 500;
        var factory = new FlakyFactory(int.MaxValue);
        using var ledger = new ExactlyOnceLedger(items);
        var threads = new ConcurrentDictionary<int, bool>();
        using WorkerPool pool = NewPool(factory.Create);
        for (int i = 0; i < items; i++)
        {
            int index = i;
            pool.QueueUserWorkItem(_ =>
            {
                threads[Environment.CurrentManagedThreadId] = true;
                ledger.Hit(index);
            }, null);
        }
        Waits.Never(() => ledger.Total > 0, "an item running without a worker");
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(items, pool.PendingWorkItemCount);
        Assert.True(pool.CreationFailureCount >= 1);

        int disposingThread = 0;
        Waits.RunBounded(() =>
        {
            disposingThread = Environment.CurrentManagedThreadId;
            pool.Dispose();
        }, "Dispose of a pool that has no worker");

        ledger.AssertExactlyOnce();
        Assert.Equal([disposingThread], threads.Keys);
        Assert.Equal(items, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(0, factory.Created);
    }

    [Fact]
    public void CreationFailingAlways_CancelPendingCancelsEveryAcceptedItem()
    {
        const int items = 300;
        using var ledger = new ExactlyOnceLedger(items);
        using WorkerPool pool = NewPool(new FlakyFactory(int.MaxValue).Create);
        for (int i = 0; i < items; i++)
        {
            int index = i;
            pool.UnsafeQueueUserWorkItem(_ => ledger.Hit(index), null);
        }
        int cancelled = -1;
        Waits.RunBounded(() => cancelled = pool.Shutdown(ShutdownMode.CancelPending), "Shutdown(CancelPending)");
        Assert.Equal(items, cancelled);
        Assert.Equal(0, ledger.AssertAtMostOnce());
        Assert.Equal(0, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
    }

    [Fact]
    public void CreationFailingAlways_ItemsRunAtDisposeStillGetTheirExecutionContext()
    {
        using WorkerPool pool = NewPool(new FlakyFactory(int.MaxValue).Create);
        string? seen = "not run";
        string? seenUnsafe = "not run";
        Waits.RunBounded(() =>
        {
            s_flowed.Value = "queued with";
            pool.QueueUserWorkItem(_ => seen = s_flowed.Value, null);
            pool.UnsafeQueueUserWorkItem(_ => seenUnsafe = s_flowed.Value, null);
        }, "queueing with an AsyncLocal value");
        Waits.RunBounded(() =>
        {
            s_flowed.Value = "disposed with";
            pool.Dispose();
        }, "Dispose");
        Assert.Equal("queued with", seen);
        Assert.NotEqual("not run", seenUnsafe);
        Assert.NotEqual("queued with", seenUnsafe);
    }

    [Fact]
    public void CreationFailingAlways_AThrowingItemRunAtDispose_IsReported_AndTheRestStillRun()
    {
        const int items = 10;
        using var ledger = new ExactlyOnceLedger(items);
        using WorkerPool pool = NewPool(new FlakyFactory(int.MaxValue).Create);
        var reports = new ConcurrentQueue<Exception>();
        pool.UnhandledException += (_, e) => reports.Enqueue(e.Exception);
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("leftover failure"), null);
        for (int i = 0; i < items; i++)
        {
            int index = i;
            pool.QueueUserWorkItem(_ => ledger.Hit(index), null);
        }
        Waits.RunBounded(pool.Dispose, "Dispose");
        ledger.AssertExactlyOnce();
        Exception reported = Assert.Single(reports);
        Assert.Equal("leftover failure", reported.Message);
        Assert.Equal(items + 1, pool.CompletedWorkItemCount);
    }

    [Fact]
    public void Factory_GetsTheConfiguredStackSize_AndItsThreadsAreNamedAndBackground()
    {
        var factory = new FlakyFactory(0);
        using WorkerPool pool = NewPool(factory.Create, threads: 1, stackSize: 256 * 1024);
        string? name = null;
        bool background = false;
        using var ran = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            name = Thread.CurrentThread.Name;
            background = Thread.CurrentThread.IsBackground;
            ran.Set();
        }, null);
        Waits.For(ran, "an item");
        Assert.Equal(256 * 1024, factory.LastStackSize);
        Assert.Equal(1, factory.Created);
        Assert.Equal(pool.Name + " #1", name);
        Assert.True(background);
    }

    [Fact]
    public void CreationFailingIntermittently_LosesNothing()
    {
        const int items = 5_000;
        int calls = 0;
        Thread EveryOtherFails(ThreadStart start, int stackSize) =>
            Interlocked.Increment(ref calls) % 2 == 1 ? throw new OutOfMemoryException() : new Thread(start, stackSize);
        using var ledger = new ExactlyOnceLedger(items);
        int maxThreads = 0;
        WorkerPool pool = NewPool(EveryOtherFails, threads: 3);
        using (pool)
        {
            for (int i = 0; i < items; i++)
            {
                int index = i;
                pool.UnsafeQueueUserWorkItem(_ =>
                {
                    int threads = pool.ThreadCount;
                    if (threads > Volatile.Read(ref maxThreads))
                    {
                        Volatile.Write(ref maxThreads, threads);
                    }
                    ledger.Hit(index);
                }, null);
            }
            ledger.WaitForAll("items queued while creation failed every other time");
            Assert.True(pool.CreationFailureCount >= 1);
        }
        ledger.AssertExactlyOnce();
        Assert.InRange(maxThreads, 1, 3);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Fact]
    public void AnItemLeftWhenARefusedStartStopsThePool_RunsOnTheBuiltInPool_ThoughNoShutdownCallWaits()
    {
        // The pool stops on the thread whose worker start the OS refused: the shutdown began while that start was under
        // way, and its only call stopped waiting at once. Nobody will sweep what is left, so the item queued for that
        // worker must be handed on, not left until someone disposes the pool.
        using var starting = new ManualResetEventSlim();
        using var refuse = new ManualResetEventSlim();
        using var ran = new ManualResetEventSlim();
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(AnItemLeftWhenARefusedStartStopsThePool_RunsOnTheBuiltInPool_ThoughNoShutdownCallWaits),
            MinThreads = 0,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnThreadStarting = kind =>
            {
                if (kind is Primitives.PoolThreadKind.Worker or Primitives.PoolThreadKind.Relief)
                {
                    starting.Set();
                    refuse.Wait(Waits.MustHappen);
                    throw new OutOfMemoryException("refused by the test");
                }
            },
        });
        try
        {
            // The enqueue asks for a worker, whose start waits for the gate (with the worker already listed).
            TestThread enqueue = Waits.Start(() => pool.UnsafeQueueUserWorkItem(_ => ran.Set(), null), "the enqueue");
            Waits.For(starting, "a worker start under way");

            using (var cancelled = new CancellationTokenSource())
            {
                cancelled.Cancel();
                Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain, ShutdownMode.Drain, cancelled.Token);
                Waits.Until(() => shutdown.IsCanceled, "the shutdown call stops waiting");
            }
            Assert.False(pool.HasStopped); // the start under way counts as a worker

            refuse.Set();
            enqueue.Join();
            Waits.Until(() => pool.HasStopped, "the stop, on the thread whose start was refused");
            Waits.For(ran, "the item queued for the refused worker, with no shutdown call waiting");
        }
        finally
        {
            refuse.Set();
            Waits.RunBounded(pool.Dispose, "the pool's dispose");
        }
    }
}
