using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Queues;

/// <summary>
/// The ring's growth: it starts small and doubles up to its capacity when a push finds it full, keeping the order of
/// both ends, and the owner's growth racing thieves loses or repeats no item.
/// </summary>
public sealed class WorkStealingRingGrowthTests
{
    [Fact]
    public void NewRing_StartsWithTheInitialSlots_CappedAtItsCapacity()
    {
        Assert.Equal(WorkStealingRing.InitialSlots, new WorkStealingRing().SlotCount);
        Assert.Equal(WorkStealingRing.DefaultCapacity, new WorkStealingRing().Capacity);
        Assert.Equal(4, new WorkStealingRing(4).SlotCount);
        Assert.Equal(2, new WorkStealingRing(256, initialSlots: 2).SlotCount);
    }

    [Fact]
    public void InitialSlots_HoldTheRestOfAWholeGlobalBatch()
    {
        // A worker runs the first item of a batch from the global queue and pushes the rest into its ring: a ring that
        // has just started does not grow for it.
        var ring = new WorkStealingRing();
        var rest = new WorkItemEntry[Scheduling.WorkerLocalQueue.GlobalBatchSize - 1];
        for (int i = 0; i < rest.Length; i++)
        {
            rest[i] = Numbered(i);
        }
        ring.PushRangeReversed(rest);
        Assert.Equal(rest.Length, ring.Count);
        Assert.Equal(WorkStealingRing.InitialSlots, ring.SlotCount);
    }

