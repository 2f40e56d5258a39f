using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Numerics;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;
using Spindle.Threading;
using System.Runtime.CompilerServices;

namespace Spindle.Timers;

/// <summary>Firing timers: workers that look at the deadline between items, and the hand-over of what expired to the urgent queue.</summary>
internal sealed partial class TimerService
{
    /// <summary>
    /// Caller holds the timer lock, after a fault: puts back in the wheel, due at once, a timer that expired but whose
    /// firing was not handed over. A periodic timer's next period, already scheduled, gives way to it (the period then
    /// counts from the retry).
    /// </summary>
    private void RetryLocked(PoolTimer timer, long nowTimestamp)
    {
        _wheel.Remove(timer);
        // If no timer thread runs, the next schedule starts one and workers expire due timers meanwhile (AssistTimers).
        _ = ScheduleLocked(timer, nowTimestamp, nowTimestamp);
    }

    private void PublishNextExpiryLocked()
    {
        long next = _wheel.NextDeadline();
        Volatile.Write(ref _nextExpiry.Value, next == long.MaxValue ? long.MaxValue : TickStart(next));
    }

    /// <summary>
    /// Worker assist, called between items every few items (the worker paces its looks to about 100 µs of work): if the
    /// next timer deadline
    /// passed more than <see cref="AssistSlackTicks"/> ago, the timer thread has not been scheduled in time (every core
    /// is busy with the pool's own workers, and the kernel does not preempt them for it at once), so the worker expires
    /// the due timers itself. Returns the timestamp it read, or 0 when no timer is scheduled.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public long AssistTimers()
    {
        long next = Volatile.Read(ref _nextExpiry.Value);
        if (next == long.MaxValue)
        {
            return 0;
        }
        long now = Stopwatch.GetTimestamp();
        long overdue = now - next;
        if (overdue < AssistSlackTicks)
        {
            return now;
        }
        List<TimerNode> buffer = t_assistBuffer ??= [];
        // Slightly overdue: only if the lock is free (the timer thread may be expiring right now). Overdue by more than
        // a millisecond: wait for the lock, so that a descheduled holder gets this core.
        if (overdue < AssistBlockTicks)
        {
            if (!_timerLock.TryEnter())
            {
                return now;
            }
        }
        else
        {
            _timerLock.Enter();
        }
        try
        {
            int readied;
            try
            {
                readied = AdvanceLocked(Stopwatch.GetTimestamp(), buffer);
            }
            finally
            {
                _timerLock.Exit();
            }
            if (readied > 0)
            {
                _scheduler.WakeForUrgent(readied);
            }
        }
        catch (Exception exception)
        {
            // The pool's own code failed (see the faults paragraph above): an exception escaping here would end the
            // worker, and the process with it. The due timers are back in the wheel; the timer thread or a later look
            // tries again.
            FailureTrace.Write($"a worker of pool '{_poolName}' caught an exception while expiring timers and goes on", exception);
        }
        return now;
    }

    // Each assisting thread's buffer for the timers it expires (kept: a worker assists again and again).
    [ThreadStatic]
    private static List<TimerNode>? t_assistBuffer;

    /// <summary>How late the timer thread may be before workers expire timers themselves (a quarter millisecond).</summary>
    private static readonly long AssistSlackTicks = Stopwatch.Frequency / 4000;

    /// <summary>How late the deadline may be before an assisting worker waits for the timer lock (one millisecond).</summary>
    private static readonly long AssistBlockTicks = Stopwatch.Frequency / 1000;

    /// <summary>
    /// Caller holds the timer lock and has made room in <see cref="_firings"/> for every expired timer: hands their
    /// firings to the scheduler (ahead of all ordinary work), skipping those whose previous firing has not started.
    /// Returns how many it handed over (the caller wakes workers for them once it has let the lock go). If it throws,
    /// every firing it had not delivered has its timer unmarked and back in the wheel (see <see cref="AdvanceLocked"/>).
    /// </summary>
    private int HandOverLocked(List<TimerNode> expired, long nowTimestamp)
    {
        Debug.Assert(_timerLock.IsHeldByCurrentThread && _firings.Length >= expired.Count);
        int count = 0;
        for (int i = 0; i < expired.Count; i++)
        {
            var timer = (PoolTimer)expired[i];
            if (timer.TryMarkFirePendingLocked())
            {
                _firings[count++] = timer.CreateFireEntry();
            } // otherwise its previous firing has not started yet: this one merges into it
        }
        if (count == 0)
        {
            return 0;
        }
        Span<WorkItemEntry> firings = _firings.AsSpan(0, count);
        int delivered = 0;
        try
        {
            _onFiringsHandOver?.Invoke();
            if (_scheduler.TrySubmitUrgent(firings)) // all or nothing
            {
                delivered = count;
                return count;
            }
            // The pool has stopped: its timers outlive it, and their callbacks run on the built-in pool.
            for (; delivered < count; delivered++)
            {
                _runner.RunElsewhere(firings[delivered]);
            }
            return 0;
        }
        catch (Exception)
        {
            // What was not delivered was never visible to a worker, so nobody else clears its mark: take it back, or
            // the timer would never fire again (a marked timer is not queued twice), and let the next advance retry.
            for (int i = delivered; i < count; i++)
            {
                var timer = (PoolTimer)firings[i].State!;
                timer.ClearFirePendingLocked();
                RetryLocked(timer, nowTimestamp);
            }
            throw;
        }
        finally
        {
            firings.Clear(); // keep no timer alive through the buffer
        }
    }
}
