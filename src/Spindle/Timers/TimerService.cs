using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Numerics;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;
using Spindle.Threading;

namespace Spindle.Timers;

// The timer service: one hierarchical timing wheel per pool (TimingWheel.cs), guarded by _timerLock, and one timer
// thread, started by the first timer, that sleeps until the wheel's next deadline. When a deadline passes it expires the
// due entries under the lock and hands their firings to the scheduler's urgent queue (Scheduler.TrySubmitUrgent), which
// workers look at before any other queue: a timer callback waits for at most the items that are running when it fires,
// never behind a backlog. It calls nothing else of the pool: the scheduler takes the firings, the item runner runs them
// elsewhere once the pool has stopped.
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
//
// The timer thread also hosts stuck-item detection (StuckItemDetector), because it is the pool's one thread that never
// runs items: a check needs no free worker. With detection on, adding the first worker starts the thread (rather than
// the first timer) and plans a check (_stuckCheckTick, under _timerLock); the thread runs each check outside the lock
// when its tick comes and plans the next one a period later while the pool has workers, and none once it has no worker
// left (the next worker added plans one again). Checks change nothing for timers: they only bring the thread's
// deadline forward. The thread still exits once the pool has stopped and the wheel is empty, since a stopped pool has no
// worker to watch.
internal sealed class TimerService
{
    private readonly Lock _timerLock = new();
    private readonly TimingWheel _wheel = new();
    private readonly string _threadName;
    private readonly Scheduler _scheduler;
    private readonly ItemRunner _runner;
    // The firings of one advance, handed to the scheduler in one call. Under _timerLock; grows to the most timers that
    // ever fired at once.
    private WorkItemEntry[] _firings = new WorkItemEntry[16];
    private readonly long _timerEpoch = Stopwatch.GetTimestamp();
    private ThreadBlocker? _timerBlocker;
    private Thread? _timerThread;
    private long _timerThreadDeadline = long.MaxValue;
    // Set (under _timerLock) when the pool has stopped: the timer thread then exits as soon as the wheel is empty, and
    // the next schedule starts a new one. Timers outlive the pool's workers: their firings then run elsewhere.
    private bool _timerThreadMayExit;
    // Stuck-item detection, null when it is off: set once by Connect, before any thread of the pool exists.
    private StuckItemDetector? _stuckDetector;
    // The wheel tick of the next stuck-item check; long.MaxValue: none planned. Written under _timerLock (by the timer
    // thread after a check, by OnWorkerAdded when none is planned, at the thread's exit); read without the lock only by
    // the timer thread, to see whether a check is due.
    private long _stuckCheckTick = long.MaxValue;

    // The Stopwatch timestamp of the wheel's next deadline (long.MaxValue: no timer), for the worker assist. Written
    // under _timerLock after every advance and by schedules that move the deadline earlier; a cancel leaves it, so it may
    // be early (a worker then finds nothing due and republishes it), never late. Read by workers between items.
    private PaddedInt64 _nextExpiry = new() { Value = long.MaxValue };

    public TimerService(WorkerPoolOptions options, Scheduler scheduler, ItemRunner runner)
    {
        _threadName = $"{options.ThreadNamePrefix ?? options.Name} timer";
        _scheduler = scheduler;
        _runner = runner;
    }

    /// <summary>Hosts <paramref name="detector"/>'s checks on the timer thread. Called once, before any thread of the pool exists.</summary>
    public void Connect(StuckItemDetector detector) => _stuckDetector = detector;

    /// <summary>
    /// Called by the thread controller once it has started a worker (outside its lock, on the thread that added the
    /// worker, so the new worker starts its first item without waiting for this): with stuck-item detection on and no
    /// check planned (the pool had no worker), plans one and starts the timer thread if there is none. Adding a worker
    /// never fails because of it: if the timer thread cannot be created, the next worker added tries again.
    /// </summary>
    public void OnWorkerAdded()
    {
        StuckItemDetector? detector = _stuckDetector;
        if (detector is null)
        {
            return;
        }
        bool start;
        // Always under the lock (once per worker added): the timer thread decides whether the pool still has workers
        // under it, so either that decision sees this worker (listed before it was started), or this finds no check
        // planned and plans one.
        lock (_timerLock)
        {
            if (_stuckCheckTick != long.MaxValue)
            {
                return;
            }
            long tick = FloorTick(Stopwatch.GetTimestamp()) + detector.CheckPeriodMs;
            Volatile.Write(ref _stuckCheckTick, tick);
            start = _timerThread is null;
            if (!start && tick < _timerThreadDeadline)
            {
                _timerThreadDeadline = tick;
                _timerBlocker!.Signal();
            }
        }
        if (start)
        {
            try
            {
                StartTimerThread();
            }
            catch (Exception)
            {
                lock (_timerLock)
                {
                    if (_timerThread is null)
                    {
                        Volatile.Write(ref _stuckCheckTick, long.MaxValue);
                    }
                }
            }
        }
    }

    /// <summary>The lock that guards the wheel and every timer's wheel fields (PoolTimer takes it).</summary>
    internal Lock TimerLock => _timerLock;

