using System;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Where queued work goes and who takes it. Forked work: an item that queues a child to its own worker and then keeps
/// computing must not hold the child while other workers are free, in every form the child can take (a delegate in the
/// worker's ring, an <see cref="IWorkItem"/> in its LIFO slot, a task of the pool's scheduler); a chain of items that
/// each queue the next stays correct while idle workers are woken for it and look at its queue. Order: what a timer
/// callback queues starts in the order it was queued, and a Task.Yield under the pool's SynchronizationContext lets
/// queued work run first.
/// These tests check orders of starts with one or two workers, which other tests' threads competing for the cores can
/// reorder (the stall monitor looks outside for work that waited a tick), so they run alone.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolPlacementTests
{
    public enum ForkForm
    {
        Delegate,
        WorkItem,
        Task,
    }

    private static WorkerPool CreatePool(int threads) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolPlacementTests),
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Theory]
    [InlineData(ForkForm.Delegate)]
    [InlineData(ForkForm.WorkItem)]
    [InlineData(ForkForm.Task)]
    public void ChildForkedByAComputingItem_RunsOnAnotherWorkerWhileTheParentComputes(ForkForm form)
    {
        using WorkerPool pool = CreatePool(threads: 2);
        for (int round = 0; round < 20; round++)
        {
            var child = new ChildProbe();
            int parentThread = 0;
            bool startedWhileParentRan = false;
            using var parentDone = new ManualResetEventSlim();
            pool.QueueUserWorkItem(_ =>
            {
                parentThread = Environment.CurrentManagedThreadId;
                switch (form)
                {
                    case ForkForm.Delegate:
                        pool.UnsafeQueueUserWorkItem(static probe => probe.Run(), child, preferLocal: true);
                        break;
                    case ForkForm.WorkItem:
                        pool.UnsafeQueueUserWorkItem(child, preferLocal: true);
                        break;
                    case ForkForm.Task:
                        Task.Factory.StartNew(static probe => ((ChildProbe)probe!).Run(), child, CancellationToken.None,
                            TaskCreationOptions.None, pool.TaskScheduler);
                        break;
                }
                // The parent computes until its child has started: only another worker can start it meanwhile.
                startedWhileParentRan = child.Started.Wait(Waits.MustHappen);
                parentDone.Set();
            }, null);

            Waits.For(parentDone, "the forking item");
            Assert.True(startedWhileParentRan,
                $"Round {round}: a {form} child forked by a computing item did not start within {Waits.MustHappen.TotalSeconds} s "
                + $"although the pool has a second worker (threads: {pool.ThreadCount}).");
            Assert.NotEqual(parentThread, child.Thread);
        }
    }

    [Fact]
    public void ChainOfLoneItems_WithIdleWorkersLookingOn_RunsEachLinkOnceInOrder()
    {
        // One chain on a pool of four workers: every link is a lone item queued while other workers are parked, so each
        // enqueue may wake one and every searcher looks at the chain's queue. Each link must run exactly once, one after
        // the other, however the links move between workers.
        const int links = 200_000;
        using WorkerPool pool = CreatePool(threads: 4);
        var chain = new ChainLink(pool, links);
        pool.UnsafeQueueUserWorkItem(chain, preferLocal: false);
        Waits.For(chain.Done, "the chain's last link");
        Assert.Null(chain.Violation);
        Assert.Equal(links, chain.Ran);
    }

    [Fact]
    public void ItemsQueuedLocallyByATimerCallback_RunInTheOrderTheyWereQueued()
    {
        // A fired timer's callback completes delays whose continuations queue with preferLocal; they are outside work
        // arriving in firing order, and they run in that order (the global queue) rather than newest first (the LIFO
        // ring of the worker that ran the callback). One worker, so that the order of starts is the order of the queue.
        const int items = 8;
        using WorkerPool pool = CreatePool(threads: 1);
        var order = new System.Collections.Concurrent.ConcurrentQueue<int>();
        using var allRan = new CountdownEvent(items);
        using ITimer timer = pool.CreateTimer(_ =>
        {
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueueUserWorkItem(n =>
                {
                    order.Enqueue(n);
                    allRan.Signal();
                }, i, preferLocal: true);
            }
        }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);

        Waits.For(allRan, "the items the timer callback queued");
        Assert.Equal(Enumerable.Range(0, items), order);
    }

    [Fact]
    public void ItemsQueuedLocallyByAnOrdinaryItem_StayOnItsWorker()
    {
        // The counterpart: an ordinary item's local enqueues are its worker's (newest first), which the timer rule
        // above must not change. One worker: the last item queued runs first.
        const int items = 8;
        using WorkerPool pool = CreatePool(threads: 1);
        var order = new System.Collections.Concurrent.ConcurrentQueue<int>();
        using var allRan = new CountdownEvent(items);
        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueueUserWorkItem(n =>
                {
                    order.Enqueue(n);
                    allRan.Signal();
                }, i, preferLocal: true);
            }
        }, null);

        Waits.For(allRan, "the items an ordinary item queued");
        Assert.Equal(items - 1, order.First());
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task TaskYieldUnderThePoolsContext_LetsTheWorkersQueuedItemsRunFirst(bool onCompleted)
    {
        // Task.Yield asks to let queued work run: under the pool's SynchronizationContext its continuation goes behind
        // the queued work, not on top of the worker's newest-first local queue. One fresh worker, so that the order of
        // starts is the order of the queues (no fairness look at the shared queue comes due within these few items).
        const int items = 8;
        using WorkerPool pool = CreatePool(threads: 1);
        // Once to compile the path: a first run spends milliseconds in the JIT between the yield and the worker's next
        // dispatch, and outside work that waits that long is looked at ahead of local work (the stall monitor's rule).
        await YieldAfterQueueing();
        Assert.Equal(items, await YieldAfterQueueing());

        Task<int> YieldAfterQueueing() => pool.Run(async () =>
        {
            var ran = new StrongBox<int>();
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueueUserWorkItem(box => Interlocked.Increment(ref box.Value), ran, preferLocal: true);
            }
            if (onCompleted)
            {
                var resumed = new TaskCompletionSource<int>(TaskCreationOptions.RunContinuationsAsynchronously);
                Task.Yield().GetAwaiter().OnCompleted(() => resumed.SetResult(Volatile.Read(ref ran.Value)));
                return await resumed.Task.ConfigureAwait(false);
            }
            await Task.Yield();
            return Volatile.Read(ref ran.Value);
        }, CancellationToken.None);
    }

    [Fact]
    public void PostFromAWorker_GoesToItsOwnQueueAheadOfOlderItems()
    {
        // The counterpart: any other post from a worker (an await's continuation) goes to that worker's own queue,
        // newest first, so it runs before the items queued earlier (one worker).
        const int items = 8;
        using WorkerPool pool = CreatePool(threads: 1);
        var ran = new StrongBox<int>();
        int ranBeforePost = -1;
        using var posted = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueueUserWorkItem(box => Interlocked.Increment(ref box.Value), ran, preferLocal: true);
            }
            pool.SynchronizationContext.Post(_ =>
            {
                ranBeforePost = Volatile.Read(ref ran.Value);
                posted.Set();
            }, null);
        }, null);

        Waits.For(posted, "the posted callback");
        Assert.Equal(0, ranBeforePost);
    }

    private sealed class ChildProbe : IWorkItem
    {
        public readonly ManualResetEventSlim Started = new();
        public int Thread;

        public void Run()
        {
            Thread = Environment.CurrentManagedThreadId;
            Started.Set();
        }

        public void Execute() => Run();
    }

    private sealed class ChainLink(WorkerPool pool, int links) : IWorkItem
    {
        public readonly ManualResetEventSlim Done = new();
        public int Ran;
        public string? Violation;
        private int _running;

        public void Execute()
        {
            if (Interlocked.Exchange(ref _running, 1) != 0)
            {
                Violation ??= $"link {Ran} started while another link was running";
            }
            int ran = ++Ran;
            Volatile.Write(ref _running, 0);
            if (ran < links)
            {
                pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
            }
            else
            {
                Done.Set();
            }
        }
    }
}
