using System;
using System.Diagnostics;
using System.Threading;
using Spindle.Primitives;

namespace Spindle.Parking;

/// <summary>
/// Whether a searching worker's yield hands its core to another process's thread for a whole scheduler slice, judged
/// from how long the searchers' recent yields took while other processes kept the cores busy. Searchers yield as usual
/// while the verdict allows it and spin briefly in place of each yield while it does not.
/// </summary>
/// <remarks>
/// <para>Why it has to be measured. Linux's fair scheduler shares a core between groups first (a session's autogroup, a
/// container's cgroup) and between the threads of a group second; a yield gives way within the yielder's own group.
/// Busy processes in other groups (another service, another container) seldom get the core from a yield: it returns
/// in a microsecond or two, or after a thread of the same group that was waiting for the core has run, and spinning in
/// its place only spends the group's share of the core, which the thread that has work to do then lacks. Seldom, not
/// never: the reschedule a yield asks for also lets the scheduler switch groups before the group's turn would have
/// ended. Traced on 2 cores beside two busy loops in sessions of their own (a channel hand-off between two workers),
/// 839 of 111,322 yields took 500 µs or more, and in 446 of those a loop ran next on the yielder's core with no
/// thread of this process in between. Busy processes in the same group (a build in the same terminal session, a
/// neighbour in the same container) get the core from a yield as a matter of course: the yielder waits out their
/// slice (milliseconds) while it still counts as searching and every enqueue relies on it. Which case holds is not
/// something a process can read cheaply, but the yields themselves show it, by their rate: measured on 2 cores beside
/// two busy loops, timing `sched_yield`, with the loops in sessions of their own 15 of 20,000 yields took a
/// millisecond or more; in the yielder's session, 180 of 2,000. The rates depend on the workload, though, and the two
/// cases' ranges overlap: beside loops in other sessions, 0.3-0.8 % of the searchers' yields took 500 µs or more in a
/// channel hand-off (which yields often) and 1-20 % for single items at intervals or a drain's tail (few yields between
/// slow ones); beside loops in the same session, 3-28 % in the hand-off and 39 % for single items. So this test also
/// stops yields beside other groups now and then (one to four times a run of the hand-off), and a workload whose
/// hand-offs need the yields (two threads of the process on one core) then runs slower until the hold ends.</para>
/// <para>The rule, a sequential test between the two cases: each searcher keeps the evidence of its own recent yields
/// (owner only, <see cref="Window"/>), the log of how much likelier they are if a yield hands the core away than if it
/// does not. A slow yield (<see cref="SlowYieldTicks"/> or more) adds <see cref="SlowEvidence"/>, a quick one takes
/// <see cref="QuickEvidence"/> away; the rates behind them are the first ones measured, with a margin (9 % and 0.3 % of
/// yields slow: the pool's own searchers beside busy loops in other sessions saw 0.13-0.33 % then; the ranges above
/// are wider). Evidence that reaches <see cref="StopAt"/> (a false stop about once in 100,000 tests if slow yields
/// came independently at 0.3 %: four slow yields close together; they come in clusters) stops yields for every
/// searcher of the process for a hold, which starts at <see cref="FirstHoldTicks"/> and doubles (up to
/// <see cref="MaxHoldTicks"/>) each time yields are stopped again; evidence that falls to <see cref="ClearAt"/> (some
/// fifty quick yields) starts a new test and sets the hold back to the first. So beside processes in the same group a
/// hold costs a few slow yields, ever more rarely, and beside processes in other groups yields stay on. Evidence older
/// than <see cref="StaleWindowTicks"/> is dropped: it was about other processes.</para>
/// <para>The veto. Before a stop the verdict asks whether the process's scheduling group has threads waiting for a
/// core beyond the process's own hand-offs (<see cref="SchedulingGroup"/>: another process of the group runnable or
/// busy, or this process with many more runnable threads than cores; answered where the group is the session, on Linux
/// in the root CPU cgroup with autogroups on). A group known to hold neither means the slow yields went to other groups
/// or to a thread of this process waiting for this very core, where stopping yields only costs (a hand-off between two
/// of the process's threads on one core needs them), so the stop is dropped and the test starts afresh; an unknown
/// group (a container's cgroup, another system) leaves the stop to the evidence. The check reads /proc (about 7 µs a
/// process or thread), at most once a second, and only when a stop is due.</para>
/// <para>Protocol: <see cref="YieldsStopped"/> is a volatile read on the searcher's path. The rare writes (a stop, the
/// reset of the hold) take a lock, so that searchers stopping at once extend the hold once.</para>
/// </remarks>
internal sealed class YieldVerdict
{
    /// <summary>A yield that took this long (500 µs) or longer gave the core to some other thread for a slice.</summary>
    public static readonly long SlowYieldTicks = Stopwatch.Frequency / 2_000;

