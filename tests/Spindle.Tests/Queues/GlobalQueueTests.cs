using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Queues;

/// <summary>
/// The pool's global queue: FIFO, batches, segments, many producers and consumers taking each item exactly once,
/// closing (rejects later items, keeps accepted ones), and no retention of taken items.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)] // its stress form keeps every core busy for minutes
public sealed class GlobalQueueTests
{
    private const int SegmentSize = GlobalQueue.SegmentSize;

    [Fact]
    public void SegmentSize_Is1024() => Assert.Equal(1024, SegmentSize);

    [Fact]
    public void NewQueue_IsEmpty_AndOpen()
    {
        var queue = new GlobalQueue();
        Assert.True(queue.IsEmpty);
        Assert.Equal(0, queue.Count);
        Assert.False(queue.IsClosed);
        Assert.Equal(0, queue.TryDequeueBatch(new WorkItemEntry[4]));
    }

    [Theory]
    [InlineData(1)]
    [InlineData(7)]
    [InlineData(32)]
    [InlineData(SegmentSize)]
    [InlineData(SegmentSize + 1)]
    public void Dequeue_IsFirstInFirstOut_InBatchesOfAnySize(int batchSize)
    {
        const int items = 3 * SegmentSize + 17; // crosses several segment boundaries
        var queue = new GlobalQueue();
        for (int i = 0; i < items; i++)
        {
            Assert.True(queue.TryEnqueue(Numbered(i)));
        }
        Assert.Equal(items, queue.Count);

        var batch = new WorkItemEntry[batchSize];
        int expected = 0;
        int taken;
        while ((taken = queue.TryDequeueBatch(batch)) > 0)
        {
            Assert.InRange(taken, 1, batchSize);
            for (int i = 0; i < taken; i++)
            {
                Assert.Equal(expected++, NumberOf(batch[i]));
            }
            Assert.Equal(items - expected, queue.Count);
        }
        Assert.Equal(items, expected);
        Assert.True(queue.IsEmpty);
        Assert.Equal(0, queue.Count);
    }

    [Fact]
    public void Batch_TakesWhatIsThere_UpToItsSize()
    {
        var queue = new GlobalQueue();
        for (int i = 0; i < 10; i++)
        {
            queue.TryEnqueue(Numbered(i));
        }
        var batch = new WorkItemEntry[4];
        Assert.Equal(4, queue.TryDequeueBatch(batch));
        Assert.Equal([0, 1, 2, 3], Numbers(batch, 4));
        Assert.Equal(4, queue.TryDequeueBatch(batch));
        Assert.Equal([4, 5, 6, 7], Numbers(batch, 4));
        Assert.Equal(2, queue.TryDequeueBatch(batch));
        Assert.Equal([8, 9], Numbers(batch, 2));
        Assert.Equal(0, queue.TryDequeueBatch(batch));

        // A batch never spans a segment boundary, but the next one continues in the next segment.
        var big = new WorkItemEntry[SegmentSize * 2];
        for (int i = 0; i < SegmentSize * 2; i++)
        {
            queue.TryEnqueue(Numbered(i));
        }
        int total = 0;
        int next = 0;
        int taken;
        while ((taken = queue.TryDequeueBatch(big)) > 0)
        {
            for (int i = 0; i < taken; i++)
            {
                Assert.Equal(next++, NumberOf(big[i]));
            }
            total += taken;
        }
        Assert.Equal(SegmentSize * 2, total);
    }

    private static int[] Numbers(WorkItemEntry[] batch, int count)
    {
        var numbers = new int[count];
        for (int i = 0; i < count; i++)
        {
            numbers[i] = NumberOf(batch[i]);
        }
        return numbers;
    }

