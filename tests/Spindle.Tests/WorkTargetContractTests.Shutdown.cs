using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// Shutdown of the target, in every way it can be shut down, with work queued: each accepted item runs (drain) or is
// cancelled (cancel pending) exactly once, continuations of accepted work still run, new work is refused from the
// moment the shutdown begins, and the shutdown's task completes with the figure it reports.
public abstract partial class WorkTargetContractTests
{
    public static TheoryData<string> ShutdownWays() =>
    [
        "Shutdown(Drain)", "Shutdown(CancelPending)", "ShutdownAsync(Drain)", "ShutdownAsync(CancelPending)", "Dispose", "DisposeAsync",
    ];

    public static TheoryData<ShutdownMode> ShutdownModes() => [ShutdownMode.Drain, ShutdownMode.CancelPending];

    /// <summary>Begins the target's shutdown the way <paramref name="way"/> names; the task completes once it has stopped.</summary>
    private Task<int> BeginShutdown(string way) => way switch
    {
        "Shutdown(Drain)" => OnOwnThread(() => Shutdown(ShutdownMode.Drain)),
        "Shutdown(CancelPending)" => OnOwnThread(() => Shutdown(ShutdownMode.CancelPending)),
        "ShutdownAsync(Drain)" => ShutdownAsync(ShutdownMode.Drain),
        "ShutdownAsync(CancelPending)" => ShutdownAsync(ShutdownMode.CancelPending),
        "Dispose" => OnOwnThread(() =>
        {
            DisposeTarget();
            return (int)CancelledCount;
        }),
        "DisposeAsync" => DisposeTargetAsync().AsTask().ContinueWith(t =>
        {
            t.GetAwaiter().GetResult();
            return (int)CancelledCount;
        }, TaskScheduler.Default),
        _ => throw new ArgumentOutOfRangeException(nameof(way), way, "Unknown shutdown way."),
    };

    private static Task<int> OnOwnThread(Func<int> shutdown) =>
        Task.Factory.StartNew(shutdown, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);

    /// <summary>Every entry point refuses new work with <see cref="ObjectDisposedException"/>.</summary>
    private void AssertRefusesNewWork()
    {
        WorkTarget target = Target;
        var item = new CountingItem();
        Assert.Throws<ObjectDisposedException>(() => target.QueueUserWorkItem(_ => { }));
        Assert.Throws<ObjectDisposedException>(() => target.QueueUserWorkItem(_ => { }, null));
        Assert.Throws<ObjectDisposedException>(() => target.UnsafeQueueUserWorkItem(_ => { }, null));
        Assert.Throws<ObjectDisposedException>(() => target.QueueUserWorkItem(static _ => { }, 1, preferLocal: true));
        Assert.Throws<ObjectDisposedException>(() => target.UnsafeQueueUserWorkItem(static _ => { }, 1, preferLocal: false));
        Assert.Throws<ObjectDisposedException>(() => target.QueueUserWorkItem(static _ => { }, 1, WorkItemOptions.None));
        Assert.Throws<ObjectDisposedException>(() => target.QueueUserWorkItem(static _ => { }, 1, WorkItemOptions.LongRunning));
        Assert.Throws<ObjectDisposedException>(() => target.UnsafeQueueUserWorkItem(static _ => { }, 1, WorkItemOptions.PreferLocal));
        Assert.Throws<ObjectDisposedException>(() => target.UnsafeQueueUserWorkItem(item, preferLocal: false));
        Assert.Throws<ObjectDisposedException>(() => target.UnsafeQueueUserWorkItem(item, WorkItemOptions.LongRunning));
        Assert.Throws<ObjectDisposedException>(() => target.TryQueueUserWorkItem(static _ => { }, 1, preferLocal: false));
        Assert.Throws<ObjectDisposedException>(() => target.TryQueueUserWorkItem(item, preferLocal: true));
        AssertRefused(() => target.QueueUserWorkItemAsync(static _ => { }, 1));
        AssertRefused(() => target.QueueUserWorkItemAsync(item));
        Assert.Throws<ObjectDisposedException>(() => { _ = target.Run(() => { }); });
        Assert.Throws<ObjectDisposedException>(() => { _ = target.Run(() => 1, new CancellationTokenSource().Token); });
        Assert.Throws<ObjectDisposedException>(() => { _ = target.Run(() => Task.CompletedTask); });
        Assert.Throws<ObjectDisposedException>(() => { _ = target.Run(() => Task.FromResult(1)); });
        Assert.Throws<ObjectDisposedException>(() => { _ = target.RunAsValueTask(() => { }); });
        Assert.Throws<ObjectDisposedException>(() => { _ = target.RunAsValueTask(() => 1); });
        Assert.Equal(0, item.Runs);

        // The asynchronous forms may throw or return a task faulted with the same exception.
        static void AssertRefused(Func<ValueTask> queue)
        {
            ValueTask queued;
            try
            {
                queued = queue();
            }
            catch (ObjectDisposedException)
            {
                return;
            }
            Assert.True(queued.IsFaulted, "an asynchronous queueing after the shutdown began was not refused");
            Assert.IsType<ObjectDisposedException>(queued.AsTask().Exception!.InnerException);
        }
    }