    [Theory]
    [InlineData(0)]
    [InlineData(1)]
    [InlineData(3)]
    [InlineData(-2)]
    public void InitialSlots_ThatAreNotAPowerOfTwoOfAtLeastTwo_Throw(int initialSlots)
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkStealingRing(64, initialSlots));
        Assert.Equal("initialSlots", e.ParamName);
    }

    [Fact]
    public void Push_BeyondTheSlots_DoublesThemUpToTheCapacity_ThenRefuses()
    {
        var ring = new WorkStealingRing(16, initialSlots: 2);
        var slots = new List<int>();
        for (int i = 0; i < 16; i++)
        {
            Assert.True(ring.TryPush(Numbered(i)));
            slots.Add(ring.SlotCount);
        }
        Assert.Equal([2, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16], slots);
        Assert.False(ring.TryPush(Numbered(16)));
        Assert.Equal(16, ring.Count);
        Assert.Equal(16, ring.SlotCount);
    }

    [Fact]
    public void Growth_KeepsPopsNewestFirstAndStealsOldestFirst()
    {
        var ring = new WorkStealingRing(64, initialSlots: 2);
        for (int i = 0; i < 40; i++)
        {
            Assert.True(ring.TryPush(Numbered(i)));
        }
        for (int i = 0; i < 20; i++)
        {
            Assert.True(ring.TrySteal(out WorkItemEntry oldest));
            Assert.Equal(i, NumberOf(oldest));
        }
        for (int i = 39; i >= 20; i--)
        {
            Assert.True(ring.TryPop(out WorkItemEntry newest));
            Assert.Equal(i, NumberOf(newest));
        }
        Assert.True(ring.IsEmpty);
    }

    [Fact]
    public void Growth_AfterManyLaps_KeepsOrderAndCount()
    {
        // Indices far from zero, so the copy maps them from one mask to another rather than slot for slot.
        var ring = new WorkStealingRing(256, initialSlots: 2);
        var random = new Random(7);
        var model = new LinkedList<int>(); // oldest first
        int next = 0;
        for (int step = 0; step < 200_000; step++)
        {
            int action = random.Next(10);
            if (action < 4 || (action < 6 && step > 100_000))
            {
                bool pushed = ring.TryPush(Numbered(next));
                Assert.Equal(model.Count < 256, pushed);
                if (pushed)
                {
                    model.AddLast(next);
                }
                next++;
            }
            else if (action < 7)
            {
                bool popped = ring.TryPop(out WorkItemEntry newest);
                Assert.Equal(model.Count > 0, popped);
                if (popped)
                {
                    Assert.Equal(model.Last!.Value, NumberOf(newest));
                    model.RemoveLast();
                }
            }
            else
            {
                bool stolen = ring.TrySteal(out WorkItemEntry oldest);
                Assert.Equal(model.Count > 0, stolen);
                if (stolen)
                {
                    Assert.Equal(model.First!.Value, NumberOf(oldest));
                    model.RemoveFirst();
                }
            }
            Assert.Equal(model.Count, ring.Count);
        }
        Assert.Equal(256, ring.SlotCount); // the second half's pushes outnumber its takes: the ring grew all the way
    }

    [Fact]
    public void PushRangeReversed_BeyondTheSlots_GrowsAndKeepsTheOrder()
    {
        var ring = new WorkStealingRing(64, initialSlots: 4);
        Assert.True(ring.TryPush(Numbered(100)));
        var batch = new WorkItemEntry[10];
        for (int i = 0; i < batch.Length; i++)
        {
            batch[i] = Numbered(i);
        }
        ring.PushRangeReversed(batch);
        Assert.Equal(16, ring.SlotCount);
        Assert.All(batch, entry => Assert.Null(entry.Callback)); // the span is cleared
        for (int i = 0; i < 10; i++)
        {
            Assert.True(ring.TryPop(out WorkItemEntry entry));
            Assert.Equal(i, NumberOf(entry)); // pushed last to first: popped first to last
        }
        Assert.True(ring.TryPop(out WorkItemEntry first));
        Assert.Equal(100, NumberOf(first));
    }

    [Fact]
    public void StealHalfInto_ASmallDestination_GrowsIt()
    {
        var source = new WorkStealingRing(64);
        for (int i = 0; i < 40; i++)
        {
            Assert.True(source.TryPush(Numbered(i)));
        }
        var destination = new WorkStealingRing(64, initialSlots: 2);
        int taken = source.StealHalfInto(destination, out WorkItemEntry first);
        Assert.Equal(20, taken);
        Assert.Equal(0, NumberOf(first));
        Assert.Equal(19, destination.Count);
        Assert.Equal(32, destination.SlotCount);
    }

    [Fact]
    public void ItemStolenBeforeAGrowth_IsNotRetainedByTheGrownRing()
    {
        var ring = new WorkStealingRing(8, initialSlots: 2);
        WeakReference weak = PushTracked(ring);
        Assert.True(ring.TryPush(Numbered(1)));
        DropStolen(ring);
        Assert.True(ring.TryPush(Numbered(2))); // clears the stolen item's slot
        Assert.True(ring.TryPush(Numbered(3))); // grows: the copy takes the items from the top on, into a new array
        Assert.Equal(4, ring.SlotCount);
        Retention.AssertCollected(weak, "the state of an item stolen before the ring grew");
        GC.KeepAlive(ring);
    }

    // ---- Concurrency -------------------------------------------------------------------------------------------

    [Fact]
    public void GrowthRacingThieves_EveryItemIsTakenExactlyOnce()
    {
        // Each round a fresh ring of two slots, which the owner fills to its capacity through every doubling while two
        // thieves steal (one item, or half into a ring of their own that starts small too), so growths race steals.
        const int capacity = 256;
        const int rounds = 1_500;
        const int items = rounds * capacity;
        using var ledger = new ExactlyOnceLedger(items);
        WorkStealingRing current = new(capacity, initialSlots: 2);

        void Take(in WorkItemEntry entry) => ledger.Hit(NumberOf(entry));

        var stealing = new RingThieves(
            count: 2, () => Volatile.Read(ref current), () => new WorkStealingRing(capacity, initialSlots: 2), entry => Take(entry));
        var ownerRandom = new Random(items);
        int next = 0;
        for (int round = 0; round < rounds; round++)
        {
            WorkStealingRing ring = new(capacity, initialSlots: 2);
            Volatile.Write(ref current, ring);
            for (int i = 0; i < capacity; i++)
            {
                Assert.True(ring.TryPush(Numbered(next++)), "Fewer items than the capacity always fit.");
                if (ownerRandom.Next(16) == 0 && ring.TryPop(out WorkItemEntry entry))
                {
                    Take(entry);
                }
            }
            while (ring.TryPop(out WorkItemEntry rest))
            {
                Take(rest);
            }
        }
        stealing.FinishAndJoin();

        ledger.AssertExactlyOnce();
        Assert.Equal(items, next);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference PushTracked(WorkStealingRing ring)
    {
        Assert.True(ring.TryPush(Tracked(out WeakReference weak)));
        return weak;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void DropStolen(WorkStealingRing ring) => Assert.True(ring.TrySteal(out _));
}