    [Fact]
    public void InterleavedEnqueueAndDequeue_AcrossSegmentBoundaries_KeepsOrderAndCount()
    {
        var queue = new GlobalQueue();
        var random = new Random(7);
        var batch = new WorkItemEntry[50];
        int enqueued = 0, dequeued = 0;
        while (enqueued < 10 * SegmentSize)
        {
            int add = random.Next(0, 120);
            for (int i = 0; i < add; i++)
            {
                queue.TryEnqueue(Numbered(enqueued++));
            }
            int taken = queue.TryDequeueBatch(batch.AsSpan(0, random.Next(1, batch.Length)));
            for (int i = 0; i < taken; i++)
            {
                Assert.Equal(dequeued++, NumberOf(batch[i]));
            }
            Assert.Equal(enqueued - dequeued, queue.Count);
            Assert.Equal(enqueued == dequeued, queue.IsEmpty);
        }
        int rest;
        while ((rest = queue.TryDequeueBatch(batch)) > 0)
        {
            for (int i = 0; i < rest; i++)
            {
                Assert.Equal(dequeued++, NumberOf(batch[i]));
            }
        }
        Assert.Equal(enqueued, dequeued);
        Assert.True(queue.IsEmpty);
    }

    [Fact]
    public void EnqueueAfterClose_ReturnsFalse_AndItemsAcceptedBeforeAreStillDequeued()
    {
        var queue = new GlobalQueue();
        for (int i = 0; i < SegmentSize + 5; i++)
        {
            Assert.True(queue.TryEnqueue(Numbered(i)));
        }
        queue.Close();
        Assert.True(queue.IsClosed);
        Assert.False(queue.TryEnqueue(Numbered(-1)));
        Assert.False(queue.TryEnqueue(Numbered(-2)));
        Assert.False(queue.IsEmpty);

        var batch = new WorkItemEntry[64];
        int next = 0;
        int taken;
        while ((taken = queue.TryDequeueBatch(batch)) > 0)
        {
            for (int i = 0; i < taken; i++)
            {
                Assert.Equal(next++, NumberOf(batch[i]));
            }
        }
        Assert.Equal(SegmentSize + 5, next);
        Assert.True(queue.IsEmpty);
        queue.Close(); // idempotent
        Assert.False(queue.TryEnqueue(Numbered(-3)));
    }

    [Fact]
    public void EnqueueAlways_IsAcceptedAfterClose()
    {
        // Used for a live worker's ring overflow, which was accepted before the close.
        var queue = new GlobalQueue();
        queue.Close();
        queue.EnqueueAlways(Numbered(1));
        queue.EnqueueAlways(Numbered(2));
        var batch = new WorkItemEntry[4];
        Assert.Equal(2, queue.TryDequeueBatch(batch));
        Assert.Equal([1, 2], Numbers(batch, 2));
    }

    [Theory]
    [InlineData(4, 2)]
    [InlineData(3, 3)]
    [InlineData(1, 4)]
    public void ManyProducersAndConsumers_TakeEveryItemExactlyOnce_InEachProducersOrder(int producers, int consumers) =>
        RunProducersAndConsumers(producers, consumers, itemsPerProducer: 50_000);

