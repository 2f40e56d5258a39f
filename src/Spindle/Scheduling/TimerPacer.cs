using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using Spindle.Primitives;

namespace Spindle.Scheduling;

/// <summary>
/// A worker's pacing of timer work (owner only): how many items until its next look at the timer deadline, fitted to
/// the length of its items, and how long its current run of fired-timer callbacks has lasted.
/// </summary>
internal struct TimerPacer
{
    /// <summary>Items between looks at the timer deadline while the pool has no timer scheduled.</summary>
    public const int IdleInterval = 64;

    /// <summary>How much work (in Stopwatch ticks) a worker aims to do between looks at the timer deadline: 100 µs.</summary>
    private static readonly long s_checkTicks = Stopwatch.Frequency / 10_000;

    /// <summary>
    /// The shortest run of timer callbacks back to back before a worker gives one ordinary item its turn: 100 µs, the
    /// run's length after short ordinary items.
    /// </summary>
    public static readonly long UrgentStreakTicks = Stopwatch.Frequency / 10_000;

    /// <summary>The longest such run: 1 ms, the run's length after ordinary items of 1 ms or more.</summary>
    public static readonly long MaxUrgentStreakTicks = Stopwatch.Frequency / 1_000;

    /// <summary>Items left before the next look at the deadline (the dispatch loop counts it down).</summary>
    public int Countdown;

    /// <summary>
    /// The current item is a fired timer's callback. What it queues (the continuations of the delays it completes) goes
    /// to the global queue, in firing order, instead of the worker's LIFO ring: a burst of timers would otherwise leave
    /// its first continuations at the bottom of one ring behind the last ones, and behind whatever the ring's later items
    /// queue.
    /// </summary>
    public bool InCallback;

    private int _interval;
    private long _lastCheck;
    private bool _ranCallback;
    private long _callbackCompleted;
    private long _streakStart;
    private long _streakTicks;
    private long _yieldedCompleted;

    // The completed count of "no ordinary turn to time": completed counts are never negative, so no count follows it.
    private const long NoTurn = -2;

    [MethodImpl(RarePath.Compile)]
    public static TimerPacer Create() =>
        new() { Countdown = IdleInterval, _interval = 1, _callbackCompleted = -1, _streakTicks = UrgentStreakTicks, _yieldedCompleted = NoTurn };

    /// <summary>The run length the next run of callbacks would have now, in Stopwatch ticks (for tests).</summary>
    internal readonly long RunTicks => _streakTicks;

    /// <summary>
    /// Whether fired timers still go ahead of ordinary work, given the worker's completed count. They do, except once
    /// the worker has run timer callbacks back to back for its run's length: then one ordinary item goes first, and a
    /// new run begins after it. A run lasts as long as the ordinary item before it took, from
    /// <see cref="UrgentStreakTicks"/> (100 µs) to <see cref="MaxUrgentStreakTicks"/> (1 ms): while both wait, the
    /// worker's time is shared about evenly between a backlog of timers and items of up to 1 ms. So a burst of due
    /// timers, however long, delays the short work queued behind it by at most about 100 µs of callbacks plus one item
    /// at a time per worker, instead of the whole burst; and items of a millisecond or more, which would otherwise leave
    /// timers a tenth of the worker (100 µs per item), leave them half, or a millisecond per item when longer. One
    /// clock read per timer callback taken; ordinary items pay nothing (the caller looks here only while timers wait).
    /// </summary>
    public bool UrgentGoesFirst(long completed)
    {
        long now = Stopwatch.GetTimestamp();
        if (completed != _callbackCompleted)
        {
            // A new run. When the one item completed since the last run gave way is the ordinary item that had its turn
            // (NoteOrdinaryTurn), this run lasts as long as that item took, within the bounds: the item ran from the
            // answer that gave way, which set _streakStart. Otherwise it lasts the shortest length: the first run, one
            // after a spell without timers, or one after a run that gave way and found no ordinary item (the worker may
            // have searched or parked since, which says nothing of the items).
            _streakTicks = completed == _yieldedCompleted + 1
                ? Math.Clamp(now - _streakStart, UrgentStreakTicks, MaxUrgentStreakTicks)
                : UrgentStreakTicks;
            _streakStart = now;
            return true;
        }
        if (now - _streakStart < _streakTicks)
        {
            return true;
        }
        _streakStart = now; // the next run is timed from here, whether an ordinary item or the search comes next
        return false;
    }

    /// <summary>
    /// While timers may wait, the worker with <paramref name="completed"/> items completed is about to run a timer
    /// callback (<paramref name="timerCallback"/>, see <see cref="NoteCallback"/>) or, after <see cref="UrgentGoesFirst"/>
    /// said no, an ordinary item (see <see cref="NoteOrdinaryTurn"/>).
    /// </summary>
    public void NoteTurn(bool timerCallback, long completed)
    {
        if (timerCallback)
        {
            NoteCallback(completed);
        }
        else
        {
            NoteOrdinaryTurn(completed);
        }
    }

    /// <summary>
    /// <see cref="UrgentGoesFirst"/> said no and the worker took an ordinary item, with <paramref name="completed"/> items
    /// completed: the item runs from the time that answer read (<see cref="_streakStart"/>), so the next run of callbacks
    /// can be as long as it.
    /// </summary>
    private void NoteOrdinaryTurn(long completed) => _yieldedCompleted = completed;

    /// <summary>
    /// The worker ran out of work and goes idle (it parks). The ordinary item of its last turn, if any, has ended: the
    /// time until the next run of callbacks begins is idle time, not that item's length, so the next run starts at the
    /// shortest length. Measured from the turn instead, a worker that ran its turn's item, found the fired timers gone and
    /// parked until the next wave gave that wave a 1 ms run, and ordinary items queued meanwhile waited up to that long.
    /// </summary>
    public void NoteIdleSpell() => _yieldedCompleted = NoTurn;

    /// <summary>
    /// The worker, with <paramref name="completed"/> items completed, is about to run a timer callback: the callback
    /// counts in the current run, and the deadline is looked at again right after it.
    /// </summary>
    public void NoteCallback(long completed)
    {
        _callbackCompleted = completed + 1;
        _ranCallback = true;
        InCallback = true;
        Countdown = 1;
    }

    /// <summary>
    /// A look at the deadline returned <paramref name="now"/> (0: the pool has no timer): sets how many items to run
    /// before the next look, about <see cref="s_checkTicks"/> worth judged from the time the last interval took, so that
    /// short items pay a clock read per hundreds of items and 1 ms items a look after each.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public void AfterCheck(long now)
    {
        if (now == 0)
        {
            _lastCheck = 0;
            Countdown = IdleInterval; // no timer: no clock read
            return;
        }
        if (_ranCallback)
        {
            // Timer callbacks are short and say nothing about the items around them: judging the interval from them
            // would stretch it across the next long items (a burst of callbacks followed by 1 ms items once left the
            // next look hundreds of milliseconds away). Look after every item until ordinary work is timed again.
            _ranCallback = false;
            _interval = 1;
        }
        else if (_lastCheck != 0)
        {
            // Shrinks at once, grows at most fourfold per look, so items that turn long are noticed soon.
            long elapsed = now - _lastCheck;
            long interval = elapsed <= 0 ? 4L * _interval : _interval * s_checkTicks / elapsed;
            _interval = (int)Math.Clamp(interval, 1, Math.Min(4L * _interval, 1024));
        }
        _lastCheck = now;
        Countdown = _interval;
    }
}