    /// <summary>Stopwatch ticks per wheel tick (one millisecond).</summary>
    internal static readonly long s_ticksPerWheelTick = Stopwatch.Frequency / 1000;

    /// <summary>Timers scheduled on the wheel right now (a snapshot, for diagnostics).</summary>
    public int ScheduledCount
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

    /// <summary>Starts the timer thread unless it runs already (a timer created unscheduled); never throws.</summary>
    internal void EnsureTimerThread()
    {
        if (Volatile.Read(ref _timerThread) is not null)
        {
            return;
        }
        try
        {
            StartTimerThread();
        }
        catch (Exception)
        {
            // No thread now: the first schedule tries again, and workers between items expire due timers meanwhile.
        }
    }

    /// <summary>Starts the timer thread (once); called outside <see cref="_timerLock"/>, because a thread start waits a scheduling round.</summary>
    internal void StartTimerThread()
    {
        var thread = new Thread(static state => ((TimerService)state!).TimerThreadMain(), 256 * 1024)
        {
            IsBackground = true,
            Name = _threadName,
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
            // Stuck-item check, when its tick has come: outside the lock (it reads the workers and may write an event).
            StuckItemDetector? detector = _stuckDetector;
            bool checkedWorkers = false;
            if (detector is not null && FloorTick(Stopwatch.GetTimestamp()) >= Volatile.Read(ref _stuckCheckTick))
            {
                detector.Check(Stopwatch.GetTimestamp());
                checkedWorkers = true;
            }
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
                    Volatile.Write(ref _stuckCheckTick, long.MaxValue);
                    return;
                }
                long now = FloorTick(nowTimestamp);
                if (checkedWorkers)
                {
                    // Read under the lock: a worker added after this read finds no check planned and plans one.
                    Volatile.Write(ref _stuckCheckTick, detector!.HasWorkers ? now + detector.CheckPeriodMs : long.MaxValue);
                }
                // Never postpone a planned wake-up that is still ahead: when the timer that set it was cancelled, keeping
                // it costs one spurious wake, while dropping it would make the next scheduler of a later timer signal
                // this thread again (a schedule-cancel loop would otherwise pay a wake-up system call per timer).
                deadline = Math.Min(_wheel.NextDeadline(), plannedWake > now ? plannedWake : long.MaxValue);
                deadline = Math.Min(deadline, _stuckCheckTick);
                plannedWake = deadline;
                _timerThreadDeadline = deadline;
            }
            if (readied > 0)
            {
                _scheduler.WakeForUrgent(readied);
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
    /// timers, hands the firings to the scheduler's urgent queue and publishes the next deadline for workers. Returns
    /// how many firings it handed over.
    /// </summary>
    /// <remarks>
    /// The hand-over happens under the timer lock on purpose: a due timer is always in the wheel, in the urgent queue,
    /// or in the hands of the lock's holder. If the holder is descheduled, a worker that sees the deadline overdue blocks on
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
    /// Worker assist, called between items every few items (the worker paces its looks to about 100 µs of work): if the
    /// next timer deadline
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
            _scheduler.WakeForUrgent(readied);
        }
        return now;
    }

    /// <summary>How late the timer thread may be before workers expire timers themselves (a quarter millisecond).</summary>
    private static readonly long AssistSlackTicks = Stopwatch.Frequency / 4000;

    /// <summary>How late the deadline may be before an assisting worker waits for the timer lock (one millisecond).</summary>
    private static readonly long AssistBlockTicks = Stopwatch.Frequency / 1000;

    /// <summary>
    /// Caller holds the timer lock: hands the expired timers' firings to the scheduler (ahead of all ordinary work),
    /// skipping those whose previous firing has not started. Returns how many it handed over (the caller wakes workers
    /// for them once it has let the lock go).
    /// </summary>
    private int AppendReady(List<TimerNode> expired)
    {
        Debug.Assert(_timerLock.IsHeldByCurrentThread);
        int count = 0;
        for (int i = 0; i < expired.Count; i++)
        {
            var timer = (PoolTimer)expired[i];
            if (timer.TryMarkFirePendingLocked())
            {
                if (count == _firings.Length)
                {
                    Array.Resize(ref _firings, _firings.Length * 2);
                }
                _firings[count++] = timer.CreateFireEntry();
            } // otherwise its previous firing has not started yet: this one merges into it
        }
        if (count == 0)
        {
            return 0;
        }
        Span<WorkItemEntry> firings = _firings.AsSpan(0, count);
        bool accepted = _scheduler.TrySubmitUrgent(firings);
        if (!accepted)
        {
            // The pool has stopped: its timers outlive it, and their callbacks run on the built-in pool.
            foreach (ref readonly WorkItemEntry firing in firings)
            {
                _runner.RunElsewhere(firing);
            }
        }
        firings.Clear(); // keep no timer alive through the buffer
        return accepted ? count : 0;
    }

    /// <summary>The pool has stopped: the timer thread may exit once no timer is scheduled (woken now to look).</summary>
    public void ReleaseThreadAfterStop()
    {
        lock (_timerLock)
        {
            _timerThreadMayExit = true;
        }
        _timerBlocker?.Signal();
    }
}