    internal static void RunProducersAndConsumers(int producers, int consumers, int itemsPerProducer)
    {
        var queue = new GlobalQueue();
        int total = producers * itemsPerProducer;
        using var ledger = new ExactlyOnceLedger(total);
        int taken = 0;
        int outOfOrder = 0;
        using var go = new ManualResetEventSlim();

        var threads = new List<TestThread>();
        for (int p = 0; p < producers; p++)
        {
            int start = p * itemsPerProducer;
            threads.Add(Waits.Start(() =>
            {
                go.Wait();
                for (int i = start; i < start + itemsPerProducer; i++)
                {
                    Assert.True(queue.TryEnqueue(Numbered(i)));
                }
            }, $"producer {p}"));
        }
        for (int c = 0; c < consumers; c++)
        {
            int seed = c;
            threads.Add(Waits.Start(() =>
            {
                var random = new Random(seed);
                var batch = new WorkItemEntry[64];
                var lastSeen = new int[producers]; // per producer: a consumer sees each producer's items in order
                Array.Fill(lastSeen, -1);
                go.Wait();
                long deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;
                while (Volatile.Read(ref taken) < total && Environment.TickCount64 < deadline)
                {
                    int count = queue.TryDequeueBatch(batch.AsSpan(0, random.Next(1, batch.Length + 1)));
                    for (int i = 0; i < count; i++)
                    {
                        int number = NumberOf(batch[i]);
                        ledger.Hit(number);
                        int producer = number / itemsPerProducer;
                        if (number <= lastSeen[producer])
                        {
                            Interlocked.Increment(ref outOfOrder);
                        }
                        lastSeen[producer] = number;
                    }
                    Interlocked.Add(ref taken, count);
                }
            }, $"consumer {c}"));
        }
        go.Set();
        foreach (TestThread thread in threads)
        {
            thread.Join();
        }

        ledger.AssertExactlyOnce();
        Assert.Equal(0, outOfOrder);
        Assert.True(queue.IsEmpty);
        Assert.Equal(0, queue.Count);
    }

    [Fact]
    public void CloseRacingProducers_EveryAcceptedItemIsDequeuedOnce_AndNoRejectedOne() =>
        RunCloseRacingProducers(rounds: 20, producers: 3);

    [Fact]
    public void CloseRacingProducers_OnAQueueThatReusesSegments_EveryAcceptedItemIsDequeuedOnce() =>
        RunCloseRacingProducers(rounds: Stress.Scale(20, 500), producers: 3, reuse: true);

    /// <param name="reuse">
    /// Run each round on a queue whose free list was filled beforehand and holds few segments, so that the race goes
    /// through reused segments as well as new ones.
    /// </param>
    internal static void RunCloseRacingProducers(int rounds, int producers, bool reuse = false)
    {
        const int capacity = 200_000;
        for (int round = 0; round < rounds; round++)
        {
            GlobalQueue queue = reuse ? WarmQueue(maxRetiredSegments: 3, segments: 6) : new GlobalQueue();
            var hits = new int[producers * capacity];
            var accepted = new int[producers];
            int consumed = 0;
            using var go = new ManualResetEventSlim();
            var producerThreads = new TestThread[producers];
            for (int p = 0; p < producers; p++)
            {
                int producer = p;
                producerThreads[p] = Waits.Start(() =>
                {
                    go.Wait();
                    for (int i = 0; i < capacity; i++)
                    {
                        if (i == capacity - 1)
                        {
                            Waits.Poll(() => queue.IsClosed, Waits.MustHappen); // make sure each producer meets the close
                        }
                        if (!queue.TryEnqueue(Numbered(producer * capacity + i)))
                        {
                            return;
                        }
                        accepted[producer]++;
                    }
                }, $"producer {p}");
            }
            TestThread consumer = Waits.Start(() =>
            {
                var batch = new WorkItemEntry[32];
                go.Wait();
                while (true)
                {
                    bool closed = queue.IsClosed; // read before the emptiness check: see GlobalQueue's close protocol
                    int count = queue.TryDequeueBatch(batch);
                    for (int i = 0; i < count; i++)
                    {
                        hits[NumberOf(batch[i])]++;
                    }
                    consumed += count;
                    if (count == 0 && closed && queue.IsEmpty)
                    {
                        return;
                    }
                }
            }, "consumer");
            go.Set();
            if (reuse)
            {
                Waits.Until(() => queue.ReusedSegmentCount > 0, "the producers to reach a reused segment");
            }
            Thread.SpinWait(1_000 + round * 2_000);
            queue.Close();
            foreach (TestThread thread in producerThreads)
            {
                thread.Join();
            }
            consumer.Join();

            int acceptedTotal = 0;
            for (int p = 0; p < producers; p++)
            {
                Assert.True(accepted[p] < capacity, $"Producer {p} was never rejected.");
                acceptedTotal += accepted[p];
                for (int i = 0; i < capacity; i++)
                {
                    int expected = i < accepted[p] ? 1 : 0;
                    if (hits[p * capacity + i] != expected)
                    {
                        Assert.Fail($"Round {round}, producer {p}: item {i} was dequeued {hits[p * capacity + i]} times; " +
                            $"{accepted[p]} were accepted before the close.");
                    }
                }
            }
            Assert.Equal(acceptedTotal, consumed);
            if (reuse)
            {
                Assert.True(queue.ReusedSegmentCount > 0, $"Round {round} reused no segment.");
            }
        }
    }

