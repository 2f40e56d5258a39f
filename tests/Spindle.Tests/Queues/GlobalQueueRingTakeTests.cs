using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Queues;

/// <summary>
/// A worker's batch from the global queue copied straight into its ring: the oldest item comes back to the caller, the
/// rest lie in the ring so that its owner's pops run them in queue order and thieves take the newest first, entries that
/// a producer abandoned are skipped, and the ring grows for the batch when it has to.
/// </summary>
public sealed class GlobalQueueRingTakeTests
{
    [Fact]
    public void TheOldestComesBack_TheRestPopInQueueOrder()
    {
        GlobalQueue queue = QueueOf(10);
        var ring = new WorkStealingRing();

        Assert.Equal(4, queue.TryDequeueIntoRing(ring, 4, gapWaits: 0, out WorkItemEntry first));

        Assert.Equal(0, NumberOf(first));
        Assert.Equal([1, 2, 3], PopAll(ring));
        Assert.Equal(6, queue.Count);
    }

    [Fact]
    public void ThievesTakeTheNewestOfTheBatchFirst()
    {
        GlobalQueue queue = QueueOf(5);
        var ring = new WorkStealingRing();

        Assert.Equal(5, queue.TryDequeueIntoRing(ring, 8, gapWaits: 0, out WorkItemEntry first));

        Assert.Equal(0, NumberOf(first));
        var stolen = new List<int>();
        while (ring.TrySteal(out WorkItemEntry item))
        {
            stolen.Add(NumberOf(item));
        }
        Assert.Equal([4, 3, 2, 1], stolen);
    }

    [Fact]
    public void ALoneItem_ComesBack_AndLeavesTheRingEmpty()
    {
        GlobalQueue queue = QueueOf(1);
        var ring = new WorkStealingRing();

        Assert.Equal(1, queue.TryDequeueIntoRing(ring, 32, gapWaits: 0, out WorkItemEntry first));

        Assert.Equal(0, NumberOf(first));
        Assert.True(ring.IsEmpty);
        Assert.True(queue.IsEmpty);
    }

    [Fact]
    public void AnEmptyQueue_TakesNothing_AndLeavesTheRingAsItWas()
    {
        var queue = new GlobalQueue();
        var ring = new WorkStealingRing();
        Assert.True(ring.TryPush(Numbered(7)));

        Assert.Equal(0, queue.TryDequeueIntoRing(ring, 32, gapWaits: 0, out WorkItemEntry first));

        Assert.True(first.IsEmpty);
        Assert.Equal([7], PopAll(ring));
    }

    [Fact]
    public void AbandonedEntries_AreSkipped_AtTheFrontAndInTheRest()
    {
        // Claims published empty: what a producer leaves when it loses the race with Close (see GlobalQueue).
        var queue = new GlobalQueue();
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), default);
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), Numbered(1));
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), default);
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), Numbered(3));
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), Numbered(4));
        var ring = new WorkStealingRing();

        Assert.Equal(3, queue.TryDequeueIntoRing(ring, 8, gapWaits: 0, out WorkItemEntry first));

        Assert.Equal(1, NumberOf(first));
        Assert.Equal([3, 4], PopAll(ring));
        Assert.True(queue.IsEmpty);
    }

    [Fact]
    public void OnlyAbandonedEntries_TakeNothing()
    {
        var queue = new GlobalQueue();
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), default);
        GlobalQueue.PublishClaimedForTests(queue.ClaimForTests(), default);
        var ring = new WorkStealingRing();

        Assert.Equal(0, queue.TryDequeueIntoRing(ring, 8, gapWaits: 0, out WorkItemEntry first));

        Assert.True(first.IsEmpty);
        Assert.True(ring.IsEmpty);
        Assert.True(queue.IsEmpty);
    }

    [Fact]
    public void ARingWithTooFewSlots_GrowsForTheBatch_BehindItsOwnItems()
    {
        GlobalQueue queue = QueueOf(6, from: 10);
        var ring = new WorkStealingRing(64, initialSlots: 2);
        Assert.True(ring.TryPush(Numbered(0)));

        Assert.Equal(6, queue.TryDequeueIntoRing(ring, 6, gapWaits: 0, out WorkItemEntry first));

        Assert.Equal(10, NumberOf(first));
        Assert.True(ring.SlotCount >= 6);
        Assert.Equal([11, 12, 13, 14, 15, 0], PopAll(ring));
    }

    [Fact]
    public void TakenItems_AreNotRetainedByTheQueue()
    {
        var queue = new GlobalQueue();
        var weak = new WeakReference[8];
        for (int i = 0; i < weak.Length; i++)
        {
            weak[i] = EnqueueTracked(queue);
        }
        var ring = new WorkStealingRing();
        TakeAllAndDrop(queue, ring, weak.Length);
        Retention.AssertCollected(weak, "the states of items taken into a ring");
        GC.KeepAlive(queue);
        GC.KeepAlive(ring);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void TakeAllAndDrop(GlobalQueue queue, WorkStealingRing ring, int expected)
    {
        Assert.Equal(expected, queue.TryDequeueIntoRing(ring, expected, gapWaits: 0, out _));
        while (ring.TryPop(out _))
        {
        }
        ring.ReleaseTakenSlots();
    }

    private static GlobalQueue QueueOf(int count, int from = 0)
    {
        var queue = new GlobalQueue();
        for (int i = 0; i < count; i++)
        {
            Assert.True(queue.TryEnqueue(Numbered(from + i)));
        }
        return queue;
    }

    private static List<int> PopAll(WorkStealingRing ring)
    {
        var numbers = new List<int>();
        while (ring.TryPop(out WorkItemEntry item))
        {
            numbers.Add(NumberOf(item));
        }
        return numbers;
    }
}
