using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Telemetry;
using Spindle.Queues;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle.Scheduling;

/// <summary>A worker's share of timer work: fired timers ahead of ordinary items (within a streak), and looks at the timer deadline.</summary>
internal sealed partial class Worker
{
    /// <summary>How long a worker runs timer callbacks back to back before it gives one ordinary item its turn: 100 µs.</summary>
    internal static readonly long UrgentStreakTicks = Stopwatch.Frequency / 10_000;

    /// <summary>
    /// Whether fired timers still go ahead of this worker's ordinary work. They do, except once the worker has run
    /// timer callbacks back to back for <see cref="UrgentStreakTicks"/>: then one ordinary item (local, a lane's or the
    /// global queue's) goes first, and a new run begins after it. So a burst of due timers, however long, delays the
    /// work queued behind it by at most about 100 µs of callbacks plus one item at a time per worker, instead of the
    /// whole burst, and the burst itself is slowed by one ordinary item per 100 µs. One clock read per timer callback
    /// taken; ordinary items pay nothing (the caller looks here only while timers wait).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool UrgentGoesFirst()
    {
        long now = Stopwatch.GetTimestamp();
        if (_completed.Value != _timerCallbackCompleted)
        {
            _urgentStreakStart = now;
            return true;
        }
        if (now - _urgentStreakStart < UrgentStreakTicks)
        {
            return true;
        }
        _urgentStreakStart = now; // the next run is timed from here, whether an ordinary item or the search comes next
        return false;
    }

    /// <summary>
    /// Owner only, while fired timers may be waiting: takes the next timer callback, or, when this worker's run of them
    /// has lasted its turn (<see cref="UrgentGoesFirst"/>), an ordinary item first if there is one. False when neither
    /// was there (the caller goes on to its ordinary queues, which may have filled since).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TryTakeWhileTimersWait(out WorkItemEntry item)
    {
        if (!UrgentGoesFirst() && (_lanes.AnyReady ? _lanes.TryTakeByPriority(this, out item) : TryTakeDefault(out item)))
        {
            return true;
        }
        if (_urgent.TryTake(out item))
        {
            NoteTimerCallback();
            return true;
        }
        return false;
    }

    /// <summary>The worker is about to run a timer callback: look at the deadline again right after it.</summary>
    public void NoteTimerCallback()
    {
        _timerCallbackCompleted = _completed.Value + 1;
        _ranTimerCallback = true;
        InTimerCallback = true;
        _timerCountdown = 1;
    }

    /// <summary>Items between looks at the timer deadline while the pool has no timer scheduled.</summary>
    private const int TimerCheckIdleInterval = 64;

    /// <summary>How much work (in Stopwatch ticks) a worker aims to do between looks at the timer deadline: 100 µs.</summary>
    private static readonly long s_timerCheckTicks = Stopwatch.Frequency / 10_000;

    /// <summary>
    /// Looks at the timer deadline (<see cref="TimerService.AssistTimers"/>) and sets how many items to run before the
    /// next look: about <see cref="s_timerCheckTicks"/> worth, judged from the time the last interval took, so that short
    /// items pay a clock read per hundreds of items and 1 ms items a look after each.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void CheckTimers()
    {
        long now = _timers.AssistTimers(ref _expiredTimers);
        if (now == 0)
        {
            _lastTimerCheck = 0;
            _timerCountdown = TimerCheckIdleInterval; // no timer: no clock read
            return;
        }
        if (_ranTimerCallback)
        {
            // Timer callbacks are short and say nothing about the items around them: judging the interval from them
            // would stretch it across the next long items (a burst of callbacks followed by 1 ms items once left the
            // next look hundreds of milliseconds away). Look after every item until ordinary work is timed again.
            _ranTimerCallback = false;
            _timerInterval = 1;
        }
        else if (_lastTimerCheck != 0)
        {
            // Shrinks at once, grows at most fourfold per look, so items that turn long are noticed soon.
            long elapsed = now - _lastTimerCheck;
            long interval = elapsed <= 0 ? 4L * _timerInterval : _timerInterval * s_timerCheckTicks / elapsed;
            _timerInterval = (int)Math.Clamp(interval, 1, Math.Min(4L * _timerInterval, 1024));
        }
        _lastTimerCheck = now;
        _timerCountdown = _timerInterval;
    }
}