    [Theory]
    [MemberData(nameof(ShutdownWays))]
    public async Task Shutdown_WithWorkQueued_RunsOrCancelsEachAcceptedItemOnce_AndRefusesNewWork(string way)
    {
        bool cancels = way.Contains("CancelPending", StringComparison.Ordinal);
        const int items = 4 * Forms;
        using var ledger = new ExactlyOnceLedger(items);
        int runsRan = 0;
        using var cts = new CancellationTokenSource();
        Task[] runs;
        Task schedulerTask;
        using var posted = new ManualResetEventSlim();
        Task<int> shutdown;
        using (HoldWorkers())
        {
            for (int i = 0; i < items; i++)
            {
                QueueAnyWay(new LedgerItem(ledger, i), i);
            }
            runs =
            [
                Target.Run(() => { Interlocked.Increment(ref runsRan); }),
                Target.Run(() => Interlocked.Increment(ref runsRan), cts.Token),
                Target.Run(() => { Interlocked.Increment(ref runsRan); return Task.CompletedTask; }),
                Target.RunAsValueTask(() => { Interlocked.Increment(ref runsRan); }).AsTask(),
            ];
            // Continuations of accepted work: never cancelled, in either mode.
            schedulerTask = Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, Target.TaskScheduler);
            Target.SynchronizationContext.Post(_ => posted.Set(), null);

            shutdown = BeginShutdown(way);
            Waits.Until(() => IsShutdownStarted, "the target's shutdown began");
            AssertRefusesNewWork();
        }

        int cancelled = await shutdown.WaitAsync(Waits.MustHappen);
        await schedulerTask.WaitAsync(Waits.MustHappen);
        Waits.For(posted, "a post queued before the shutdown");
        foreach (Task run in runs)
        {
            await run.ContinueWith(static _ => { }, TaskScheduler.Default).WaitAsync(Waits.MustHappen);
            Assert.True(cancels ? run.IsCanceled : run.IsCompletedSuccessfully, $"a queued run ended {run.Status} after {way}");
        }
        if (cancels)
        {
            Assert.Equal(0, ledger.AssertAtMostOnce()); // every worker was held: none had started
            Assert.Equal(0, Volatile.Read(ref runsRan));
            Assert.Equal(items + runs.Length, cancelled);
        }
        else
        {
            ledger.AssertExactlyOnce();
            Assert.Equal(runs.Length, Volatile.Read(ref runsRan));
            Assert.Equal(0, cancelled);
        }
        Assert.Equal(cancelled, CancelledCount);
        Assert.Equal(0, PendingCount);
        long completed = (cancels ? 0 : items + runs.Length) + 2 + PoolItemsCounted(WorkerHold.ItemCount);
        Waits.Until(() => CompletedCount == completed, $"the completed count to reach {completed}");

