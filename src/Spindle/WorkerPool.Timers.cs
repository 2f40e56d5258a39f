using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Numerics;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle;

// Timers.
//
// One hierarchical timing wheel per pool (Timers/TimingWheel.cs), guarded by _timerLock, and one timer thread, started
// by the first timer, that sleeps until the wheel's next deadline. When a deadline passes it expires the due entries
// under the lock and, outside it, appends them to the pool's ready list, which workers look at before any other queue
// (Worker.TryTakeWork, TryStealOrTakeGlobal): a timer callback waits for at most the items that are running when it
// fires, never behind a backlog.
//
// Who writes what:
// - The wheel, every PoolTimer's wheel fields (When, links, period) and _timerThreadDeadline are
//   written under _timerLock only (by schedulers, Change, Dispose and the timer thread).
// - _timerThreadDeadline is the tick the timer thread is about to sleep until (long.MaxValue: no deadline). A scheduler
//   that inserts an entry due earlier signals the thread's blocker and lowers the field, so one wake serves a burst of
//   earlier inserts. The thread publishes the field under the lock before it sleeps, and the blocker keeps a signal sent
//   between that publication and the sleep, so no earlier insert is missed.
// - PoolTimer's fire-pending flag (atomics): set by the timer thread when it queues a firing, cleared by the worker just
//   before the callback runs. A timer whose previous firing has not started is not queued again (firings coalesce, so
//   a saturated pool never accumulates a backlog of one periodic timer).
// - PoolTimer's count of running callbacks (atomics, in the same word): raised by the worker in the step that clears
//   the fire-pending flag, lowered when the callback returns; DisposeAsync waits for it to reach zero (PoolTimer.cs).
public sealed partial class WorkerPool
{
    private readonly Lock _timerLock = new();
    private readonly TimingWheel _wheel = new();
    // The ready list: fired timers waiting for a worker, oldest first, in a growable ring (a timer is in it at most once,
    // see its fire-pending flag, so the ring never outgrows the number of timers and, once grown, firing allocates
    // nothing). Guarded by _readyLock; appended to by the timer thread, a whole batch per lock, and taken from one timer
    // at a time by workers.
    private readonly Lock _readyLock = new();
    private PoolTimer?[] _ready = new PoolTimer?[16];
    private int _readyStart;
    private int _readyCount;
    private bool _readyClosed;
    private readonly long _timerEpoch = Stopwatch.GetTimestamp();
    private ThreadBlocker? _timerBlocker;
    private Thread? _timerThread;
    private long _timerThreadDeadline = long.MaxValue;
    // Set (under _timerLock) when the pool has stopped: the timer thread then exits as soon as the wheel is empty, and
    // the next schedule starts a new one. Timers outlive the pool's workers: their firings then run elsewhere.
    private bool _timerThreadMayExit;
    private WorkerPoolTimeProvider? _timeProvider;

    // Raised before timers are appended to the ready list and lowered after one is taken, so it is never below the list's
    // length: a worker that reads zero may skip the list. Written only when timers fire; read before every item.
    private PaddedInt32 _urgentPending;

    // The Stopwatch timestamp of the wheel's next deadline (long.MaxValue: no timer), for the worker assist. Written
    // under _timerLock after every advance and by schedules that move the deadline earlier; a cancel leaves it, so it may
    // be early (a worker then finds nothing due and republishes it), never late. Read by workers between items.
    private PaddedInt64 _nextExpiry = new() { Value = long.MaxValue };

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

    /// <summary>Whether the pool's timer thread is running (tests: shutdown joins it).</summary>
    internal bool TimerThreadIsAlive => Volatile.Read(ref _timerThread)?.IsAlive == true;

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
    /// <returns>The timer; dispose it to cancel. After <see cref="IDisposable.Dispose"/> returns no firing starts;
    /// the task of <see cref="IAsyncDisposable.DisposeAsync"/> completes once, in addition, no callback of the timer is
    /// running (as with <see cref="System.TimeProvider.System"/>'s timers).</returns>
    /// <remarks>
    /// <para>As with <see cref="Timer"/>, a periodic callback that runs longer than the period may overlap the next one.
    /// Unlike it, firings that come due while the previous firing of the same timer is still queued are merged into it,
    /// so a busy pool never piles up firings of one timer.</para>
    /// <para>A periodic timer is rescheduled from its previous due time (no drift); if the pool fell more than a period
    /// behind, the missed firings are skipped. Periods are rounded up to whole milliseconds.</para>
    /// <para>On Linux, a long <paramref name="dueTime"/> (200 times the margin below: about 4.2 s with the usual 250 Hz
    /// kernels) is measured from the kernel's coarse clock, which is several times cheaper to read, plus a margin of five
    /// kernel ticks and 1 ms (21 ms at 250 Hz): the timer may fire up to that much later than requested (under 0.5% of
    /// the delay), never earlier.</para>
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

    internal long TickStart(long tick) => _timerEpoch + tick * s_ticksPerWheelTick;