    /// <summary>A queue whose free list holds retired segments: <paramref name="segments"/> segments' worth went through it.</summary>
    private static GlobalQueue WarmQueue(int maxRetiredSegments, int segments)
    {
        var queue = new GlobalQueue(maxRetiredSegments);
        var entries = new WorkItemEntry[segments * SegmentSize];
        for (int i = 0; i < entries.Length; i++)
        {
            entries[i] = Numbered(-1);
        }
        Assert.Equal(entries.Length, FillAndDrain(queue, entries, new WorkItemEntry[64]));
        Assert.Equal(Math.Min(maxRetiredSegments, segments - 1), queue.RetiredSegmentCount);
        Assert.Equal(0, queue.ReusedSegmentCount);
        return queue;
    }

    [Fact]
    public void RetiredSegments_AreKeptUpToTheBound_AndReusedBeforeAnyAllocation()
    {
        // Ten full segments: when they have been drained, the head sits in the last one and the nine before it are
        // retired, of which the free list keeps three.
        var queue = new GlobalQueue(maxRetiredSegments: 3);
        var entries = new WorkItemEntry[10 * SegmentSize];
        for (int i = 0; i < entries.Length; i++)
        {
            entries[i] = Numbered(i);
        }
        var batch = new WorkItemEntry[50];
        Assert.Equal(entries.Length, FillAndDrain(queue, entries, batch));
        Assert.Equal(3, queue.RetiredSegmentCount);
        Assert.Equal(0, queue.ReusedSegmentCount);

        // The next backlog first uses up the free list (in order, and with the right count and emptiness throughout).
        for (int i = 0; i < entries.Length; i++)
        {
            Assert.True(queue.TryEnqueue(entries[i]));
            Assert.Equal(i + 1, queue.Count);
        }
        Assert.Equal(0, queue.RetiredSegmentCount);
        Assert.Equal(3, queue.ReusedSegmentCount);
        Assert.False(queue.IsEmpty);
        int next = 0;
        int taken;
        while ((taken = queue.TryDequeueBatch(batch)) > 0)
        {
            for (int i = 0; i < taken; i++)
            {
                Assert.Equal(next++, NumberOf(batch[i]));
            }
            Assert.Equal(entries.Length - next, queue.Count);
            Assert.Equal(next == entries.Length, queue.IsEmpty);
        }
        Assert.Equal(entries.Length, next);
        Assert.Equal(3, queue.RetiredSegmentCount);
    }

