using System;
using System.Diagnostics;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Timers;

/// <summary>
/// A timer of a <see cref="WorkerPool"/> (returned as <see cref="ITimer"/> by <see cref="WorkerPool.CreateTimer"/> and
/// by the pool's <see cref="WorkerPool.TimeProvider"/>): one object, an entry of the pool's timing wheel.
/// </summary>
/// <remarks>
/// <para>Kept small (64 bytes on 64-bit, with the wheel links), because a server keeps one per outstanding timeout, each
/// one is fresh memory to the allocator and the collector copies every one that survives a gen0 collection: no due
/// timestamp (a periodic timer's next firing is computed from the wheel tick it fired in), the due tick, the wheel slot,
/// the two flags and the count of running callbacks in one word (<see cref="TimerNode"/>), and the urgent queue outside
/// the object. What only some timers need, a period, an ExecutionContext with values, or the bookkeeping of a
/// <see cref="DisposeAsync"/> that waits, lives in a companion object that takes the callback's place
/// (<see cref="Companion"/>, <see cref="TrackingCompanion"/>).</para>
/// <para>Protocol (see also <see cref="TimerService"/> and TimerNode): the wheel fields and <see cref="_callback"/> are written
/// under the pool's timer lock. <see cref="DisposedFlag"/> is set by <see cref="Dispose"/> (under the lock) and read
/// without the lock by <see cref="Fire"/>, so a firing already queued when the timer is disposed does nothing, and once
/// <see cref="Dispose"/> returns no callback starts (one that had started may still be running).
/// <see cref="FirePendingFlag"/> is set by whoever expires the timer (under the lock) and cleared by the worker just
/// before the callback runs, without the lock.</para>
/// <para>Running callbacks (for <see cref="DisposeAsync"/>): the worker that clears the fire-pending flag counts its
/// callback in the word's owner count in the same atomic step, refused once the timer is disposed, and takes it off
/// with one more atomic step when the callback returns: the two writes that TimerNode allows outside the lock. So after
/// the disposed flag is set the total only falls, and <see cref="DisposeAsync"/>, having set it, completes at once if it
/// reads zero. Otherwise it leaves a completion source in a <see cref="TrackingCompanion"/>, and the callback that takes
/// the total to zero completes it. Both sides write, then fence (the count's atomic, a barrier), then read what the
/// other wrote, so at least one of them sees the other and completes the source (twice is harmless). More than
/// <see cref="TimerNode.OwnerCountMax"/> overlapping callbacks of one periodic timer are possible: the word then stays
/// at its maximum and the excess is counted in the tracking companion under the timer lock. The excess is above zero
/// only while the word is at its maximum (the word leaves it only under the lock, once the excess is zero), so the word
/// reaches zero only when the total does.</para>
/// </remarks>
internal sealed partial class PoolTimer : TimerNode, ITimer, IShutdownAware, Queues.ICallbackWrapper
{
    private const long FirePendingFlag = OwnerFlagA;
    private const long DisposedFlag = OwnerFlagB;

    private static readonly Action<object?> s_fire = static timer => ((PoolTimer)timer!).Fire();

    private readonly TimerService _timers;
    private object _callback; // the TimerCallback, or a Companion when the timer is periodic or an ExecutionContext flows
    private readonly object? _state;

    internal PoolTimer(TimerService timers, TimerCallback callback, object? state, ExecutionContext? context)
    {
        _timers = timers;
        // The default context (no AsyncLocal values) is what a worker runs in between items: it needs no companion.
        _callback = context is null || DefaultContext.Is(context) ? callback : new Companion(callback, context, 0);
        _state = state;
    }

    private bool IsDisposed => (ReadWord() & DisposedFlag) != 0;

    /// <summary>The period in whole milliseconds (0: one-shot). Read under the timer lock.</summary>
    private uint PeriodMilliseconds => AsCompanion(_callback)?.PeriodMs ?? 0;

    /// <summary>
    /// Restarts the timer: first firing after <paramref name="dueTime"/> (<see cref="Timeout.InfiniteTimeSpan"/> stops
    /// it), then every <paramref name="period"/> (<see cref="Timeout.InfiniteTimeSpan"/> or zero: once). A firing already
    /// queued still runs. Returns false, changing nothing, once the timer or its pool has been disposed.
    /// </summary>
    /// <remarks>Periodic firings fall on the pool's millisecond wheel ticks: a period is rounded up to whole milliseconds.
    /// On Linux a long due time (about 4 s or more) is measured from the kernel's coarse clock and may fire up to about
    /// 21 ms late, never early (see <see cref="WorkerPool.CreateTimer"/>). A timer needs the pool's timer thread: if it
    /// has exited (it does once the pool has stopped and no timer is scheduled) and a new one cannot be started, the call
    /// throws what starting a thread threw, and the timer is left as it was.</remarks>
    public bool Change(TimeSpan dueTime, TimeSpan period)
    {
        long due = ToStopwatchTicks(dueTime, nameof(dueTime));
        long interval = ToStopwatchTicks(period, nameof(period));
        return Change(due, interval);
    }