    /// <summary>
    /// Schedules or reschedules <paramref name="timer"/> (caller holds <see cref="_timerLock"/>): due at the Stopwatch
    /// timestamp <paramref name="dueTimestamp"/>. Returns whether the timer thread must be started.
    /// </summary>
    internal bool ScheduleLocked(PoolTimer timer, long dueTimestamp, long nowTimestamp)
    {
        Debug.Assert(_timerLock.IsHeldByCurrentThread);
        long tick = CeilingTick(dueTimestamp);
        _wheel.CatchUpIfEmpty(FloorTick(nowTimestamp));
        _wheel.Insert(timer, tick);
        long start = TickStart(timer.When);
        if (start < _nextExpiry.Value)
        {
            Volatile.Write(ref _nextExpiry.Value, start);
        }
        if (timer.When < _timerThreadDeadline)
        {
            _timerThreadDeadline = timer.When;
            if (_timerThread is null)
            {
                return true;
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

    /// <summary>Starts the timer thread (once); called outside <see cref="_timerLock"/>, because a thread start waits a scheduling round.</summary>
    internal void StartTimerThread()
    {
        var thread = new Thread(static state => ((WorkerPool)state!).TimerThreadMain(), 256 * 1024)
        {
            IsBackground = true,
            Name = $"{_threadNamePrefix} timer",
        };
        lock (_timerLock)
        {
            if (_timerThread is not null)
            {
                return;
            }
            _timerBlocker ??= ThreadBlocker.Create(); // one blocker for every timer thread this pool ever runs
            _timerThread = thread;
        }
        try
        {
            thread.UnsafeStart(this);
        }
        catch
        {
            // No thread: forget it, so that shutdown does not join it and the next schedule tries again (the wheel
            // keeps the timers; workers between items still expire them, see AssistTimers).
            lock (_timerLock)
            {
                _timerThread = null;
                _timerThreadDeadline = long.MaxValue;
            }
            throw;
        }
    }

    private void TimerThreadMain()
    {
        var expired = new List<TimerNode>();
        long plannedWake = long.MaxValue;
        while (true)
        {
            long deadline;
            int readied;
            lock (_timerLock)
            {
                _timerThreadDeadline = long.MinValue; // awake: periodic reschedules below need no signal
                CoarseClock.Verify(); // the bound that long timers are placed with still holds (two clock reads per wake)
                long nowTimestamp = Stopwatch.GetTimestamp();
                readied = AdvanceLocked(nowTimestamp, expired);
                if (_timerThreadMayExit && _wheel.Count == 0)
                {
                    // The pool has stopped and no timer is left (what fired ran elsewhere, so nothing is readied): exit.
                    // The next schedule finds no thread and starts one.
                    Debug.Assert(readied == 0);
                    _timerThread = null;
                    _timerThreadDeadline = long.MaxValue;
                    return;
                }
                long now = FloorTick(nowTimestamp);
                // Never postpone a planned wake-up that is still ahead: when the timer that set it was cancelled, keeping
                // it costs one spurious wake, while dropping it would make the next scheduler of a later timer signal
                // this thread again (a schedule-cancel loop would otherwise pay a wake-up system call per timer).
                deadline = Math.Min(_wheel.NextDeadline(), plannedWake > now ? plannedWake : long.MaxValue);
                plannedWake = deadline;
                _timerThreadDeadline = deadline;
            }
            if (readied > 0)
            {
                WakeForReadyTimers(readied);
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

    /// <summary>
    /// Caller holds the timer lock: expires what is due at <paramref name="nowTimestamp"/>, reschedules the periodic
    /// timers, appends the fired ones to the ready list and publishes the next deadline for workers. Returns how many
    /// timers it made ready (the caller wakes workers for them, after letting the lock go).
    /// </summary>
    /// <remarks>
    /// The append happens under the timer lock on purpose: a due timer is always in the wheel, in the ready list, or in
    /// the hands of the lock's holder. If the holder is descheduled, a worker that sees the deadline overdue blocks on
    /// the lock (<see cref="AssistTimers"/>), giving its core to the holder, instead of finding nothing to do while the
    /// fired timers sit in a list only the descheduled thread can see.
    /// </remarks>
    private int AdvanceLocked(long nowTimestamp, List<TimerNode> expired)
    {
        _wheel.Advance(FloorTick(nowTimestamp), expired);
        for (int i = 0; i < expired.Count; i++)
        {
            ((PoolTimer)expired[i]).OnExpiredLocked(nowTimestamp);
        }
        int readied = expired.Count > 0 ? AppendReady(expired) : 0;
        expired.Clear();
        PublishNextExpiryLocked();
        return readied;
    }

    private void PublishNextExpiryLocked()
    {
        long next = _wheel.NextDeadline();
        Volatile.Write(ref _nextExpiry.Value, next == long.MaxValue ? long.MaxValue : TickStart(next));
    }

    /// <summary>
    /// Worker assist, called between items every <c>Worker.TimerCheckInterval</c> items: if the next timer deadline
    /// passed more than <see cref="AssistSlackTicks"/> ago, the timer thread has not been scheduled in time (every core
    /// is busy with the pool's own workers, and the kernel does not preempt them for it at once), so the worker expires
    /// the due timers itself. Returns the timestamp it read, or 0 when no timer is scheduled.
    /// </summary>
    internal long AssistTimers(ref List<TimerNode>? buffer)
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
        buffer ??= [];
        int readied = 0;
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
            WakeForReadyTimers(readied);
        }
        return now;
    }

    /// <summary>How late the timer thread may be before workers expire timers themselves (a quarter millisecond).</summary>
    private static readonly long AssistSlackTicks = Stopwatch.Frequency / 4000;

    /// <summary>How late the deadline may be before an assisting worker waits for the timer lock (one millisecond).</summary>
    private static readonly long AssistBlockTicks = Stopwatch.Frequency / 1000;

    /// <summary>
    /// Caller holds the timer lock: appends the expired timers to the ready list (ahead of all ordinary work), skipping
    /// those whose previous firing has not started. Returns how many it appended.
    /// </summary>
    private int AppendReady(List<TimerNode> expired)
    {
        // Claim the firings first (outside the ready lock), compacting the claimed timers to the front of the list.
        int count = 0;
        for (int i = 0; i < expired.Count; i++)
        {
            var timer = (PoolTimer)expired[i];
            if (timer.TryMarkFirePendingLocked())
            {
                expired[count++] = timer;
            } // otherwise its previous firing has not started yet: this one merges into it
        }
        if (count == 0)
        {
            return 0;
        }
        Interlocked.Add(ref _urgentPending.Value, count); // before the items become visible: never below the list's length
        bool closed;
        lock (_readyLock)
        {
            closed = _readyClosed;
            if (!closed)
            {
                AppendReadyLocked(expired, count);
            }
        }
        if (closed)
        {
            // The pool has stopped: its timers outlive it, and their callbacks run on the built-in pool.
            Interlocked.Add(ref _urgentPending.Value, -count);
            for (int i = 0; i < count; i++)
            {
                RunElsewhere(((PoolTimer)expired[i]).CreateFireEntry());
            }
            return 0;
        }
        return count;
    }

    private void AppendReadyLocked(List<TimerNode> expired, int count)
    {
        Debug.Assert(_readyLock.IsHeldByCurrentThread);
        if (_readyCount + count > _ready.Length)
        {
            GrowReadyLocked(_readyCount + count);
        }
        int mask = _ready.Length - 1;
        for (int i = 0; i < count; i++)
        {
            _ready[(_readyStart + _readyCount + i) & mask] = (PoolTimer)expired[i];
        }
        _readyCount += count;
    }

    private void GrowReadyLocked(int needed)
    {
        var grown = new PoolTimer?[(int)BitOperations.RoundUpToPowerOf2((uint)needed)];
        int mask = _ready.Length - 1;
        for (int i = 0; i < _readyCount; i++)
        {
            grown[i] = _ready[(_readyStart + i) & mask];
        }
        _ready = grown;
        _readyStart = 0;
    }

    /// <summary>Wakes workers for <paramref name="count"/> newly ready timers (called outside the timer lock).</summary>
    private void WakeForReadyTimers(int count)
    {
        WakeWorkerIfNeeded();
        if (count > 1 && _idle.Count > 0)
        {
            // A burst: the first searcher brings in the next (Search), but a second wake now halves the ramp.
            WakeWorkerIfNeeded();
        }
        EnsureMonitorIfNoneIdle();
    }

    /// <summary>Whether a fired timer may be waiting (one plain load; see <see cref="_urgentPending"/>).</summary>
    internal bool UrgentWorkMayBeWaiting => Volatile.Read(ref _urgentPending.Value) != 0;

    /// <summary>Takes the oldest fired timer, as a work item.</summary>
    internal bool TryTakeUrgent(out WorkItemEntry item)
    {
        PoolTimer timer;
        lock (_readyLock)
        {
            if (_readyCount == 0)
            {
                item = default;
                return false;
            }
            ref PoolTimer? slot = ref _ready[_readyStart];
            timer = slot!;
            slot = null; // the ring keeps no fired timer alive
            _readyStart = (_readyStart + 1) & (_ready.Length - 1);
            _readyCount--;
        }
        Interlocked.Decrement(ref _urgentPending.Value);
        item = timer.CreateFireEntry();
        return true;
    }

    /// <summary>
    /// The pool has stopped: the ready list accepts no more firings (later ones run elsewhere, see AppendReady; those in
    /// it are swept with the other leftovers).
    /// </summary>
    private void CloseReadyList()
    {
        lock (_readyLock)
        {
            _readyClosed = true;
        }
    }

    /// <summary>Fired timers waiting in the ready list (a snapshot).</summary>
    private long ReadyTimerCount => Math.Max(0, Volatile.Read(ref _urgentPending.Value));

    /// <summary>The pool has stopped: the timer thread may exit once no timer is scheduled (woken now to look).</summary>
    private void ReleaseTimerThreadAfterStop()
    {
        lock (_timerLock)
        {
            _timerThreadMayExit = true;
        }
        _timerBlocker?.Signal();
    }
}