    [Fact]
    public void TrimRetired_KeepsAFreeListUsedWithinTheIdleTime_AndGivesBackTheRestOfAnIdleOne()
    {
        // Ten segments' worth: nine retired just now, eight kept.
        GlobalQueue queue = WarmQueue(maxRetiredSegments: 8, segments: 10);
        Assert.Equal(8, queue.RetiredSegmentCount);
        Assert.Equal(0, queue.TrimRetired(keep: 2, idleMs: 60_000));
        Assert.Equal(8, queue.RetiredSegmentCount);

        // Idle for long enough (here: any time at all): the trim keeps two, the most recently retired.
        Assert.Equal(6, queue.TrimRetired(keep: 2, idleMs: 0));
        Assert.Equal(2, queue.RetiredSegmentCount);
        Assert.Equal(0, queue.TrimRetired(keep: 2, idleMs: 0));

        // A backlog of six segments' worth: the first fills the empty head segment again (a ring), the next five draw on
        // the two kept and allocate three; the drain retires the five before the last.
        var entries = new WorkItemEntry[6 * SegmentSize];
        for (int i = 0; i < entries.Length; i++)
        {
            entries[i] = Numbered(i);
        }
        Assert.Equal(entries.Length, FillAndDrain(queue, entries, new WorkItemEntry[64]));
        Assert.Equal(2, queue.ReusedSegmentCount);
        Assert.Equal(5, queue.RetiredSegmentCount);
        Assert.Equal(0, queue.TrimRetired(keep: 1, idleMs: 60_000));
        Assert.Equal(5, queue.RetiredSegmentCount);
        Assert.Equal(4, queue.TrimRetired(keep: 1, idleMs: 0));
        Assert.Equal(1, queue.RetiredSegmentCount);

        // The queue works on as before: the kept segment is reused, in order.
        Assert.Equal(entries.Length, FillAndDrain(queue, entries, new WorkItemEntry[64]));
        Assert.Equal(3, queue.ReusedSegmentCount);
        Assert.True(queue.IsEmpty);
    }

    [Theory]
    [InlineData(4, 2, 2)]
    [InlineData(2, 4, 0)]
    [InlineData(3, 3, 64)]
    public void ReusedSegments_ManyProducersAndConsumers_TakeEveryItemExactlyOnce_InEachProducersOrder(
        int producers, int consumers, int maxRetiredSegments) =>
        RunThroughReusedSegments(producers, consumers, maxRetiredSegments,
            itemsPerProducer: Stress.Scale(20_000, 500_000), rounds: Stress.Scale(4, 40));

    /// <summary>
    /// Rounds of producers and consumers on one queue, so that its segments are retired and reused many times over.
    /// Even rounds build a deep backlog before the consumers start; odd rounds run everyone at once. Every round checks
    /// with an exact ledger that each item was taken once, and that each consumer saw each producer's items in order.
    /// </summary>
    internal static void RunThroughReusedSegments(int producers, int consumers, int maxRetiredSegments, int itemsPerProducer, int rounds)
    {
        var queue = new GlobalQueue(maxRetiredSegments);
        int total = producers * itemsPerProducer;
        for (int round = 0; round < rounds; round++)
        {
            bool deep = round % 2 == 0;
            using var ledger = new ExactlyOnceLedger(total);
            int taken = 0;
            int outOfOrder = 0;
            using var go = new ManualResetEventSlim();
            using var produced = new CountdownEvent(producers);
            var threads = new List<TestThread>();
            for (int p = 0; p < producers; p++)
            {
                int start = p * itemsPerProducer;
                threads.Add(Waits.Start(() =>
                {
                    go.Wait();
                    for (int i = start; i < start + itemsPerProducer; i++)
                    {
                        Assert.True(queue.TryEnqueue(Numbered(i)));
                        if ((i & 0xFFF) == 0)
                        {
                            Thread.Yield(); // let the others overtake, now and then
                        }
                    }
                    produced.Signal();
                }, $"producer {p}"));
            }
            for (int c = 0; c < consumers; c++)
            {
                int seed = round * consumers + c;
                threads.Add(Waits.Start(() =>
                {
                    var random = new Random(seed);
                    var batch = new WorkItemEntry[64];
                    var lastSeen = new int[producers];
                    Array.Fill(lastSeen, -1);
                    go.Wait();
                    if (deep)
                    {
                        Waits.For(produced, "the producers to build the backlog");
                    }
                    long deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;
                    while (Volatile.Read(ref taken) < total && Environment.TickCount64 < deadline)
                    {
                        int count = queue.TryDequeueBatch(batch.AsSpan(0, random.Next(1, batch.Length + 1)));
                        for (int i = 0; i < count; i++)
                        {
                            int number = NumberOf(batch[i]);
                            ledger.Hit(number);
                            int producer = number / itemsPerProducer;
                            if (number <= lastSeen[producer])
                            {
                                Interlocked.Increment(ref outOfOrder);
                            }
                            lastSeen[producer] = number;
                        }
                        Interlocked.Add(ref taken, count);
                        if (random.Next(64) == 0)
                        {
                            Thread.Yield(); // let the backlog grow, now and then
                        }
                    }
                }, $"consumer {c}"));
            }
            go.Set();
            foreach (TestThread thread in threads)
            {
                thread.Join();
            }

            ledger.AssertExactlyOnce();
            Assert.Equal(0, outOfOrder);
            Assert.True(queue.IsEmpty);
            Assert.Equal(0, queue.Count);
            Assert.InRange(queue.RetiredSegmentCount, 0, maxRetiredSegments);
        }
        if (maxRetiredSegments > 0)
        {
            Assert.True(queue.ReusedSegmentCount > 0, "No segment was reused.");
        }
        else
        {
            Assert.Equal(0, queue.ReusedSegmentCount);
        }
    }