    /// <summary>
    /// Stopwatch ticks; -1 for infinite. Starts the pool's timer thread first if none runs, so that a failure to start
    /// it throws before anything has changed.
    /// </summary>
    internal bool Change(long dueTicks, long periodTicks) => Change(dueTicks, periodTicks, clockUnderLock: false, threadFirst: true);

    /// <summary>
    /// Restarts the timer with the delay counted from a clock read under the timer lock (Stopwatch ticks): the new due time
    /// is then at least <paramref name="dueTicks"/> after every expiry of this timer that came before the restart. A
    /// plain <see cref="Change(long, long)"/> counts from the call, so an expiry that slips in between the clock read
    /// and the lock is followed by the restarted firing less than a delay later: a registered wait's timeout restarted
    /// by a signal would then time out twice within one timeout. Never throws (no thread is required first): the timer it
    /// starts or restarts is a signal registration's timeout, whose registration started the timer thread before it
    /// recorded anything (see <c>WaitRegistry.RegisterSignal</c>), and the thread does not exit while the wheel holds a
    /// timer; should it have exited (the pool stopped, which also ends the registration), the timer is scheduled all
    /// the same and a new thread started if the system allows.
    /// </summary>
    internal bool Restart(long dueTicks, long periodTicks)
    {
        Debug.Assert(dueTicks >= 0);
        return Change(dueTicks, periodTicks, clockUnderLock: true, threadFirst: false);
    }

    /// <summary>Restarts the timer (see <see cref="Change(TimeSpan, TimeSpan)"/>).</summary>
    /// <param name="dueTicks">Stopwatch ticks; -1 stops the timer.</param>
    /// <param name="periodTicks">Stopwatch ticks; zero or negative: none.</param>
    /// <param name="clockUnderLock">Count the delay from a clock read under the timer lock (see <see cref="Restart"/>).</param>
    /// <param name="threadFirst">
    /// Make sure the timer thread runs before changing anything, throwing if it cannot be started: the timer is then
    /// scheduled only while the thread runs, which it keeps doing while the timer is in the wheel (see TimerService).
    /// Otherwise the timer is scheduled in any case, and a missing thread started afterwards if the system allows.
    /// </param>
    private bool Change(long dueTicks, long periodTicks, bool clockUnderLock, bool threadFirst)
    {
        if (!threadFirst || dueTicks < 0)
        {
            TryChange(dueTicks, periodTicks, clockUnderLock, requireThread: false, out bool changed);
            return changed;
        }
        while (true)
        {
            if ((_timers.HasTimerThread || IsDisposed)
                && TryChange(dueTicks, periodTicks, clockUnderLock, requireThread: true, out bool changed))
            {
                return changed;
            }
            // No thread. Start one and schedule while holding the start lock: the new thread's first pass waits for that
            // lock, so it finds this timer in the wheel and stays. Only a thread another caller started can be gone by
            // the time the timer lock is taken (it exits once the pool has stopped and the wheel is empty): then again.
            lock (_timers.ThreadStartLock)
            {
                _timers.StartTimerThreadHoldingStartLock(); // throws with nothing changed yet
                if (TryChange(dueTicks, periodTicks, clockUnderLock, requireThread: true, out changed))
                {
                    return changed;
                }
            }
        }
    }

    /// <summary>
    /// The body of <see cref="Change(long, long, bool, bool)"/>: false, changing nothing, when
    /// <paramref name="requireThread"/> is set and no timer thread runs; otherwise true, with <paramref name="changed"/>
    /// the result for the caller (false once the timer is disposed).
    /// </summary>
    private bool TryChange(long dueTicks, long periodTicks, bool clockUnderLock, bool requireThread, out bool changed)
    {
        // The clock is read before the lock, and after any thread start: the delay counts from the call. A long delay is
        // placed with the coarse clock (see CoarseClock): due from an upper bound of now, so never early, while the
        // wheel catches up only to a lower bound of now, so no other timer is pushed back.
        long now = 0, due = 0;
        if (dueTicks >= 0 && !clockUnderLock)
        {
            if (dueTicks >= CoarseClock.MinDelayTicks && CoarseClock.TryRead(out now, out long upper))
            {
                due = upper + dueTicks;
            }
            else
            {
                now = Stopwatch.GetTimestamp();
                due = now + dueTicks;
            }
        }
        bool startThread;
        lock (_timers.TimerLock)
        {
            if (IsDisposed)
            {
                changed = false;
                return true;
            }
            if (requireThread && !_timers.HasTimerThreadLocked)
            {
                changed = false;
                return false;
            }
            _timers.UnscheduleLocked(this);
            SetPeriodLocked(PeriodToMilliseconds(periodTicks));
            changed = true;
            if (dueTicks < 0)
            {
                return true;
            }
            if (clockUnderLock)
            {
                now = Stopwatch.GetTimestamp(); // after every expiry that held the lock before this restart
                due = now + dueTicks;
            }
            startThread = _timers.ScheduleLocked(this, due, now);
        }
        Debug.Assert(!(startThread && requireThread), "With a thread required, the timer was scheduled while one ran.");
        if (startThread)
        {
            _timers.EnsureTimerThread();
        }
        return true;
    }

