using System.Diagnostics;
using Spindle.Scheduling;
using Xunit;

namespace Spindle.Tests.Timers;

/// <summary>
/// A worker's turns between a backlog of fired timers and ordinary items (TimerPacer): a run of callbacks lasts at least
/// 100 µs, and after an ordinary item of a millisecond or more at least a millisecond. The assertions are lower bounds
/// on when the pacer gives way, measured from a clock read taken before the run began, so a descheduled test thread can
/// only make them easier to meet, never fail them.
/// </summary>
public sealed class TimerPacerTests
{
    private static readonly long s_shortRun = Stopwatch.Frequency / 10_000;
    private static readonly long s_longRun = Stopwatch.Frequency / 1_000;

    [Fact]
    public void ARunOfCallbacks_AfterShortItems_GivesWayNoSoonerThan100Microseconds()
    {
        TimerPacer pacer = TimerPacer.Create();
        long completed = 0;

        long began = Stopwatch.GetTimestamp();
        long gaveWay = RunCallbacksUntilTheyGiveWay(ref pacer, ref completed);
        Assert.True(gaveWay - began >= s_shortRun, $"gave way after {Ticks(gaveWay - began)}");

        // A short ordinary item: the next run keeps the shortest length, and still does not give way before it.
        pacer.NoteTurn(timerCallback: false, completed);
        completed++;
        began = Stopwatch.GetTimestamp();
        gaveWay = RunCallbacksUntilTheyGiveWay(ref pacer, ref completed);
        Assert.True(gaveWay - began >= s_shortRun, $"gave way after {Ticks(gaveWay - began)}");
    }

    [Fact]
    public void ARunOfCallbacks_AfterALongOrdinaryItem_LastsAtLeastAMillisecond()
    {
        TimerPacer pacer = TimerPacer.Create();
        long completed = 0;
        RunCallbacksUntilTheyGiveWay(ref pacer, ref completed);

        // The ordinary item of the worker's turn computes for 2 ms.
        pacer.NoteTurn(timerCallback: false, completed);
        Spin(2 * s_longRun);
        completed++;

        long began = Stopwatch.GetTimestamp();
        long gaveWay = RunCallbacksUntilTheyGiveWay(ref pacer, ref completed);

        // 100 µs per run would leave a backlog of timers a tenth of a worker fed 1 ms items; the run is as long as the
        // item was, up to a millisecond.
        Assert.True(gaveWay - began >= s_longRun, $"gave way after {Ticks(gaveWay - began)}");
    }

    [Fact]
    public void ARunOfCallbacks_AfterTheWorkerRanOutOfWork_HasTheShortestLength()
    {
        TimerPacer pacer = TimerPacer.Create();
        long completed = 0;
        RunCallbacksUntilTheyGiveWay(ref pacer, ref completed);

        // The turn's ordinary item is short; then the fired timers are gone, the worker finds nothing and parks for
        // 2 ms until the next wave of firings.
        pacer.NoteTurn(timerCallback: false, completed);
        completed++;
        pacer.NoteIdleSpell();
        Spin(2 * s_longRun);

        // The wait is no item's length: the new run is the shortest, not the millisecond a 2 ms item earns.
        Assert.True(pacer.UrgentGoesFirst(completed));
        Assert.Equal(TimerPacer.UrgentStreakTicks, pacer.RunTicks);
    }

    [Fact]
    public void WhileCallbacksRun_UrgentWorkGoesFirst_AndAnOrdinaryItemGetsItsTurnAfterTheRun()
    {
        TimerPacer pacer = TimerPacer.Create();
        long completed = 0;
        Assert.True(pacer.UrgentGoesFirst(completed)); // a new run starts with the first look
        pacer.NoteTurn(timerCallback: true, completed);
        Assert.True(pacer.InCallback);
        completed++;

        RunCallbacksUntilTheyGiveWay(ref pacer, ref completed);
        pacer.NoteTurn(timerCallback: false, completed);
        completed++;

        // The ordinary item ran: the next look starts a new run, with urgent work first again.
        Assert.True(pacer.UrgentGoesFirst(completed));
    }

    /// <summary>Takes timer callbacks (each completing at once) until the pacer gives way; returns the clock after that answer.</summary>
    private static long RunCallbacksUntilTheyGiveWay(ref TimerPacer pacer, ref long completed)
    {
        long deadline = Stopwatch.GetTimestamp() + 60 * Stopwatch.Frequency;
        while (pacer.UrgentGoesFirst(completed))
        {
            pacer.NoteTurn(timerCallback: true, completed);
            completed++;
            Assert.True(Stopwatch.GetTimestamp() < deadline, "a run of callbacks never gave way to ordinary work");
        }
        return Stopwatch.GetTimestamp();
    }

    private static void Spin(long ticks)
    {
        long until = Stopwatch.GetTimestamp() + ticks;
        while (Stopwatch.GetTimestamp() < until)
        {
        }
    }

    private static string Ticks(long ticks) => $"{ticks * 1_000_000.0 / Stopwatch.Frequency:F0} µs";
}