    /// <summary>The evidence a slow yield adds: ln(0.09 / 0.003).</summary>
    public static readonly double SlowEvidence = Math.Log(0.09 / 0.003);

    /// <summary>The evidence a quick yield takes away: ln(0.91 / 0.997), negative.</summary>
    public static readonly double QuickEvidence = Math.Log(0.91 / 0.997);

    /// <summary>Evidence at which yields stop: ln(100,000).</summary>
    public static readonly double StopAt = Math.Log(100_000);

    /// <summary>Evidence at which yields are judged fine and a new test starts: ln(0.01).</summary>
    public static readonly double ClearAt = Math.Log(0.01);

    /// <summary>Evidence gathered since longer ago than this (1 s) is stale: the test starts afresh.</summary>
    public static readonly long StaleWindowTicks = Stopwatch.Frequency;

    /// <summary>The first hold (1 s).</summary>
    public static readonly long FirstHoldTicks = Stopwatch.Frequency;

    /// <summary>The longest hold (32 s).</summary>
    public static readonly long MaxHoldTicks = Stopwatch.Frequency * 32;

    /// <summary>
    /// The verdict every pool of the process follows: it is about the machine and the process's group, and it asks
    /// <see cref="SchedulingGroup.Process"/> before each stop.
    /// </summary>
    public static readonly YieldVerdict Process = new(SchedulingGroup.Process.CoresWantedInGroup);

    private readonly object _gate = new();

    // Asked before a stop: whether the process's scheduling group has threads waiting for a core beyond the process's
    // own hand-offs (null: unknown).
    private readonly Func<bool?>? _coresWantedInGroup;

    private int _vetoes;

    /// <summary>A verdict that stops yields on its evidence alone.</summary>
    public YieldVerdict()
    {
    }

    /// <summary>
    /// A verdict that asks <paramref name="coresWantedInGroup"/> before each stop: a stop is vetoed when it answers
    /// false (the process's scheduling group is known, and nothing else in it wants a core).
    /// </summary>
    public YieldVerdict(Func<bool?> coresWantedInGroup) => _coresWantedInGroup = coresWantedInGroup;

    /// <summary>Stops the group check vetoed (tests and diagnostics).</summary>
    public int VetoCount => Volatile.Read(ref _vetoes);

    // Stopwatch ticks until which yields are stopped (0: never stopped). Volatile reads; written under _gate.
    private long _stoppedUntil;

    // The next hold's length, under _gate.
    private long _nextHoldTicks = FirstHoldTicks;

    /// <summary>A searcher's evidence from its timed yields: owned by one worker's thread, passed by reference.</summary>
    public struct Window
    {
        internal double Evidence;
        internal long StartedAt;
    }

    /// <summary>Whether searchers should spin in place of yields at <paramref name="now"/>.</summary>
    public bool YieldsStopped(long now) => now < Volatile.Read(ref _stoppedUntil);

    /// <summary>The Stopwatch time until which yields are stopped (0 when they never were); for tests and diagnostics.</summary>
    public long StoppedUntil => Volatile.Read(ref _stoppedUntil);

    /// <summary>Records one yield that began at <paramref name="startedAt"/> and took <paramref name="elapsedTicks"/>.</summary>
    public void Record(ref Window window, long elapsedTicks, long startedAt)
    {
        Debug.Assert(elapsedTicks >= 0);
        if (window.StartedAt == 0 || startedAt - window.StartedAt > StaleWindowTicks)
        {
            window = new Window { StartedAt = startedAt };
        }
        window.Evidence += elapsedTicks >= SlowYieldTicks ? SlowEvidence : QuickEvidence;
        if (window.Evidence >= StopAt)
        {
            window = default;
            if (_coresWantedInGroup?.Invoke() == false)
            {
                // The slow yields went to threads of other groups (or of this process): yields still pay here.
                Interlocked.Increment(ref _vetoes);
                return;
            }
            Stop(startedAt + elapsedTicks);
        }
        else if (window.Evidence <= ClearAt)
        {
            if (Volatile.Read(ref _nextHoldTicks) != FirstHoldTicks)
            {
                lock (_gate)
                {
                    _nextHoldTicks = FirstHoldTicks; // the yields were quick: the next hold starts small again
                }
            }
            window = default;
        }
    }

    private void Stop(long now)
    {
        lock (_gate)
        {
            if (now < _stoppedUntil)
            {
                return; // another searcher stopped yields meanwhile
            }
            long hold = _nextHoldTicks;
            Volatile.Write(ref _stoppedUntil, now + hold);
            _nextHoldTicks = Math.Min(hold * 2, MaxHoldTicks);
            Debug.Assert(_nextHoldTicks >= FirstHoldTicks && _nextHoldTicks <= MaxHoldTicks);
        }
    }
}
