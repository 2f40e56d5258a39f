using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle;

// Timers (issue 4).
//
// One hierarchical timing wheel per pool (Timers/TimingWheel.cs), guarded by _timerLock, and one timer thread, started
// by the first timer, that sleeps until the wheel's next deadline. When a deadline passes it expires the due entries
// under the lock and, outside it, queues their callbacks on the pool's urgent queue, which workers look at before any
// other queue (Worker.TryTakeWork, TryStealOrTakeGlobal): a timer callback waits for at most the items that are running
// when it fires, never behind a backlog.
//
// Who writes what:
// - The wheel, every PoolTimer's wheel fields (When, links, due timestamp, period) and _timerThreadDeadline are
//   written under _timerLock only (by schedulers, Change, Dispose and the timer thread).
// - _timerThreadDeadline is the tick the timer thread is about to sleep until (long.MaxValue: no deadline). A scheduler
//   that inserts an entry due earlier signals the thread's blocker and lowers the field, so one wake serves a burst of
//   earlier inserts. The thread publishes the field under the lock before it sleeps, and the blocker keeps a signal sent
//   between that publication and the sleep, so no earlier insert is missed.
// - PoolTimer._firePending (atomics): set by the timer thread when it queues a firing, cleared by the worker just
//   before the callback runs. A timer whose previous firing has not started is not queued again (firings coalesce, so
//   a saturated pool never accumulates a backlog of one periodic timer).
public sealed partial class WorkerPool
{
    private readonly Lock _timerLock = new();
    private readonly TimingWheel _wheel = new();
    private readonly GlobalQueue _urgentQueue = new();
    private readonly long _timerEpoch = Stopwatch.GetTimestamp();
    private ThreadBlocker? _timerBlocker;
    private Thread? _timerThread;
    private long _timerThreadDeadline = long.MaxValue;
    private bool _timersStopped;
    private WorkerPoolTimeProvider? _timeProvider;

    // Incremented before an urgent enqueue and decremented after a successful take, so it is never below the queue's
    // length: a worker that reads zero may skip the urgent queue. Written only when timers fire; read before every item.
    private PaddedInt32 _urgentPending;

    internal Lock TimerLock => _timerLock;

    /// <summary>Stopwatch ticks per wheel tick (one millisecond).</summary>
    internal static readonly long s_ticksPerWheelTick = Stopwatch.Frequency / 1000;

    /// <summary>
    /// A <see cref="System.TimeProvider"/> whose timers are this pool's: <see cref="System.TimeProvider.CreateTimer"/>
    /// schedules on the pool's timing wheel and runs callbacks on the pool's workers. Time itself (UTC now, time zone,
    /// timestamps) is the system's. Pass it to code written against <see cref="System.TimeProvider"/>
    /// (<c>Task.Delay(TimeSpan, TimeProvider)</c>, <c>new CancellationTokenSource(TimeSpan, TimeProvider)</c>, …).
    /// </summary>
    public TimeProvider TimeProvider => _timeProvider ?? Interlocked.CompareExchange(ref _timeProvider, new WorkerPoolTimeProvider(this), null) ?? _timeProvider;

    /// <summary>Timers scheduled on the wheel right now (a snapshot, for diagnostics).</summary>
    public int ScheduledTimerCount
    {
        get
        {
            lock (_timerLock)
            {
                return _wheel.Count;
            }
        }
    }

    /// <summary>Whether the pool's timer thread exists (it starts with the first timer; tests and diagnostics).</summary>
    internal bool HasTimerThread => Volatile.Read(ref _timerThread) is not null;