    /// <summary>
    /// Cancels the timer. A firing that has not started yet never starts. A callback that is running is not waited for
    /// (<see cref="DisposeAsync"/> waits for it). Idempotent.
    /// </summary>
    public void Dispose()
    {
        lock (_timers.TimerLock)
        {
            SetOwnerFlagsLocked(DisposedFlag);
            _timers.UnscheduleLocked(this);
        }
    }

    /// <summary>
    /// Cancels the timer as <see cref="Dispose"/> does, and completes once no callback of the timer is running (at once
    /// if none is), as <see cref="TimeProvider.System"/>'s timers do. Idempotent; called from the timer's own callback,
    /// it completes after that callback returns.
    /// </summary>
    public ValueTask DisposeAsync()
    {
        TaskCompletionSource disposal;
        lock (_timers.TimerLock)
        {
            SetOwnerFlagsLocked(DisposedFlag);
            _timers.UnscheduleLocked(this);
            if (OwnerCount(ReadWord()) == 0)
            {
                return default; // nothing runs, and with the flag set nothing starts
            }
            TrackingCompanion tracking = GetTrackingLocked();
            disposal = tracking.Disposal ?? new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            Volatile.Write(ref tracking.Disposal, disposal);
        }
        // The other side of EndCallback's check: publish (above), fence, read the count.
        Interlocked.MemoryBarrier();
        if (OwnerCount(ReadWord()) == 0)
        {
            disposal.TrySetResult();
        }
        return new ValueTask(disposal.Task);
    }

    /// <summary>
    /// Caller holds the timer lock, after the wheel expired this timer at tick <see cref="TimerNode.When"/>: schedules its
    /// next period, counted from the start of that tick (at or after the due time, so never early).
    /// </summary>
    internal void OnExpiredLocked(long nowTimestamp)
    {
        uint periodMs = PeriodMilliseconds;
        if (periodMs != 0 && !IsDisposed)
        {
            long next = _timers.TickStart(When + periodMs);
            if (next <= nowTimestamp)
            {
                next = nowTimestamp + periodMs * TimerService.s_ticksPerWheelTick; // fell behind by a period or more: skip the missed firings
            }
            _timers.ScheduleLocked(this, next, nowTimestamp);
        }
    }

    /// <summary>
    /// Caller holds the timer lock, after <see cref="TryMarkFirePendingLocked"/>: takes the claim back, for a firing that
    /// could not be handed over. It was never queued, so no worker clears the flag meanwhile.
    /// </summary>
    internal void ClearFirePendingLocked() => ClearOwnerFlagsLocked(FirePendingFlag);

    /// <summary>
    /// Caller holds the timer lock: claims the right to queue a firing; false once disposed, or while a previous firing
    /// is still queued.
    /// </summary>
    internal bool TryMarkFirePendingLocked()
    {
        if ((ReadWord() & (FirePendingFlag | DisposedFlag)) != 0)
        {
            return false;
        }
        SetOwnerFlagsLocked(FirePendingFlag);
        return true;
    }

    /// <inheritdoc/>
    object? IShutdownAware.QueuedCallback => s_fire;

    /// <summary>A firing always runs at shutdown: a firing of a disposed timer does nothing by itself.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

    // A firing that has not started does nothing once the timer is disposed (see Fire).
    bool IShutdownAware.HasEnded => IsDisposed;

    /// <summary>The timer's callback (stuck-item reports name it rather than the firing).</summary>
    object? Queues.ICallbackWrapper.WrappedCallback
    {
        get
        {
            object callback = Volatile.Read(ref _callback);
            return callback as TimerCallback ?? ((Companion)callback).Callback;
        }
    }

    internal WorkItemEntry CreateFireEntry() =>
        new(s_fire, this, AsCompanion(Volatile.Read(ref _callback))?.Context);

