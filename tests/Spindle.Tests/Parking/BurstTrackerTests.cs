using Spindle.Parking;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// <see cref="BurstTracker"/>: a search is extended only after a short park followed by a burst's worth of items; a
/// trickle of single items, one caught by searching, or a long park never extends it. Searches in vain stop the spin
/// (one probe in 32 spins) until work comes back within a spin's reach.
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

    [Fact]
    public void ANewTracker_Spins()
    {
        Assert.True(new BurstTracker().SpinPays);
    }

    [Fact]
    public void SearchesThatSpunInVain_StopTheSpin_AfterTheirCount()
    {
        // A trickle: every search spins, finds nothing and parks, and each park lasts far longer than a spin.
        var tracker = new BurstTracker();
        for (int i = 1; i < BurstTracker.FutileSearchesBeforeParkingAtOnce; i++)
        {
            tracker.NoteFutileSearch();
            tracker.NoteWoken(Long, started: i);
            tracker.NoteFound(attempt: 0); // the item that woke it, found at the first look
            Assert.True(tracker.SpinPays);
        }
        tracker.NoteFutileSearch();
        Assert.False(tracker.SpinPays);
    }

    [Fact]
    public void OnceStopped_OneSearchInAFewDozenProbes_AsLongAsTheProbesFindNothing()
    {
        var tracker = StoppedSpinning();
        int rounds = BurstTracker.SkippedSearchesBetweenProbes + 1;
        for (int round = 0; round < 10; round++)
        {
            for (int skipped = 0; skipped < BurstTracker.SkippedSearchesBetweenProbes; skipped++)
            {
                Assert.False(tracker.SpinPays, $"round {round}, search {skipped}");
                tracker.NoteWoken(Long, started: (round * rounds) + skipped);
                tracker.NoteFound(attempt: 0);
                tracker.NoteFutileSearch();
            }
            Assert.True(tracker.SpinPays, $"round {round}: the probe");
            tracker.NoteFutileSearch(); // the probe found nothing either
        }
        Assert.False(tracker.SpinPays);
    }

    [Fact]
    public void AProbeThatFindsItsItemWhileSpinning_TurnsTheSpinBackOn()
    {
        var tracker = StoppedSpinning();
        for (int skipped = 0; skipped < BurstTracker.SkippedSearchesBetweenProbes; skipped++)
        {
            tracker.NoteFutileSearch();
        }
        Assert.True(tracker.SpinPays);
        tracker.NoteFound(attempt: 2);
        for (int i = 1; i < BurstTracker.FutileSearchesBeforeParkingAtOnce; i++)
        {
            tracker.NoteFutileSearch();
            Assert.True(tracker.SpinPays);
        }
    }

    [Fact]
    public void WorkFoundOnTheWayToAPark_TurnsTheSpinBackOn()
    {
        var tracker = StoppedSpinning();
        tracker.NoteFoundWhileParking();
        Assert.True(tracker.SpinPays);
    }

    [Fact]
    public void AnItemFoundWhileSpinning_TurnsTheSpinBackOn()
    {
        var tracker = StoppedSpinning();
        tracker.NoteFound(attempt: 1);
        Assert.True(tracker.SpinPays);
    }

    [Fact]
    public void AParkThatEndsWithinASpinsReach_TurnsTheSpinBackOn()
    {
        var tracker = StoppedSpinning();
        tracker.NoteWoken(BurstTracker.SpinPaysParkTicks, started: 10);
        Assert.False(tracker.SpinPays); // as long as the bound: not within reach
        tracker.NoteWoken(BurstTracker.SpinPaysParkTicks - 1, started: 11);
        Assert.True(tracker.SpinPays);
    }

    [Fact]
    public void AFoundItem_ResetsTheCount_OfSearchesInVain()
    {
        var tracker = new BurstTracker();
        for (int i = 1; i < BurstTracker.FutileSearchesBeforeParkingAtOnce; i++)
        {
            tracker.NoteFutileSearch();
        }
        tracker.NoteFound(attempt: 3);
        for (int i = 1; i < BurstTracker.FutileSearchesBeforeParkingAtOnce; i++)
        {
            tracker.NoteFutileSearch();
        }
        Assert.True(tracker.SpinPays);
    }

    private static BurstTracker StoppedSpinning()
    {
        var tracker = new BurstTracker();
        for (int i = 0; i < BurstTracker.FutileSearchesBeforeParkingAtOnce; i++)
        {
            tracker.NoteFutileSearch();
        }
        Assert.False(tracker.SpinPays);
        return tracker;
    }
}