    /// <summary>
    /// Creates a timer on this pool: <paramref name="callback"/> runs on a worker of the pool with
    /// <paramref name="state"/> after <paramref name="dueTime"/>, then every <paramref name="period"/>. The timer holds
    /// no thread: it is an entry of the pool's timing wheel (about 1 ms resolution, never early), and its callbacks are
    /// dispatched ahead of ordinary work, so they stay punctual while the pool is saturated.
    /// </summary>
    /// <param name="callback">The callback. It flows the caller's <see cref="ExecutionContext"/> when the pool does
    /// (<see cref="WorkerPoolOptions.FlowExecutionContext"/>). Exceptions follow the pool's <see cref="ExceptionPolicy"/>.</param>
    /// <param name="state">Passed to <paramref name="callback"/>.</param>
    /// <param name="dueTime">Delay before the first firing; <see cref="Timeout.InfiniteTimeSpan"/> creates the timer
    /// stopped (start it with <see cref="ITimer.Change(TimeSpan, TimeSpan)"/>).</param>
    /// <param name="period">Interval between firings; <see cref="Timeout.InfiniteTimeSpan"/> or zero fires once.</param>
    /// <returns>The timer; dispose it to cancel.</returns>
    /// <remarks>
    /// <para>As with <see cref="Timer"/>, a periodic callback that runs longer than the period may overlap the next one.
    /// Unlike it, firings that come due while the previous firing of the same timer is still queued are merged into it,
    /// so a busy pool never piles up firings of one timer.</para>
    /// <para>A periodic timer is rescheduled from its previous due time (no drift); if the pool fell more than a period
    /// behind, the missed firings are skipped.</para>
    /// </remarks>
    /// <exception cref="ArgumentNullException"><paramref name="callback"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="dueTime"/> or <paramref name="period"/> is negative
    /// (other than infinite) or longer than 4,294,967,294 ms.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period)
    {
        ArgumentNullException.ThrowIfNull(callback);
        long due = PoolTimer.ToStopwatchTicks(dueTime, nameof(dueTime));
        long interval = PoolTimer.ToStopwatchTicks(period, nameof(period));
        ThrowIfShutDown();
        var timer = new PoolTimer(this, callback, state, CaptureContext());
        timer.Change(due, interval);
        return timer;
    }

    /// <summary>The wheel tick containing the Stopwatch timestamp <paramref name="timestamp"/>, rounded up.</summary>
    internal long CeilingTick(long timestamp)
    {
        long offset = timestamp - _timerEpoch;
        return offset <= 0 ? 0 : (offset + s_ticksPerWheelTick - 1) / s_ticksPerWheelTick;
    }

    /// <summary>The wheel tick that has fully begun at <paramref name="timestamp"/>.</summary>
    private long FloorTick(long timestamp) => Math.Max(0, (timestamp - _timerEpoch) / s_ticksPerWheelTick);

    private long TickStart(long tick) => _timerEpoch + tick * s_ticksPerWheelTick;

    /// <summary>
    /// Schedules or reschedules <paramref name="timer"/> (caller holds <see cref="_timerLock"/>): due at the Stopwatch
    /// timestamp <paramref name="dueTimestamp"/>. Returns whether the timer thread must be started.
    /// </summary>
    internal bool ScheduleLocked(PoolTimer timer, long dueTimestamp)
    {
        Debug.Assert(_timerLock.IsHeldByCurrentThread);
        long tick = CeilingTick(dueTimestamp);
        _wheel.CatchUpIfEmpty(FloorTick(Stopwatch.GetTimestamp()));
        _wheel.Insert(timer, tick);
        if (timer.When < _timerThreadDeadline)
        {
            _timerThreadDeadline = timer.When;
            if (_timerThread is null)
            {
                return !_timersStopped;
            }
            _timerBlocker!.Signal();
        }
        return false;
    }

    internal bool UnscheduleLocked(PoolTimer timer)
    {
        Debug.Assert(_timerLock.IsHeldByCurrentThread);
        return _wheel.Remove(timer);
    }

    internal bool TimersStoppedLocked => _timersStopped;

