using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Numerics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
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
//
// Starting the thread: _timerThread names a thread that has started and not yet decided to exit. The starter holds
// _threadStartLock across the start and publishes the thread (under _timerLock) only once the start has succeeded, so a
// failed start has changed nothing that anyone saw, and two starters never start two threads. The new thread takes
// _threadStartLock once before its first pass, so it never decides to exit before it has been published, nor before a
// caller that started it while holding the lock has scheduled its timer. PoolTimer.Change (the public Change and
// CreateTimer) schedules only while _timerThread is set, checked under _timerLock after starting the thread if needed,
// and the thread exits only under _timerLock with the wheel empty: so such a timer always has a thread to fire it, or
// its caller saw the start fail before anything changed. The other schedules (a periodic timer's next period, a retry
// after a fault, a signal registration's timeout, whose registration started the thread first) happen while the thread
// runs, unless it has exited with the pool stopped or a start failed. Then the registration's timeout starts a thread
// if the system allows, the next Change starts one, and until one runs workers expire due timers between items
// (AssistTimers).
//
// Faults: the pool's own code on the timer thread (the expiry, the hand-over, the stuck-item check, the wait) is not
// expected to throw, but could (out of memory, or a bug). A fault is written to Trace (FailureTrace) and the thread goes
// on: after a stuck-item check that threw, with the next check a period later; after any other fault, with a fresh pass
// after a short pause (doubling while faults repeat, so that a fault that recurs at every pass does not spin a core). A
// fault in the middle of an advance loses no firing: the wheel gives expired timers up one at a time (TimingWheel.Advance),
// and a timer whose firing was not handed over is put back in the wheel due at once (RetryLocked), so the next pass, or
// a worker, tries again. A worker that expires timers handles a fault the same way instead of letting it end the process.
internal sealed partial class TimerService : IWorkerTimers
{
    private readonly Lock _timerLock = new();
    // Held across a start of the timer thread, and taken once by the new thread before its first pass (see above).
    private readonly Lock _threadStartLock = new();
    private readonly TimingWheel _wheel = new();
    private readonly string _poolName;
    private readonly string _threadName;
    private readonly Func<ThreadStart, Thread>? _threadFactory; // test seam (WorkerPoolOptions.TimerThreadFactory)
    private readonly Action? _onFiringsHandOver; // test seam (WorkerPoolOptions.OnTimerFiringsHandOver)
    private readonly Scheduler _scheduler;
    private readonly ItemRunner _runner;
    // The firings of one advance, handed to the scheduler in one call. Under _timerLock; grows to the most timers that
    // ever fired at once.
    private WorkItemEntry[] _firings = new WorkItemEntry[16];
    private readonly long _timerEpoch = Stopwatch.GetTimestamp();
    private ThreadBlocker? _timerBlocker;
    // Written under _timerLock: set by the starter once the thread has started (holding _threadStartLock as well),
    // cleared by the thread as it exits. Read without a lock only as a hint (HasTimerThread).
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

    public TimerService(WorkerPoolOptions options, Scheduler scheduler, ItemRunner runner, ThreadStarts starts)
    {
        Starts = starts;
        _poolName = options.Name;
        _threadName = $"{options.ThreadNamePrefixOrName} timer";
        _threadFactory = options.TimerThreadFactory;
        _onFiringsHandOver = options.OnTimerFiringsHandOver;
        _scheduler = scheduler;
        _runner = runner;
    }

    /// <summary>The pool's thread starts (for the timer thread, and the wait threads of the registry that uses this service).</summary>
    internal ThreadStarts Starts { get; }

    /// <summary>Hosts <paramref name="detector"/>'s checks on the timer thread. Called once, before any thread of the pool exists.</summary>
    public void Connect(StuckItemDetector detector) => _stuckDetector = detector;

    /// <summary>
    /// Called by the thread controller once it has started a worker (outside its lock, on the thread that added the
    /// worker, so the new worker starts its first item without waiting for this): with stuck-item detection on and no
    /// check planned (the pool had no worker), plans one and starts the timer thread if there is none. Adding a worker
    /// never fails because of it: if the timer thread cannot be created, the next worker added tries again.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
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

