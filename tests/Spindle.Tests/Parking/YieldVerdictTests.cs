using System.Diagnostics;
using Spindle.Parking;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// <see cref="YieldVerdict"/>: slow yields close together stop yields for a hold that doubles while stops recur; quick
/// yields, or slow ones at the rate a yield that does not hand the core away shows, never stop them; stale evidence is
/// dropped. Driven with explicit timestamps, so nothing here depends on the machine's scheduler.
/// </summary>
public sealed class YieldVerdictTests
{
    private static readonly long Slow = YieldVerdict.SlowYieldTicks;
    private static readonly long Quick = YieldVerdict.SlowYieldTicks / 500; // a microsecond
    private const long Start = 1_000_000_000;

    [Fact]
    public void QuickYields_NeverStopYields()
    {
        var verdict = new YieldVerdict();
        var window = default(YieldVerdict.Window);
        long now = Start;
        for (int i = 0; i < 100_000; i++)
        {
            Yield(verdict, ref window, ref now, Quick);
        }
        Assert.False(verdict.YieldsStopped(now));
        Assert.Equal(0, verdict.StoppedUntil);
    }

    [Fact]
    public void FourSlowYieldsInARow_StopYieldsForTheFirstHold()
    {
        var verdict = new YieldVerdict();
        var window = default(YieldVerdict.Window);
        long now = Start;
        for (int i = 0; i < 3; i++)
        {
            Yield(verdict, ref window, ref now, Slow);
            Assert.False(verdict.YieldsStopped(now)); // three are not yet enough evidence
        }
        Yield(verdict, ref window, ref now, Slow);
        Assert.True(verdict.YieldsStopped(now));
        Assert.Equal(now + YieldVerdict.FirstHoldTicks, verdict.StoppedUntil);
        Assert.True(verdict.YieldsStopped(now + YieldVerdict.FirstHoldTicks - 1));
        Assert.False(verdict.YieldsStopped(now + YieldVerdict.FirstHoldTicks));
    }

    [Fact]
    public void YieldsThatHandTheCoreAway_StopYieldsWithinAFewDozen()
    {
        // One slow yield in eleven: the rate measured beside busy processes in the yielder's own scheduling group.
        var verdict = new YieldVerdict();
        var window = default(YieldVerdict.Window);
        long now = Start;
        int yields = 0;
        while (!verdict.YieldsStopped(now))
        {
            long took = yields % 11 == 5 ? Slow : Quick;
            Yield(verdict, ref window, ref now, took);
            yields++;
            Assert.True(yields <= 60, $"Yields were not stopped after {yields} yields, one in eleven slow.");
        }
    }

    [Fact]
    public void SlowYieldsAtTheRateOfYieldsThatDoNotHandTheCoreAway_NeverStopYields()
    {
        // One slow yield in three hundred, evenly spread: the rate beside busy processes in other groups.
        var verdict = new YieldVerdict();
        var window = default(YieldVerdict.Window);
        long now = Start;
        for (int i = 0; i < 1_000_000; i++)
        {
            long took = i % 300 == 150 ? Slow : Quick;
            Yield(verdict, ref window, ref now, took);
        }
        Assert.Equal(0, verdict.StoppedUntil);
    }

    [Fact]
    public void EachRecurringStop_DoublesTheHold_UpToTheLongest_AndQuickYieldsSetItBack()
    {
        var verdict = new YieldVerdict();
        var window = default(YieldVerdict.Window);
        long now = Start;
        long expected = YieldVerdict.FirstHoldTicks;
        for (int stop = 0; stop < 10; stop++)
        {
            now = StopYields(verdict, ref window, now);
            Assert.Equal(now + expected, verdict.StoppedUntil);
            now = verdict.StoppedUntil; // the hold passes; the next yields probe again
            expected = System.Math.Min(expected * 2, YieldVerdict.MaxHoldTicks);
        }
        Assert.Equal(YieldVerdict.MaxHoldTicks, expected);

        // Quick yields enough to clear the evidence: the next stop holds for the first hold again.
        for (int i = 0; i < 100; i++)
        {
            Yield(verdict, ref window, ref now, Quick);
        }
        now = StopYields(verdict, ref window, now);
        Assert.Equal(now + YieldVerdict.FirstHoldTicks, verdict.StoppedUntil);
    }

    [Fact]
    public void StaleEvidence_IsDropped()
    {
        var verdict = new YieldVerdict();
        var window = default(YieldVerdict.Window);
        long now = Start;
        for (int i = 0; i < 3; i++)
        {
            Yield(verdict, ref window, ref now, Slow);
        }
        now += YieldVerdict.StaleWindowTicks + 1;
        verdict.Record(ref window, Slow, now); // would be the fourth in a row, but the first three are stale
        Assert.False(verdict.YieldsStopped(now + Slow));
    }

    [Fact]
    public void TwoSearchersStoppingAtOnce_ExtendTheHoldOnce()
    {
        var verdict = new YieldVerdict();
        var first = default(YieldVerdict.Window);
        var second = default(YieldVerdict.Window);
        long now = Start;
        for (int i = 0; i < 3; i++)
        {
            verdict.Record(ref first, Slow, now);
            Yield(verdict, ref second, ref now, Slow);
        }
        verdict.Record(ref first, Slow, now);
        long stoppedUntil = verdict.StoppedUntil;
        verdict.Record(ref second, Slow, now); // stops too, while yields are already stopped
        Assert.Equal(stoppedUntil, verdict.StoppedUntil);

        // The hold was doubled once, not twice: the next stop after this hold holds twice the first.
        now = StopYields(verdict, ref first, stoppedUntil);
        Assert.Equal(now + (2 * YieldVerdict.FirstHoldTicks), verdict.StoppedUntil);
    }

    /// <summary>Records one yield of <paramref name="took"/> that began at <paramref name="now"/>, and moves the clock past it.</summary>
    [Theory]
    [InlineData(false, false)]
    [InlineData(true, true)]
    [InlineData(null, true)]
    public void AStopIsVetoed_OnlyWhenTheGroupIsKnownToHoldNothingElseRunnable(bool? othersRunnable, bool stops)
    {
        int asked = 0;
        var verdict = new YieldVerdict(() =>
        {
            asked++;
            return othersRunnable;
        });
        var window = default(YieldVerdict.Window);
        long now = Start;
        for (int i = 0; i < 3; i++)
        {
            Yield(verdict, ref window, ref now, Slow);
        }
        Assert.Equal(0, asked); // asked only when a stop is due
        Yield(verdict, ref window, ref now, Slow);
        Assert.Equal(1, asked);
        Assert.Equal(stops, verdict.YieldsStopped(now));
        Assert.Equal(stops ? 0 : 1, verdict.VetoCount);

        // The test starts afresh after a veto: three more slow yields are not evidence enough again.
        for (int i = 0; i < 3 && !stops; i++)
        {
            Yield(verdict, ref window, ref now, Slow);
            Assert.False(verdict.YieldsStopped(now));
        }
        Assert.Equal(1, asked);
    }

    private static void Yield(YieldVerdict verdict, ref YieldVerdict.Window window, ref long now, long took)
    {
        verdict.Record(ref window, took, now);
        now += took;
    }

    /// <summary>Records slow yields from <paramref name="now"/> until yields stop; returns the time they stopped.</summary>
    private static long StopYields(YieldVerdict verdict, ref YieldVerdict.Window window, long now)
    {
        while (!verdict.YieldsStopped(now))
        {
            Yield(verdict, ref window, ref now, Slow);
        }
        Debug.Assert(verdict.StoppedUntil > now);
        return now;
    }
}
