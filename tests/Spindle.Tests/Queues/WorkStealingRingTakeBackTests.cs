using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Queues;

/// <summary>The owner takes back its newest entry only when it is the one asked for and nobody has claimed it.</summary>
public sealed class WorkStealingRingTakeBackTests
{
    [Fact]
    public void TheNewestEntry_IsTakenBack_AndTheOthersStay()
    {
        var ring = new WorkStealingRing(4);
        ring.TryPush(Numbered(0));
        WorkItemEntry newest = Numbered(1);
        ring.TryPush(newest);

        Assert.True(ring.TryPopIfNewest(newest.Callback, newest.State));

        Assert.Equal(1, ring.Count);
        Assert.True(ring.TryPop(out WorkItemEntry left));
        Assert.Equal(0, NumberOf(left));
    }

    [Fact]
    public void AnEntryThatIsNotTheNewest_OrNotTheSameCallbackAndState_IsLeftWhereItIs()
    {
        var ring = new WorkStealingRing(4);
        WorkItemEntry older = Numbered(0);
        WorkItemEntry newer = Numbered(1);
        ring.TryPush(older);
        ring.TryPush(newer);

        Assert.False(ring.TryPopIfNewest(older.Callback, older.State)); // not the newest
        Assert.False(ring.TryPopIfNewest(new System.Action<object?>(static _ => { }), newer.State)); // another callback
        Assert.False(ring.TryPopIfNewest(newer.Callback, 1)); // an equal number, another object

        Assert.Equal(2, ring.Count);
        Assert.True(ring.TrySteal(out WorkItemEntry oldest));
        Assert.Equal(0, NumberOf(oldest));
    }

    [Fact]
    public void AnEntryAThiefHasClaimed_IsNotTakenBack()
    {
        var ring = new WorkStealingRing(4);
        WorkItemEntry only = Numbered(7);
        ring.TryPush(only);
        Assert.True(ring.TrySteal(out WorkItemEntry stolen));
        Assert.Equal(7, NumberOf(stolen));

        // The slot still holds the entry (the owner clears taken slots at its next push), but it is the thief's.
        Assert.False(ring.TryPopIfNewest(only.Callback, only.State));
        Assert.True(ring.IsEmpty);
        Assert.Equal(0, ring.Count);
    }

    [Fact]
    public void AnEntryInsideALibraryWrapper_IsTakenBack()
    {
        var ring = new WorkStealingRing(4);
        WorkItemEntry entry = Numbered(4);
        ring.TryPush(new WorkItemEntry(new Spindle.Lanes.LongRunningLaneItem(entry), WorkItemEntry.WorkItemMarker, null));

        Assert.True(ring.TryPopIfNewest(entry.Callback, entry.State));
        Assert.True(ring.IsEmpty);
    }

    [Fact]
    public void AnEmptyRing_HasNothingToTakeBack()
    {
        var ring = new WorkStealingRing(2);
        WorkItemEntry entry = Numbered(3);
        Assert.False(ring.TryPopIfNewest(entry.Callback, entry.State));
        Assert.True(ring.IsEmpty);
    }
}