    [Fact]
    public void IsEmpty_NeverReportsEmpty_WhileAnAcceptedItemIsUntaken_AcrossReusedSegments() =>
        RunEmptinessChecks(producers: 2, consumers: 2, itemsPerProducer: Stress.Scale(100_000, 5_000_000));

    /// <summary>
    /// Producers and consumers cross many segment boundaries (retiring and reusing segments) while a checker asks
    /// <see cref="GlobalQueue.IsEmpty"/> over and over. Producers count an item after it was accepted; consumers reserve
    /// a batch's worth before they take and give back what they did not take, so the reservations bound the items taken
    /// at any moment. If the queue said empty although more items had been accepted before the question than were
    /// reserved after it, an accepted item was in the queue, untaken, all along.
    /// </summary>
    internal static void RunEmptinessChecks(int producers, int consumers, int itemsPerProducer)
    {
        const int MaxBacklog = 4 * GlobalQueue.SegmentSize;
        var queue = new GlobalQueue(maxRetiredSegments: 4);
        int total = producers * itemsPerProducer;
        using var ledger = new ExactlyOnceLedger(total);
        long accepted = 0, reserved = 0;
        int taken = 0;
        int checks = 0, falseEmpties = 0;
        string? firstFalseEmpty = null;
        using var go = new ManualResetEventSlim();
        var threads = new List<TestThread>();
        for (int p = 0; p < producers; p++)
        {
            int start = p * itemsPerProducer;
            threads.Add(Waits.Start(() =>
            {
                go.Wait();
                for (int i = start; i < start + itemsPerProducer; i++)
                {
                    // A bounded backlog, so that segments retire and are reused all along: left free, the producers
                    // could fill every segment before a descheduled consumer took anything, and nothing would retire
                    // before the last grow.
                    while (Volatile.Read(ref accepted) - Volatile.Read(ref taken) > MaxBacklog)
                    {
                        Thread.Yield();
                    }
                    Assert.True(queue.TryEnqueue(Numbered(i)));
                    Interlocked.Increment(ref accepted);
                }
            }, $"producer {p}"));
        }
        for (int c = 0; c < consumers; c++)
        {
            int seed = c;
            threads.Add(Waits.Start(() =>
            {
                var random = new Random(seed);
                var batch = new WorkItemEntry[32];
                go.Wait();
                long deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;
                while (Volatile.Read(ref taken) < total && Environment.TickCount64 < deadline)
                {
                    int want = random.Next(1, batch.Length + 1);
                    Interlocked.Add(ref reserved, want);
                    int count = queue.TryDequeueBatch(batch.AsSpan(0, want));
                    Interlocked.Add(ref reserved, count - want);
                    for (int i = 0; i < count; i++)
                    {
                        ledger.Hit(NumberOf(batch[i]));
                    }
                    Interlocked.Add(ref taken, count);
                }
            }, $"consumer {c}"));
        }
        threads.Add(Waits.Start(() =>
        {
            go.Wait();
            long deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;
            while (Volatile.Read(ref taken) < total && Environment.TickCount64 < deadline)
            {
                long acceptedBefore = Volatile.Read(ref accepted);
                bool empty = queue.IsEmpty;
                long reservedAfter = Volatile.Read(ref reserved);
                checks++;
                if (empty && acceptedBefore > reservedAfter)
                {
                    falseEmpties++;
                    firstFalseEmpty ??= $"{acceptedBefore} accepted before, at most {reservedAfter} taken after";
                }
            }
        }, "checker"));
        go.Set();
        foreach (TestThread thread in threads)
        {
            thread.Join();
        }

        ledger.AssertExactlyOnce();
        Assert.True(falseEmpties == 0, $"IsEmpty said empty {falseEmpties} times of {checks} with an item untaken; first: {firstFalseEmpty}.");
        Assert.True(queue.IsEmpty);
        Assert.True(queue.ReusedSegmentCount > 0, "No segment was reused.");
    }