        // Idempotent, with the same figure, and still closed.
        Assert.Equal(cancelled, await ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen));
        Assert.Equal(cancelled, await ShutdownAsync(ShutdownMode.CancelPending).WaitAsync(Waits.MustHappen));
        AssertRefusesNewWork();
        if (TargetLane is WorkerPoolLane lane)
        {
            Assert.False(Pool.IsShutdownStarted, "a lane's shutdown shut its pool down");
            Assert.True(Pool.Run(() => { }).Wait(Waits.MustHappen), "the pool runs its own work after its lane stopped");
            Assert.DoesNotContain(lane, Pool.Lanes);
        }
    }

    [Fact]
    public async Task ShuttingDownAnUnusedTarget_CompletesAtOnce_WithNothingCancelled()
    {
        Assert.Equal(0, await ShutdownAsync(ShutdownMode.CancelPending).WaitAsync(Waits.MustHappen));
        Assert.True(IsShutdownStarted);
        AssertRefusesNewWork();
    }

    [Fact]
    public void DisposingTheTargetsPool_DrainsTheTarget_AndClosesIt()
    {
        const int items = 3 * Forms;
        using var ledger = new ExactlyOnceLedger(items);
        TestThread dispose;
        using (HoldWorkers())
        {
            for (int i = 0; i < items; i++)
            {
                QueueAnyWay(new LedgerItem(ledger, i, this), i);
            }
            dispose = Waits.Start(Pool.Dispose, "disposing the pool");
            Waits.Until(() => IsShutdownStarted, "the target sees its pool's shutdown");
            AssertRefusesNewWork();
        }
        dispose.Join();
        ledger.AssertExactlyOnce();
        AssertEveryItemRanOnTarget();
        Assert.Equal(0, CancelledCount);
        Assert.Equal(items + PoolItemsCounted(WorkerHold.ItemCount), CompletedCount);
    }

    [Theory]
    [MemberData(nameof(ShutdownModes))]
    public void EnqueuesRacingTheShutdown_EachRunOnceOrIsCancelledOnce_OrIsRefused(ShutdownMode mode)
    {
        // One that gets this far waits for the shutdown before its last attempt, so that each meets a refusal.
        const int capacity = 20_000;
        const int producers = 2;
        using var ledger = new ExactlyOnceLedger(producers * capacity + capacity);
        var accepted = new int[producers];
        using var go = new ManualResetEventSlim();
        var threads = new TestThread[producers];
        for (int p = 0; p < producers; p++)
        {
            int producer = p;
            threads[p] = Waits.Start(() =>
            {
                go.Wait();
                int first = producer * capacity;
                for (int i = 0; i < capacity; i++)
                {
                    if (i == capacity - 1)
                    {
                        Assert.True(Waits.Poll(() => IsShutdownStarted, Waits.MustHappen), "The shutdown never began.");
                    }
                    try
                    {
                        QueueAnyWay(new LedgerItem(ledger, first + i), i + producer);
                    }
                    catch (ObjectDisposedException)
                    {
                        return;
                    }
                    accepted[producer]++;
                }
            }, $"producer {p}");
        }
        // A chain of items that requeue themselves races the shutdown from inside the target.
        var chain = new RefusableChain(Target, ledger, producers * capacity);
        Target.UnsafeQueueUserWorkItem(chain, preferLocal: false);
        go.Set();
        Waits.Poll(() => ledger.Total >= 1_000, Waits.MustHappen);
        int cancelled = -1;
        Waits.RunBounded(() => cancelled = Shutdown(mode), $"Shutdown({mode}) racing enqueues");
        foreach (TestThread thread in threads)
        {
            thread.Join();
        }

        int ran = ledger.AssertAtMostOnce();
        int acceptedInAll = accepted[0] + accepted[1] + chain.Accepted;
        Assert.Equal(acceptedInAll, ran + cancelled);
        if (mode == ShutdownMode.Drain)
        {
            Assert.Equal(0, cancelled);
        }
        for (int p = 0; p < producers; p++)
        {
            // Only accepted items may have run: the refused one, and everything after it, never did.
            for (int i = accepted[p]; i < capacity; i++)
            {
                Assert.True(ledger.HitsOf(p * capacity + i) == 0, $"producer {p}: item {i} ran, but only {accepted[p]} were accepted.");
            }
        }
        Assert.Equal(cancelled, CancelledCount);
    }

    /// <summary>Hits the ledger and requeues itself until the target refuses it; counts the links it got accepted.</summary>
    private sealed class RefusableChain(WorkTarget target, ExactlyOnceLedger ledger, int first) : IWorkItem
    {
        private int _next;     // links run one after another; the queue publishes the write to the next link
        private int _accepted = 1; // the first link, queued by the test

        public int Accepted => Volatile.Read(ref _accepted);

        public void Execute()
        {
            int step = _next++;
            ledger.Hit(first + step);
            if (first + step + 1 == ledger.Count)
            {
                return; // the chain's range is used up (the shutdown did not come in time; the producers will wait for it)
            }
            try
            {
                target.UnsafeQueueUserWorkItem(this, preferLocal: true);
                Interlocked.Increment(ref _accepted);
            }
            catch (ObjectDisposedException)
            {
            }
        }
    }
}
