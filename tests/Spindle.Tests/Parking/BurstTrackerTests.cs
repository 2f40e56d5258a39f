using Spindle.Parking;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// <see cref="BurstTracker"/>: a search is extended only after a short park followed by a burst's worth of items; a
/// trickle of single items, one caught by searching, or a long park never extends it.
/// </summary>
public sealed class BurstTrackerTests
{
    private static readonly long Short = BurstTracker.ShortParkTicks - 1;
    private static readonly long Long = BurstTracker.ShortParkTicks;

    [Fact]
    public void ANewTracker_DoesNotExtend_HoweverManyItemsRan()
    {
        var tracker = new BurstTracker();
        Assert.False(tracker.InBackToBackBursts(0));
        Assert.False(tracker.InBackToBackBursts(1_000_000));
    }

    [Fact]
    public void AShortPark_FollowedByABurstsWorthOfItems_Extends()
    {
        var tracker = new BurstTracker();
        tracker.NoteWoken(Short, started: 500);
        Assert.False(tracker.InBackToBackBursts(500 + BurstTracker.BurstItems - 1));
        Assert.True(tracker.InBackToBackBursts(500 + BurstTracker.BurstItems));
        Assert.True(tracker.InBackToBackBursts(500 + 10_000)); // stays on while the worker keeps finding work
    }

    [Fact]
    public void ShortParks_EachFollowedByOneItem_NeverExtend()
    {
        // A trickle: the worker wakes soon after each park, but runs one item per wake.
        var tracker = new BurstTracker();
        long started = 0;
        for (int i = 0; i < 100; i++)
        {
            tracker.NoteWoken(0, started);
            started++;
            Assert.False(tracker.InBackToBackBursts(started));
        }
    }

    [Fact]
    public void ALongPark_TurnsTheExtensionOff_UntilTheNextShortOne()
    {
        var tracker = new BurstTracker();
        tracker.NoteWoken(Short, started: 0);
        Assert.True(tracker.InBackToBackBursts(BurstTracker.BurstItems));

        tracker.NoteWoken(Long, started: BurstTracker.BurstItems);
        Assert.False(tracker.InBackToBackBursts(BurstTracker.BurstItems));
        Assert.False(tracker.InBackToBackBursts(100 * BurstTracker.BurstItems));

        tracker.NoteWoken(Short, started: 100 * BurstTracker.BurstItems);
        Assert.False(tracker.InBackToBackBursts(100 * BurstTracker.BurstItems)); // counted from this wake
        Assert.True(tracker.InBackToBackBursts(101 * BurstTracker.BurstItems));
    }

    [Fact]
    public void ItemsASearchHadToYieldFor_DoNotCountTowardsABurst()
    {
        // A trickle caught by searching: the worker woke soon and keeps starting items, but each was found only after
        // its search had begun to yield.
        var tracker = new BurstTracker();
        tracker.NoteWoken(Short, started: 0);
        for (long started = 1; started < 10 * BurstTracker.BurstItems; started++)
        {
            tracker.NoteFoundAfterYielding(BurstTracker.TrickleWaitTicks, started);
            Assert.False(tracker.InBackToBackBursts(started + 1));
        }

        // From the last late find on, a burst's worth of items found at once qualifies again.
        long last = 10 * BurstTracker.BurstItems;
        tracker.NoteFoundAfterYielding(BurstTracker.TrickleWaitTicks, last);
        Assert.False(tracker.InBackToBackBursts(last + BurstTracker.BurstItems - 1));
        Assert.True(tracker.InBackToBackBursts(last + BurstTracker.BurstItems));
    }

}