    /// <summary>Starts the timer thread (once); called outside <see cref="_timerLock"/>, because a thread start waits a scheduling round.</summary>
    internal void StartTimerThread()
    {
        ThreadBlocker blocker = ThreadBlocker.Create();
        var thread = new Thread(static state => ((WorkerPool)state!).TimerThreadMain(), 256 * 1024)
        {
            IsBackground = true,
            Name = $"{_threadNamePrefix} timer",
        };
        lock (_timerLock)
        {
            if (_timerThread is not null || _timersStopped)
            {
                return;
            }
            _timerBlocker = blocker;
            _timerThread = thread;
        }
        thread.UnsafeStart(this);
    }

    private void TimerThreadMain()
    {
        var expired = new List<TimerNode>();
        while (true)
        {
            long deadline;
            lock (_timerLock)
            {
                if (_timersStopped)
                {
                    return;
                }
                _timerThreadDeadline = long.MinValue; // awake: periodic reschedules below need no signal
                long now = FloorTick(Stopwatch.GetTimestamp());
                _wheel.Advance(now, expired);
                long nowTimestamp = Stopwatch.GetTimestamp();
                for (int i = 0; i < expired.Count; i++)
                {
                    ((PoolTimer)expired[i]).OnExpiredLocked(nowTimestamp);
                }
                deadline = _wheel.NextDeadline();
                _timerThreadDeadline = deadline;
            }
            if (expired.Count > 0)
            {
                DispatchExpired(expired);
                expired.Clear();
            }
            if (deadline == long.MaxValue)
            {
                _timerBlocker!.Wait();
            }
            else
            {
                _timerBlocker!.WaitUntil(TickStart(deadline));
            }
        }
    }

    /// <summary>Queues the callbacks of expired timers on the urgent queue and wakes workers for them.</summary>
    private void DispatchExpired(List<TimerNode> expired)
    {
        int queued = 0;
        foreach (TimerNode node in expired)
        {
            var timer = (PoolTimer)node;
            if (timer.TryMarkFirePending() && EnqueueUrgent(timer.CreateFireEntry()))
            {
                queued++;
            }
        }
        if (queued > 0)
        {
            WakeWorkerIfNeeded();
            if (queued > 1 && _idle.Count > 0)
            {
                // A burst: the first searcher brings in the next (Search), but a second wake now halves the ramp.
                WakeWorkerIfNeeded();
            }
            EnsureMonitorIfNoneIdle();
        }
    }

    /// <summary>Queues an entry ahead of all ordinary work. False when the pool is shutting down (the entry is dropped).</summary>
    internal bool EnqueueUrgent(in WorkItemEntry entry)
    {
        Interlocked.Increment(ref _urgentPending.Value);
        if (_urgentQueue.TryEnqueue(entry))
        {
            return true;
        }
        Interlocked.Decrement(ref _urgentPending.Value);
        return false;
    }

    /// <summary>Whether the urgent queue may hold an item (one plain load; see <see cref="_urgentPending"/>).</summary>
    internal bool UrgentWorkMayBeWaiting => Volatile.Read(ref _urgentPending.Value) != 0;

    /// <summary>Takes one urgent item (timer callbacks, oldest first).</summary>
    internal bool TryTakeUrgent(out WorkItemEntry item)
    {
        item = default;
        if (_urgentQueue.TryDequeueBatch(MemoryMarshal.CreateSpan(ref item, 1)) == 0)
        {
            return false;
        }
        Interlocked.Decrement(ref _urgentPending.Value);
        return true;
    }

    /// <summary>Stops the timer thread and forgets every scheduled timer (shutdown).</summary>
    private void StopTimers(bool join)
    {
        Thread? thread;
        lock (_timerLock)
        {
            _timersStopped = true;
            thread = _timerThread;
            var drained = new List<TimerNode>();
            _wheel.RemoveAll(drained);
        }
        _timerBlocker?.Signal();
        if (join && thread is not null && thread != Thread.CurrentThread)
        {
            thread.Join();
        }
    }
}
