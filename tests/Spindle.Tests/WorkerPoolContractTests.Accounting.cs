using System;
using System.Collections.Concurrent;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

// Work accounting: every accepted item runs exactly once, wake-ups are never lost, work spreads over the workers,
// and neither outside work nor the oldest local item can be starved.
public abstract partial class WorkerPoolContractTests
{
    // ---- Every item queued from several producers runs exactly once --------------------------------------------

    [Fact]
    public void EveryItemRunsExactlyOnce_WhenQueuedFromSeveralProducers() =>
        RunExactlyOnceFromProducers(producers: 4, itemsPerProducer: 25_000);

    internal void RunExactlyOnceFromProducers(int producers, int itemsPerProducer)
    {
        int total = producers * itemsPerProducer;
        using var ledger = new ExactlyOnceLedger(total);
        WorkerPool pool = CreatePool();
        using (pool)
        {
            using var go = new ManualResetEventSlim();
            var threads = new TestThread[producers];
            for (int p = 0; p < producers; p++)
            {
                int first = p * itemsPerProducer;
                threads[p] = Waits.Start(() =>
                {
                    go.Wait();
                    for (int i = first; i < first + itemsPerProducer; i++)
                    {
                        QueueAnyWay(pool, new LedgerItem(ledger, i), i);
                    }
                }, $"producer {p}");
            }
            go.Set();
            foreach (TestThread thread in threads)
            {
                thread.Join();
            }
            ledger.WaitForAll("items queued from several producers");
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(total, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.ThreadCount);
    }

    // ---- Self-requeue chains: every link runs exactly once ---------------------------------------------------

    [Fact]
    public void SelfRequeueChains_RunEveryLinkExactlyOnce() =>
        RunSelfRequeueChains(chains: Environment.ProcessorCount, totalLinks: 100_000);

    internal void RunSelfRequeueChains(int chains, int totalLinks)
    {
        int perChain = totalLinks / chains;
        using var ledger = new ExactlyOnceLedger(perChain * chains);
        WorkerPool pool = CreatePool();
        using (pool)
        {
            for (int c = 0; c < chains; c++)
            {
                pool.QueueUserWorkItem(Chain.Step, new Chain(pool, ledger, c * perChain, perChain));
            }
            ledger.WaitForAll("self-requeue chains");
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(perChain * chains, pool.CompletedWorkItemCount);
    }

    /// <summary>One chain: each link hits the ledger and queues the next from the worker, by a different method each time.</summary>
    private sealed class Chain : IWorkItem
    {
        public static readonly WaitCallback Step = static state => ((Chain)state!).Execute();
        private static readonly Action<Chain> s_stepAction = static chain => chain.Execute();

        private readonly WorkerPool _pool;
        private readonly ExactlyOnceLedger _ledger;
        private readonly int _first;
        private readonly int _length;
        private int _step; // links run one after another, ordered by the queue that hands each to the next

        public Chain(WorkerPool pool, ExactlyOnceLedger ledger, int first, int length)
        {
            _pool = pool;
            _ledger = ledger;
            _first = first;
            _length = length;
        }

        public void Execute()
        {
            _ledger.Hit(_first + _step);
            if (++_step == _length)
            {
                return;
            }
            switch (_step % 4)
            {
                case 0:
                    _pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
                    break;
                case 1:
                    _pool.QueueUserWorkItem(Step, this);
                    break;
                case 2:
                    _pool.UnsafeQueueUserWorkItem(s_stepAction, this, preferLocal: true);
                    break;
                default:
                    _pool.QueueUserWorkItem(s_stepAction, this, preferLocal: _step % 64 != 3); // now and then via the global queue
                    break;
            }
        }
    }

    // ---- Mixed local and global fan-out drains completely -----------------------------------------------------

    [Fact]
    public void MixedLocalAndGlobalFanOut_DrainsCompletely() => RunFanOut(roots: 8, fanOut: 4, depth: 6);

    internal void RunFanOut(int roots, int fanOut, int depth)
    {
        // Each root is the top of a complete fanOut-ary tree; a node's number within its tree is its heap index.
        int perRoot = 0;
        for (int level = 0, width = 1; level <= depth; level++, width *= fanOut)
        {
            perRoot += width;
        }
        using var ledger = new ExactlyOnceLedger(roots * perRoot);
        WorkerPool pool = CreatePool();
        using (pool)
        {
            var tree = new FanOutTree(pool, ledger, fanOut, depth, perRoot);
            for (int r = 0; r < roots; r++)
            {
                pool.UnsafeQueueUserWorkItem(new FanOutNode(tree, r, heapIndex: 0, level: 0), preferLocal: false);
            }
            ledger.WaitForAll("fan-out tree");
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(roots * perRoot, pool.CompletedWorkItemCount);
    }

    private sealed record FanOutTree(WorkerPool Pool, ExactlyOnceLedger Ledger, int FanOut, int Depth, int PerRoot);

    private sealed class FanOutNode(FanOutTree tree, int root, int heapIndex, int level) : IWorkItem
    {
        private static readonly WaitCallback s_callback = static state => ((FanOutNode)state!).Execute();
        private static readonly Action<FanOutNode> s_action = static node => node.Execute();

        public void Execute()
        {
            tree.Ledger.Hit(root * tree.PerRoot + heapIndex);
            if (level == tree.Depth)
            {
                return;
            }
            for (int i = 0; i < tree.FanOut; i++)
            {
                var child = new FanOutNode(tree, root, heapIndex * tree.FanOut + 1 + i, level + 1);
                switch ((heapIndex + i) % 4)
                {
                    case 0:
                        tree.Pool.UnsafeQueueUserWorkItem(child, preferLocal: true);
                        break;
                    case 1:
                        tree.Pool.UnsafeQueueUserWorkItem(child, preferLocal: false);
                        break;
                    case 2:
                        tree.Pool.QueueUserWorkItem(s_callback, child);
                        break;
                    default:
                        tree.Pool.QueueUserWorkItem(s_action, child, preferLocal: false);
                        break;
                }
            }
        }
    }

    // ---- The same work-item object queued K times runs K times --------------------------------------------

    [Fact]
    public void SameWorkItemObjectQueuedKTimes_RunsKTimes()
    {
        const int k = 5_000;
        using var countdown = new CountdownEvent(2 * k);
        var item = new CountingWorkItem(countdown);
        using (WorkerPool pool = CreatePool())
        {
            // K times from outside, many of them pending or running at once ...
            for (int i = 0; i < k; i++)
            {
                pool.UnsafeQueueUserWorkItem(item, preferLocal: i % 2 == 0);
            }
            // ... and K times from one worker, onto its own ring.
            pool.QueueUserWorkItem(_ =>
            {
                for (int i = 0; i < k; i++)
                {
                    pool.UnsafeQueueUserWorkItem(item, preferLocal: true);
                }
            }, null);
            Waits.For(countdown, "runs of the same work-item object");
        }
        Assert.Equal(2 * k, item.Runs);
    }

    // ---- No lost wake-up: an item queued as the last worker parks still starts -------------------------------

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(0)] // the default thread count
    public void ItemQueuedJustAsTheLastWorkerParks_AlwaysStarts(int threads) => RunLostWakeUp(threads, iterations: 2_000);

    internal void RunLostWakeUp(int threads, int iterations)
    {
        using WorkerPool pool = threads == 0 ? CreatePool() : CreatePool(threads);
        using var started = new SemaphoreSlim(0);
        var random = new Random(threads * 7919 + iterations);
        WaitCallback release = static state => ((SemaphoreSlim)state!).Release();
        for (int i = 0; i < iterations; i++)
        {
            if (i % 2 == 0)
            {
                pool.UnsafeQueueUserWorkItem(release, started);
            }
            else
            {
                pool.QueueUserWorkItem(release, started);
            }
            // An item queued to an idle pool should start within about 100 ms; as a must-happen check that is
            // "starts at all", with a bound that a lost wake-up (the item waiting forever) fails and a slow machine
            // does not.
            Assert.True(started.Wait(TimeSpan.FromSeconds(10)),
                $"Item {i} of {iterations} did not start within 10 s after being queued to an idle pool: a lost wake-up.");

            // Land the next enqueue at a different point of the worker's way from finishing an item to sleeping.
            switch (random.Next(10))
            {
                case 0:
                    break;
                case 1:
                    Thread.Yield();
                    break;
                case 2:
                    if (i % 16 == 0)
                    {
                        Thread.Sleep(1); // well parked
                    }
                    break;
                default:
                    Thread.SpinWait(random.Next(1, 3_000));
                    break;
            }
        }
    }

    // ---- Steal fairness: every worker gets work queued locally by another ------------------------------------

    [Fact]
    public void EveryWorker_RunsAtLeastOneItemQueuedLocallyByAnotherWorker()
    {
        // Rounds: an outside item lands on some worker, which queues a burst of short items onto its own ring; idle
        // workers have to take them from there (or, when the ring overflows, from the global queue). Within the bound
        // every worker must have run at least one item another worker queued locally.
        int workers = SmallThreadCount;
        const int itemsPerRound = 64;
        using WorkerPool pool = CreatePool(workers);
        var thieves = new ConcurrentDictionary<int, bool>();
        var everyone = new ConcurrentDictionary<int, bool>();
        long deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;
        int rounds = 0;
        while (thieves.Count < workers && Environment.TickCount64 < deadline)
        {
            rounds++;
            using var done = new CountdownEvent(itemsPerRound + 1);
            pool.QueueUserWorkItem(_ =>
            {
                int producer = Environment.CurrentManagedThreadId;
                everyone[producer] = true;
                for (int i = 0; i < itemsPerRound; i++)
                {
                    pool.UnsafeQueueUserWorkItem(p =>
                    {
                        int me = Environment.CurrentManagedThreadId;
                        everyone[me] = true;
                        if (me != p)
                        {
                            thieves[me] = true;
                        }
                        Thread.SpinWait(200);
                        done.Signal();
                    }, producer, preferLocal: true);
                }
                done.Signal();
            }, null);
            Waits.For(done, $"round {rounds}");
        }
        Assert.True(thieves.Count == workers,
            $"After {rounds} rounds only {thieves.Count} of {workers} workers had run an item queued locally by another " +
            $"worker ({everyone.Count} workers ran anything).");
    }

    // ---- One thread serializes: never two items at once ------------------------------------------------------

    [Fact]
    public void MaxThreadsOne_NeverRunsTwoItemsAtOnce()
    {
        const int perProducer = 1_000;
        using var ledger = new ExactlyOnceLedger(4 * perProducer);
        var threadIds = new ConcurrentDictionary<int, bool>();
        int running = 0;
        int overlaps = 0;
        int maxThreadCount = 0;
        WorkerPool pool = CreatePool(configure: o =>
        {
            o.MinThreads = 0;
            o.MaxThreads = 1;
        });
        using (pool)
        {
            void Body(int index, bool spawnChild)
            {
                if (Interlocked.Increment(ref running) != 1)
                {
                    Interlocked.Increment(ref overlaps);
                }
                threadIds[Environment.CurrentManagedThreadId] = true;
                int threads = pool.ThreadCount;
                if (threads > Volatile.Read(ref maxThreadCount))
                {
                    Volatile.Write(ref maxThreadCount, threads);
                }
                Thread.SpinWait(50);
                Interlocked.Decrement(ref running);
                if (spawnChild)
                {
                    pool.QueueUserWorkItem(i => Body(i, spawnChild: false), index + 2 * perProducer, preferLocal: index % 2 == 0);
                }
                ledger.Hit(index);
            }

            var producers = new TestThread[2];
            for (int p = 0; p < producers.Length; p++)
            {
                int first = p * perProducer;
                producers[p] = Waits.Start(() =>
                {
                    for (int i = first; i < first + perProducer; i++)
                    {
                        pool.QueueUserWorkItem(index => Body(index, spawnChild: true), i, preferLocal: false);
                    }
                }, $"producer {p}");
            }
            foreach (TestThread producer in producers)
            {
                producer.Join();
            }
            ledger.WaitForAll("items on a one-thread pool");
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(0, overlaps);
        Assert.Single(threadIds);
        Assert.Equal(1, maxThreadCount);
    }

    // ---- Fairness between queues -------------------------------------------------------------------------------

    [Fact]
    public void OutsideWork_IsNotStarvedByALocalSelfRequeueLoop()
    {
        using WorkerPool pool = CreatePool(threads: 1);
        using var outsideRan = new ManualResetEventSlim();
        using var loopStarted = new ManualResetEventSlim();
        var loop = new LocalLoop(pool, outsideRan, loopStarted);
        pool.UnsafeQueueUserWorkItem(loop, preferLocal: false);
        Waits.For(loopStarted, "the self-requeue loop");
        pool.QueueUserWorkItem(static state => ((ManualResetEventSlim)state!).Set(), outsideRan);
        Waits.For(outsideRan, "an outside item while the only worker runs a local self-requeue loop");
    }

    [Fact]
    public void OldestLocalItem_IsNotStarvedByNewerLocalItems()
    {
        using WorkerPool pool = CreatePool(threads: 1);
        using var oldestRan = new ManualResetEventSlim();
        using var loopStarted = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            // The oldest item sits at the bottom of the ring, under a loop that always pushes a newer one on top.
            pool.QueueUserWorkItem(static state => ((ManualResetEventSlim)state!).Set(), oldestRan, preferLocal: true);
            pool.UnsafeQueueUserWorkItem(new LocalLoop(pool, oldestRan, loopStarted), preferLocal: true);
        }, null);
        Waits.For(oldestRan, "the oldest local item under a local self-requeue loop");
    }

    /// <summary>Requeues itself onto its worker's ring until <c>stop</c> is set (or the must-happen bound passes).</summary>
    private sealed class LocalLoop(WorkerPool pool, ManualResetEventSlim stop, ManualResetEventSlim started) : IWorkItem
    {
        private readonly long _deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;

        public void Execute()
        {
            started.Set();
            if (!stop.IsSet && Environment.TickCount64 < _deadline)
            {
                pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
            }
        }
    }

    // ---- Isolation -----------------------------------------------------------------------------------------

    [Fact]
    public void ItemQueuedFromAnotherPoolsWorker_RunsOnTheTargetPool()
    {
        using WorkerPool source = CreatePool(threads: 1, configure: o => o.Name = "Source");
        using WorkerPool target = CreatePool(threads: 1, configure: o => o.Name = "Target");
        WorkerPool? currentInSource = null;
        WorkerPool? currentInTarget = null;
        string? targetThreadName = null;
        using var done = new ManualResetEventSlim();
        source.QueueUserWorkItem(_ =>
        {
            currentInSource = WorkerPool.Current;
            target.QueueUserWorkItem<object?>(__ =>
            {
                currentInTarget = WorkerPool.Current;
                targetThreadName = Thread.CurrentThread.Name;
                done.Set();
            }, null, preferLocal: true);
        }, null);
        Waits.For(done, "the item queued across pools");
        Assert.Same(source, currentInSource);
        Assert.Same(target, currentInTarget);
        Assert.StartsWith("Target #", targetThreadName, StringComparison.Ordinal);
        Assert.Null(WorkerPool.Current);
    }
}
