using System;
using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Queues;

/// <summary>
/// The owner's record of how far its bottom index moved since it last reset it: the lowest its pops reached and the
/// highest its pushes reached, which tells a chain at the ring's top (each item popping the one its predecessor pushed)
/// from work that spreads.
/// </summary>
public sealed class WorkStealingRingBottomRangeTests
{
    [Fact]
    public void AReset_StartsTheRangeAtTheCurrentBottom()
    {
        WorkStealingRing ring = WithItems(3);
        Assert.Equal((3L, 3L, 3L), ring.BottomRange);
    }

    [Fact]
    public void PopsAndPushes_WidenTheRange_ByTheLowestAndHighestBottom()
    {
        WorkStealingRing ring = WithItems(3);

        // A chain: pop the newest, push one, again: the bottom moves by one place.
        for (int i = 0; i < 5; i++)
        {
            Assert.True(ring.TryPop(out _));
            ring.TryPush(Numbered(10 + i));
        }
        Assert.Equal((3L, 2L, 3L), ring.BottomRange);

        // Work that spreads: one item queues three.
        Assert.True(ring.TryPop(out _));
        for (int i = 0; i < 3; i++)
        {
            ring.TryPush(Numbered(20 + i));
        }
        Assert.Equal((5L, 2L, 5L), ring.BottomRange);

        Span<WorkItemEntry> batch = [Numbered(30), Numbered(31)];
        ring.PushRangeReversed(batch);
        Assert.Equal((7L, 2L, 7L), ring.BottomRange);
    }

    [Fact]
    public void TakesFromTheTop_DoNotMoveTheRange()
    {
        WorkStealingRing ring = WithItems(4);
        Assert.True(ring.TrySteal(out WorkItemEntry oldest));
        Assert.Equal(0, NumberOf(oldest));
        Assert.Equal((4L, 4L, 4L), ring.BottomRange);
    }

    /// <summary>A ring of 8 slots holding items 0 .. <paramref name="count"/> - 1, its range reset after them.</summary>
    private static WorkStealingRing WithItems(int count)
    {
        var ring = new WorkStealingRing(8);
        for (int i = 0; i < count; i++)
        {
            ring.TryPush(Numbered(i));
        }
        ring.ResetBottomRange();
        return ring;
    }

    [Fact]
    public void APopOfAnEmptyRing_LeavesTheRange()
    {
        var ring = new WorkStealingRing(8);
        ring.TryPush(Numbered(0));
        Assert.True(ring.TrySteal(out _));
        ring.ResetBottomRange();
        Assert.False(ring.TryPop(out _));
        Assert.Equal((1L, 1L, 1L), ring.BottomRange);
    }
}
