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

    internal static void RunCloseRacingProducers(int rounds, int producers)
    {
        const int capacity = 200_000;
        for (int round = 0; round < rounds; round++)
        {
            var queue = new GlobalQueue();
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
        }
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
    private static WeakReference EnqueueTracked(GlobalQueue queue)
    {
        Assert.True(queue.TryEnqueue(Tracked(out WeakReference weak)));
        return weak;
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
