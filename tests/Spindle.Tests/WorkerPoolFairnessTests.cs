using System;
using System.Diagnostics;
using System.Threading;
using Spindle.Scheduling;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Outside work behind local work: items queued from outside the pool keep starting while every worker runs a chain
/// of items that re-queue themselves locally, whether the chain goes through the LIFO slot or the ring, and however
/// long its items are. The bounds asserted are generous (seconds); the rule they protect keeps the real waits at about
/// 100 µs of work plus the item in progress (the comparison program's <c>fairness</c> scenario measures them).
/// The chains keep every core busy, so the class runs alone (tests running beside it would share those cores).
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolFairnessTests
{
    private static readonly TimeSpan Generous = TimeSpan.FromSeconds(10);

    private static WorkerPool CreatePool(int threads) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolFairnessTests),
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void ABacklogOfOutsideItems_Drains_WhileTheOnlyWorkerRunsAChainThroughItsLifoSlot()
    {
        // One worker, a chain of 1 ms IWorkItems re-queued with preferLocal (the LIFO slot), and 300 outside items
        // queued at once. The chain keeps the slot full, so outside items taken into the worker's ring would be reached
        // only by the ring's ageing rule (one per look, after 20 ms): about 18 s for the backlog. Taken from the global
        // queue one per look, they drain alongside the chain, one per chain item (about 0.3 s here).
        using WorkerPool pool = CreatePool(threads: 1);
        using var chain = new SpinChain(pool, TimeSpan.FromMilliseconds(1), viaSlot: true);
        chain.Start();
        Assert.True(chain.WaitForItems(5, Generous), "The chain did not start.");

        const int outside = 300;
        int remaining = outside;
        using var drained = new ManualResetEventSlim();
        for (int i = 0; i < outside; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                if (Interlocked.Decrement(ref remaining) == 0)
                {
                    drained.Set();
                }
            }, null);
        }
        Assert.True(drained.Wait(Generous), $"{Volatile.Read(ref remaining)} of {outside} outside items had not run.");
        Assert.False(chain.Faulted);
    }

    [Fact]
    public void OutsideItems_UnderASteadyInflow_AreNotOvertakenByManyItemsQueuedAfterThem()
    {
        // One worker, outside items arriving a little faster than it runs them, for 400 ms. The worker takes them in
        // batches into its ring and looks outside every few items; a batch pushed onto the rest of the previous one is
        // popped first, so without care the older items sink to the ring's far end while the inflow lasts, overtaken by
        // hundreds of items queued after them (388-1,349 measured). Taking one item per look while the ring holds some,
        // an item is overtaken at most by the looks made while its batch drains (9 measured, a few dozen at most),
        // however the threads are scheduled: counted in items, not in time, so a stalled producer cannot fake it.
        using WorkerPool pool = CreatePool(threads: 1);
        const int PerBurst = 60;
        var run = new InflowRun(Stress.Scale(20_000, 100_000));
        using var done = new CountdownEvent(1);
        var producer = new Thread(() =>
        {
            var until = Stopwatch.GetTimestamp() + Stopwatch.Frequency * 2 / 5;
            int next = 0;
            while (Stopwatch.GetTimestamp() < until && next + PerBurst <= run.Order.Length)
            {
                for (int i = 0; i < PerBurst; i++, next++)
                {
                    pool.UnsafeQueueUserWorkItem(s_inflowItem, (run, next), preferLocal: false);
                }
                Thread.Sleep(1);
            }
            run.Count = next;
            done.Signal();
        });
        producer.Start();
        Assert.True(done.Wait(Generous), "The producer did not finish.");
        Assert.True(Waits.Poll(() => Volatile.Read(ref run.Started) == run.Count, Generous), $"{Volatile.Read(ref run.Started)} of {run.Count} items started.");

        // In start order: how many items queued after each item started before it? (A Fenwick tree over queue order.)
        var started = new int[run.Count + 1];
        int worst = 0, worstItem = -1;
        for (int position = 0; position < run.Count; position++)
        {
            int item = run.Order[position];
            int earlierStarted = 0;
            for (int k = item; k > 0; k -= k & -k)
            {
                earlierStarted += started[k]; // items queued before this one that have started
            }
            int overtaken = position - earlierStarted;
            if (overtaken > worst)
            {
                worst = overtaken;
                worstItem = item;
            }
            for (int k = item + 1; k <= run.Count; k += k & -k)
            {
                started[k]++;
            }
        }
        Assert.True(worst <= 200, $"item {worstItem} of {run.Count} started after {worst} items queued after it");
    }

    private static readonly Action<(InflowRun Run, int Index)> s_inflowItem = static state =>
    {
        Thread.SpinWait(400); // a little work: the inflow outpaces the worker
        int position = Interlocked.Increment(ref state.Run.Started) - 1;
        state.Run.Order[position] = state.Index;
    };

    private sealed class InflowRun(int capacity)
    {
        public readonly int[] Order = new int[capacity];
        public int Started;
        public volatile int Count = -1;
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void AnOutsideItem_StartsWithinTheBound_WhileEveryWorkerRunsAChainOfLongItems(bool viaSlot)
    {
        // Two workers, each running a chain of 40 ms items (warmed up with trivial ones first, so a count of items between
        // looks learned from short items cannot be what holds the outside item). Counting alone, a worker would look
        // outside every 61 items, 2.4 s apart; timed, after each item, and the stall monitor asks for a look within a
        // few milliseconds anyway. The bound asserted, 1.5 s, is far above both.
        using WorkerPool pool = CreatePool(threads: 2);
        using var warm = new CountdownEvent(2);
        for (int i = 0; i < 2; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                for (int n = 0; n < 10_000; n++)
                {
                    pool.UnsafeQueueUserWorkItem(static _ => { }, (object?)null, preferLocal: true);
                }
                warm.Signal();
            }, null);
        }
        Assert.True(warm.Wait(Generous));

        using var first = new SpinChain(pool, TimeSpan.FromMilliseconds(40), viaSlot);
        using var second = new SpinChain(pool, TimeSpan.FromMilliseconds(40), viaSlot);
        first.Start();
        second.Start();
        Assert.True(first.WaitForItems(2, Generous) && second.WaitForItems(2, Generous), "The chains did not start.");

        for (int probe = 0; probe < 5; probe++)
        {
            long queued = Stopwatch.GetTimestamp();
            long started = 0;
            using var ran = new ManualResetEventSlim();
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                Volatile.Write(ref started, Stopwatch.GetTimestamp());
                ran.Set();
            }, null);
            Assert.True(ran.Wait(Generous), "An outside item never started while local chains ran.");
            TimeSpan waited = Stopwatch.GetElapsedTime(queued, Volatile.Read(ref started));
            Assert.True(waited < TimeSpan.FromSeconds(1.5), $"The outside item waited {waited.TotalMilliseconds:F1} ms behind local chains.");
        }
        Assert.False(first.Faulted || second.Faulted);
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void ALocalItem_RunsBetweenOutsideItems_WhileTheOnlyWorkerRunsALongChainThroughTheGlobalQueue(bool viaSlot)
    {
        // One worker, a chain of 300 µs items that each queue the next to the global queue (as an actor's mailbox that
        // used its throughput goes behind the waiting ones). Items that long make the worker look outside at every
        // dispatch. Item 150 queues one item locally (the LIFO slot, or the ring): it must run within a couple of the
        // chain's items, not after the chain has ended (or after the ring's 20 ms ageing rule) because every look
        // found the chain's next item outside first.
        using WorkerPool pool = CreatePool(threads: 1);
        const int links = 200;
        const int localAt = 150;
        long spinTicks = Stopwatch.Frequency * 300 / 1_000_000;
        int ran = 0;
        int localRanAfter = -1;
        using var done = new ManualResetEventSlim();
        Action<int>? link = null;
        link = index =>
        {
            long until = Stopwatch.GetTimestamp() + spinTicks;
            while (Stopwatch.GetTimestamp() < until)
            {
                Thread.SpinWait(8);
            }
            Interlocked.Increment(ref ran);
            if (index == localAt)
            {
                if (viaSlot)
                {
                    pool.UnsafeQueueUserWorkItem(new LocalProbe(() => localRanAfter = Volatile.Read(ref ran)), preferLocal: true);
                }
                else
                {
                    pool.UnsafeQueueUserWorkItem(static probe => probe(), (Action)(() => localRanAfter = Volatile.Read(ref ran)), preferLocal: true);
                }
            }
            if (index + 1 < links)
            {
                pool.UnsafeQueueUserWorkItem(link!, index + 1, preferLocal: false);
            }
            else
            {
                done.Set();
            }
        };
        pool.UnsafeQueueUserWorkItem(link, 0, preferLocal: false);
        Assert.True(done.Wait(Generous), "The chain did not finish.");
        Assert.True(SpinWait.SpinUntil(() => Volatile.Read(ref localRanAfter) >= 0, Generous), "The local item never ran.");
        // localAt + 1 links had run when the local item was queued; with a local turn after each outside item it runs
        // after the next link at the latest. Starved, it ran after the whole chain (or, in the ring, after 20 ms: ~66
        // links of 300 µs).
        Assert.True(localRanAfter <= localAt + 4, $"The local item ran after {localRanAfter} of the chain's {links} items (queued after {localAt + 1}).");
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void LocalItemsBelowAChainAtTheTopOfTheRing_RunOnePerLook_NotOnePerAgeingWindow(bool viaSlot)
    {
        // One worker queues 300 items locally (its ring), then starts a chain of trivial items each queuing the next
        // locally (through the LIFO slot, or onto the ring's top). Every LIFO pop takes the chain's next item, so the 300
        // are reached only by the worker's looks. Under the ageing rule alone one of them ran per 20 ms window, some
        // 300,000 links apart; below a chain, one runs at each look once the chain has lasted 10 looks, and a look comes
        // at most 61 items apart: all 300 within 61 x (300 + 12) links. Counted in links, not in time: a descheduled
        // worker only makes its looks come sooner. The chain stops at 200,000 links either way.
        using WorkerPool pool = CreatePool(threads: 1);
        const int Waiting = 300;
        const long Cap = 200_000;
        var run = new ChainRun(pool, Waiting, Cap, viaSlot);
        pool.UnsafeQueueUserWorkItem(static run =>
        {
            for (int i = 0; i < run.Waiting; i++)
            {
                run.Pool.UnsafeQueueUserWorkItem(static run => run.WaitingItemRan(), run, preferLocal: true);
            }
            run.Link();
        }, run, preferLocal: false);
        Assert.True(run.Stopped.Wait(Generous), "The chain did not stop.");
        Assert.True(Waits.Poll(() => Volatile.Read(ref run.WaitingRan) == Waiting, Generous), "The waiting items never all ran.");
        // A look at most every FairnessInterval links; the chain is counted from the second look, taken from the
        // ChainLooks-th on: 61 x (300 + 10 + 2).
        long bound = (long)LookPacer.FairnessInterval * (Waiting + LookPacer.ChainLooks + 2);
        Assert.True(run.LinksWhenAllRan <= bound,
            $"The last of {Waiting} items below the chain ran after {run.LinksWhenAllRan} links (bound {bound}; the chain stops at {Cap}).");
    }

    private sealed class ChainRun(WorkerPool pool, int waiting, long cap, bool viaSlot) : IWorkItem
    {
        public readonly WorkerPool Pool = pool;
        public readonly int Waiting = waiting;
        public readonly ManualResetEventSlim Stopped = new();
        public int WaitingRan;
        public long LinksWhenAllRan;
        private long _links;

        public void WaitingItemRan()
        {
            if (Interlocked.Increment(ref WaitingRan) == Waiting)
            {
                Volatile.Write(ref LinksWhenAllRan, Volatile.Read(ref _links));
            }
        }

        public void Execute() => Link();

        public void Link()
        {
            long links = ++_links; // one worker: the links run one after another
            if (Volatile.Read(ref WaitingRan) == Waiting || links >= cap)
            {
                Stopped.Set();
            }
            else if (viaSlot)
            {
                Pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
            }
            else
            {
                Pool.UnsafeQueueUserWorkItem(static run => run.Link(), this, preferLocal: true);
            }
        }
    }

    [Fact]
    public void OutsideItems_TakenByAWorkerOfLongItems_StayInTheGlobalQueue_WhereNewerItemsCannotOvertakeThem()
    {
        // One worker whose items have been long (its look pacer counts one item per look), then 20 short outside items
        // queued while it runs a blocking item, the first of which queues one more outside item. Taken into the worker's
        // ring as one batch, the 20 would sit there while every dispatch looks outside (the pacer's count) and takes the
        // newer item first, 19 items ahead of its turn. Taken as many at a time as the worker runs between looks (one,
        // then a few as the short items raise the count), the rest stay in the global queue, in order, ahead of the
        // newer item. Counted in places, not in time: a descheduled thread only makes the takes smaller.
        using WorkerPool pool = CreatePool(threads: 1);
        long longTicks = Stopwatch.Frequency * 300 / 1_000_000;
        using var warmed = new CountdownEvent(150); // past two looks of the starting count (61 items each)
        for (int i = 0; i < 150; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                long until = Stopwatch.GetTimestamp() + longTicks;
                while (Stopwatch.GetTimestamp() < until)
                {
                    Thread.SpinWait(8);
                }
                warmed.Signal();
            }, null);
        }
        Assert.True(warmed.Wait(Generous), "The long items did not run.");

        using var release = new ManualResetEventSlim();
        using var blocking = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            blocking.Set();
            release.Wait(Generous);
        }, null);
        Assert.True(blocking.Wait(Generous), "The blocking item did not start.");

        const int Older = 20;
        var order = new int[Older + 1];
        int started = 0;
        using var done = new CountdownEvent(Older + 1);
        Action<int> record = index =>
        {
            order[Interlocked.Increment(ref started) - 1] = index;
            done.Signal();
        };
        for (int i = 0; i < Older; i++)
        {
            pool.UnsafeQueueUserWorkItem(index =>
            {
                record(index);
                if (index == 0)
                {
                    pool.UnsafeQueueUserWorkItem(record, Older, preferLocal: false); // the newer item
                }
            }, i, preferLocal: false);
        }
        release.Set();
        Assert.True(done.Wait(Generous), $"{Volatile.Read(ref started)} of {Older + 1} items started.");
        int newerAt = Array.IndexOf(order, Older);
        Assert.True(newerAt == Older, $"The item queued after the other {Older} started at position {newerAt}: {string.Join(", ", order)}.");
    }

    private sealed class LocalProbe(Action action) : IWorkItem
    {
        public void Execute() => action();
    }
}