    private void Fire()
    {
        // Cleared before the callback: a firing that comes due while the callback runs is queued, as with Timer. The
        // same atomic step counts the callback as running, unless the timer is disposed.
        if (!TryClearOwnerFlagAndCount(DisposedFlag, out long before))
        {
            if ((before & DisposedFlag) != 0 || !BeginExcessCallback())
            {
                return; // disposed: a firing that had not started does nothing
            }
        }
        Worker? worker = OwnedItems.Enter(this); // for the stuck-item detector: every firing's callback is s_fire
        try
        {
            object callback = Volatile.Read(ref _callback);
            (callback as TimerCallback ?? ((Companion)callback).Callback)(_state);
        }
        finally
        {
            OwnedItems.Exit(worker);
            EndCallback();
        }
    }

    /// <summary>The word's count is at its maximum: count this callback under the lock, or refuse it if the timer is disposed.</summary>
    private bool BeginExcessCallback()
    {
        lock (_timers.TimerLock)
        {
            if (IsDisposed)
            {
                return false;
            }
            if (!TryCountLocked())
            {
                GetTrackingLocked().Excess++; // the word stays at its maximum while the excess is above zero
            }
            return true;
        }
    }

    private void EndCallback()
    {
        long before;
        if (!TryUncount(out before))
        {
            // The word is at its maximum: only a locked write changes it, and the excess goes first.
            lock (_timers.TimerLock)
            {
                if (_callback is TrackingCompanion { Excess: > 0 } tracking)
                {
                    tracking.Excess--;
                    return;
                }
                before = UncountLocked();
            }
        }
        if (OwnerCount(before) == 1 && (before & DisposedFlag) != 0)
        {
            // The last callback of a disposed timer: complete a waiting DisposeAsync. The atomic above fenced, so either
            // this reads its completion source or DisposeAsync reads the count as zero (see the remarks).
            if (Volatile.Read(ref _callback) is TrackingCompanion tracking)
            {
                Volatile.Read(ref tracking.Disposal)?.TrySetResult();
            }
        }
    }

    /// <summary>Caller holds the timer lock: the tracking companion, put in place if there is none yet.</summary>
    private TrackingCompanion GetTrackingLocked()
    {
        object callback = _callback;
        if (callback is TrackingCompanion tracking)
        {
            return tracking;
        }
        Companion? companion = AsCompanion(callback);
        tracking = new TrackingCompanion(companion?.Callback ?? (TimerCallback)callback, companion?.Context, companion?.PeriodMs ?? 0);
        Volatile.Write(ref _callback, tracking); // either object gives the same callback and context (see SetPeriodLocked)
        return tracking;
    }

    /// <summary>Caller holds the timer lock: records the period, replacing the companion only when it changes.</summary>
    private void SetPeriodLocked(uint periodMs)
    {
        object callback = _callback;
        Companion? companion = AsCompanion(callback);
        if ((companion?.PeriodMs ?? 0) == periodMs)
        {
            return;
        }
        TimerCallback target = companion?.Callback ?? (TimerCallback)callback;
        ExecutionContext? context = companion?.Context;
        object replacement;
        if (companion is TrackingCompanion tracking)
        {
            // The bookkeeping moves along (a disposed timer is never changed, so there is no completion source yet).
            replacement = new TrackingCompanion(target, context, periodMs) { Excess = tracking.Excess, Disposal = tracking.Disposal };
        }
        else
        {
            replacement = periodMs == 0 && context is null ? target : new Companion(target, context, periodMs);
        }
        // A worker may be reading the field (Fire, CreateFireEntry): either object gives the same callback and context.
        Volatile.Write(ref _callback, replacement);
    }

    /// <summary>The companion in <paramref name="callback"/> (the field's value), or null when it is the bare callback.</summary>
    /// <remarks>Tests the delegate type first: a sealed type, so one comparison, where testing for the companion type,
    /// which has a subclass, might call into the runtime for every bare callback.</remarks>
    private static Companion? AsCompanion(object callback) => callback is TimerCallback ? null : (Companion)callback;

    /// <summary>
    /// What only some timers need, kept out of the timer object: the period of a periodic timer, and the
    /// ExecutionContext of one created where AsyncLocal values flow. Immutable; replaced when the period changes.
    /// </summary>
    private class Companion(TimerCallback callback, ExecutionContext? context, uint periodMs)
    {
        public readonly TimerCallback Callback = callback;
        public readonly ExecutionContext? Context = context;
        public readonly uint PeriodMs = periodMs;
    }

    /// <summary>
    /// A companion that also carries the running-callback bookkeeping, put in place (under the timer lock) only when a
    /// <see cref="DisposeAsync"/> must wait or more callbacks overlap than the word counts. Once in place it stays.
    /// </summary>
    private sealed class TrackingCompanion(TimerCallback callback, ExecutionContext? context, uint periodMs)
        : Companion(callback, context, periodMs)
    {
        /// <summary>Running callbacks beyond the word's maximum; read and written under the timer lock.</summary>
        public int Excess;

        /// <summary>Completed when the last callback returns; written under the timer lock, read by that callback.</summary>
        public TaskCompletionSource? Disposal;
    }
}