    /// <summary>Whether the pool's timer thread exists; the caller holds the timer lock, so it cannot exit meanwhile.</summary>
    internal bool HasTimerThreadLocked
    {
        get
        {
            Debug.Assert(_timerLock.IsHeldByCurrentThread);
            return _timerThread is not null;
        }
    }

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
    /// timestamp <paramref name="dueTimestamp"/>. Returns whether the timer thread must be started (there is none:
    /// a caller that started it first never sees true, see PoolTimer.Change).
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
        if (_timerThread is null)
        {
            return true; // the thread that starts next finds the timer on its first pass
        }
        if (timer.When < _timerThreadDeadline)
        {
            _timerThreadDeadline = timer.When;
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

    /// <summary>
    /// Starts the timer thread unless one runs; called outside <see cref="_timerLock"/>, because a thread start waits a
    /// scheduling round. Throws what creating or starting the thread throws, having published nothing (see the start
    /// protocol above); a caller that has not yet changed anything can let the exception reach its own caller.
    /// </summary>
    internal void StartTimerThread()
    {
        if (Volatile.Read(ref _timerThread) is not null)
        {
            return; // the common case: no start lock (see StartTimerThreadHoldingStartLock for a thread exiting now)
        }
        lock (_threadStartLock)
        {
            StartTimerThreadHoldingStartLock();
        }
    }

    /// <summary>
    /// Held across a start of the timer thread; a new thread takes it before its first pass. A caller that holds it
    /// while it schedules a timer (PoolTimer.Change) knows that a thread it has just started sees the timer.
    /// </summary>
    internal Lock ThreadStartLock => _threadStartLock;

    /// <summary>As <see cref="StartTimerThread"/>, for a caller that holds <see cref="ThreadStartLock"/> (and not the timer lock).</summary>
    internal void StartTimerThreadHoldingStartLock()
    {
        Debug.Assert(_threadStartLock.IsHeldByCurrentThread && !_timerLock.IsHeldByCurrentThread);
        if (Volatile.Read(ref _timerThread) is not null)
        {
            return; // if it is exiting right now, a scheduler sees that under the timer lock and comes back here
        }
        ThreadStart start = TimerThreadMain;
        Thread thread;
        try
        {
            thread = _threadFactory is { } factory ? factory(start) : new Thread(start, 256 * 1024);
        }
        catch (Exception)
        {
            Starts.RecordFailure(PoolThreadKind.Timer);
            throw;
        }
        thread.IsBackground = true;
        thread.Name = _threadName;
        lock (_timerLock)
        {
            _timerBlocker ??= ThreadBlocker.Create(); // one blocker for every timer thread this pool ever runs
        }
        Starts.Start(thread, PoolThreadKind.Timer); // throws (counted): nothing published, the next schedule tries again
        lock (_timerLock)
        {
            _timerThread = thread;
        }
    }

    private void TimerThreadMain()
    {
        // Wait for the starter to publish this thread: before that, a pass could find the wheel empty and exit, and the
        // starter would then publish a thread that no longer runs.
        _threadStartLock.Enter();
        _threadStartLock.Exit();
        var expired = new List<TimerNode>();
        long plannedWake = long.MaxValue;
        int unwoken = 0;
        int faultPauseMs = 0;
        while (true)
        {
            try
            {
                if (!RunTimerThreadPass(expired, ref plannedWake, ref unwoken))
                {
                    return;
                }
                faultPauseMs = 0;
            }
            catch (Exception exception)
            {
                // Not a timer callback's exception (callbacks run on workers): the pool's own code failed. Report it and
                // go on with a fresh pass after a pause. Until then the thread's deadline may still read long.MinValue
                // ("awake"), so schedulers do not signal it; the pause bounds how late that makes their timers.
                FailureTrace.Write($"the timer thread of pool '{_poolName}' caught an exception and goes on", exception);
                faultPauseMs = Math.Clamp(faultPauseMs * 2, 1, MaxFaultPauseMs);
                Thread.Sleep(faultPauseMs);
            }
        }
    }

    /// <summary>The longest pause of the timer thread between passes that keep failing (see the faults paragraph above).</summary>
    private const int MaxFaultPauseMs = 64;

    /// <summary>
    /// One pass of the timer thread: the stuck-item check if due, an advance of the wheel, then a wait until the next
    /// deadline or a signal. Returns false when the thread must exit (the pool has stopped and no timer is left).
    /// <paramref name="unwoken"/> counts firings handed over whose workers have not been woken yet: a pass that failed
    /// before waking them leaves the count for the next one.
    /// </summary>
    private bool RunTimerThreadPass(List<TimerNode> expired, ref long plannedWake, ref int unwoken)
    {
        // Stuck-item check, when its tick has come: outside the lock (it reads the workers and may write an event).
        StuckItemDetector? detector = _stuckDetector;
        bool checkedWorkers = false;
        if (detector is not null && FloorTick(Stopwatch.GetTimestamp()) >= Volatile.Read(ref _stuckCheckTick))
        {
            checkedWorkers = true; // even if it throws: the next check comes a period later, not at once
            try
            {
                detector.Check(Stopwatch.GetTimestamp());
            }
            catch (Exception exception)
            {
                FailureTrace.Write($"the stuck-item check of pool '{_poolName}' caught an exception and goes on", exception);
            }
        }
        long deadline;
        lock (_timerLock)
        {
            _timerThreadDeadline = long.MinValue; // awake: periodic reschedules below need no signal
            CoarseClock.Verify(); // the bound that long timers are placed with still holds (two clock reads per wake)
            long nowTimestamp = Stopwatch.GetTimestamp();
            int readied = AdvanceLocked(nowTimestamp, expired);
            if (_timerThreadMayExit && _wheel.Count == 0)
            {
                // The pool has stopped and no timer is left (what fired ran elsewhere, so nothing is readied): exit.
                // The next schedule finds no thread and starts one.
                Debug.Assert(readied == 0);
                _timerThread = null;
                _timerThreadDeadline = long.MaxValue;
                Volatile.Write(ref _stuckCheckTick, long.MaxValue);
                return false;
            }
            unwoken += readied;
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
        if (unwoken > 0)
        {
            _scheduler.WakeForUrgent(unwoken);
            unwoken = 0;
        }
        if (deadline == long.MaxValue)
        {
            _timerBlocker!.Wait();
        }
        else
        {
            _timerBlocker!.WaitUntil(TickStart(deadline));
        }
        return true;
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
    /// <para>If anything here throws, every expired timer whose firing was not handed over is back in the wheel, due at
    /// once (<see cref="RetryLocked"/>), before the exception leaves: a fault delays a firing, never loses one. The
    /// steps before the hand-over change nothing outside the wheel, so a fault there retries every expired timer; the
    /// hand-over retries what it did not deliver itself.</para>
    /// </remarks>
    private int AdvanceLocked(long nowTimestamp, List<TimerNode> expired)
    {
        Debug.Assert(_timerLock.IsHeldByCurrentThread && expired.Count == 0);
        bool handingOver = false;
        try
        {
            _wheel.Advance(FloorTick(nowTimestamp), expired);
            if (expired.Count == 0)
            {
                return 0;
            }
            for (int i = 0; i < expired.Count; i++)
            {
                ((PoolTimer)expired[i]).OnExpiredLocked(nowTimestamp);
            }
            if (_firings.Length < expired.Count)
            {
                // Room for every firing before any timer is marked fire-pending (the hand-over itself allocates nothing).
                Array.Resize(ref _firings, Math.Max(expired.Count, _firings.Length * 2));
            }
            handingOver = true;
            return HandOverLocked(expired, nowTimestamp);
        }
        catch (Exception) when (!handingOver)
        {
            for (int i = 0; i < expired.Count; i++)
            {
                RetryLocked((PoolTimer)expired[i], nowTimestamp);
            }
            throw;
        }
        finally
        {
            expired.Clear(); // a later advance must not see these again: each is in the wheel or handed over
            PublishNextExpiryLocked();
        }
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