    [Fact]
    public void WarmQueue_RepeatedDeepBacklog_AllocatesNothing()
    {
        // Ten segments' worth waits at once, then is drained, on one thread; after a few such rounds the queue has
        // every segment it needs, so a further round must not allocate at all.
        const int depth = 10 * SegmentSize;
        var queue = new GlobalQueue();
        var entries = new WorkItemEntry[depth];
        for (int i = 0; i < depth; i++)
        {
            entries[i] = Numbered(i); // boxed here, outside the measured round
        }
        var batch = new WorkItemEntry[32];
        for (int round = 0; round < 3; round++)
        {
            Assert.Equal(depth, FillAndDrain(queue, entries, batch));
        }

        long before = GC.GetAllocatedBytesForCurrentThread();
        int drained = FillAndDrain(queue, entries, batch);
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;

        Assert.Equal(depth, drained);
        Assert.True(allocated == 0, $"A warm queue allocated {allocated} bytes for a backlog of {depth} items.");
        Assert.True(queue.IsEmpty);
    }

    /// <summary>Enqueues every entry, then takes them all in batches; returns how many came out in order.</summary>
    private static int FillAndDrain(GlobalQueue queue, WorkItemEntry[] entries, WorkItemEntry[] batch)
    {
        for (int i = 0; i < entries.Length; i++)
        {
            if (!queue.TryEnqueue(entries[i]))
            {
                return -1;
            }
        }
        int next = 0;
        int taken;
        while ((taken = queue.TryDequeueBatch(batch)) > 0)
        {
            for (int i = 0; i < taken; i++)
            {
                if (!ReferenceEquals(batch[i].State, entries[next].State))
                {
                    return -1;
                }
                next++;
            }
        }
        Array.Clear(batch);
        return next;
    }

    [Fact]
    public void DequeuedItems_AreNotRetainedByTheQueue()
    {
        var queue = new GlobalQueue();
        var weak = new WeakReference[SegmentSize + 10];
        for (int i = 0; i < weak.Length; i++)
        {
            weak[i] = EnqueueTracked(queue);
        }
        DrainAndDrop(queue, weak.Length);
        Retention.AssertCollected(weak, "the states of dequeued items");
        GC.KeepAlive(queue);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void DrainAndDrop(GlobalQueue queue, int expected)
    {
        var batch = new WorkItemEntry[100];
        int total = 0;
        int taken;
        while ((taken = queue.TryDequeueBatch(batch)) > 0)
        {
            total += taken;
        }
        Array.Clear(batch);
        Assert.Equal(expected, total);
    }
}
