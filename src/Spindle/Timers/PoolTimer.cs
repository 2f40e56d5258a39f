using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;

namespace Spindle.Timers;

/// <summary>
/// A timer of a <see cref="WorkerPool"/> (returned as <see cref="ITimer"/> by <see cref="WorkerPool.CreateTimer"/> and
/// by the pool's <see cref="WorkerPool.TimeProvider"/>): one object, an entry of the pool's timing wheel.
/// </summary>
/// <remarks>
/// <para>Kept small (72 bytes on 64-bit, with the wheel links), because a server keeps one per outstanding timeout, each
/// one is fresh memory to the allocator and the collector copies every one that survives a gen0 collection: no due
/// timestamp (a periodic timer's next firing is computed from the wheel tick it fired in), the due tick and the wheel
/// slot in one word, the period in whole milliseconds, the ExecutionContext folded into the callback field when one
/// flows, the ready list outside the object, and one flags word.</para>
/// <para>Protocol (see also WorkerPool.Timers.cs): the wheel links and <see cref="_periodMs"/> are written under the pool's
/// timer lock. <see cref="_flags"/> is changed only by atomic operations: <see cref="DisposedFlag"/> is set by
/// <see cref="Dispose"/> (under the lock) and read without the lock by <see cref="Fire"/>, so a firing already queued
/// when the timer is disposed does nothing, and once <see cref="Dispose"/> returns no callback starts (one that had
/// started may still be running). <see cref="FirePendingFlag"/> is set by whoever expires the timer (under the lock) and
/// cleared by the worker just before the callback runs.</para>
/// </remarks>
internal sealed class PoolTimer : TimerNode, ITimer
{
    private const int FirePendingFlag = 1;
    private const int DisposedFlag = 2;

    private static readonly Action<object?> s_fire = static timer => ((PoolTimer)timer!).Fire();

    private readonly WorkerPool _pool;
    private readonly object _callback; // a TimerCallback, or a ContextualCallback when an ExecutionContext flows
    private readonly object? _state;
    private uint _periodMs; // 0: one-shot
    private int _flags;

    internal PoolTimer(WorkerPool pool, TimerCallback callback, object? state, ExecutionContext? context)
    {
        _pool = pool;
        // The default context (no AsyncLocal values) is what a worker runs in between items: it needs no wrapper.
        _callback = context is null || WorkerPool.IsDefaultContext(context) ? callback : new ContextualCallback(callback, context);
        _state = state;
    }

    private bool IsDisposed => (Volatile.Read(ref _flags) & DisposedFlag) != 0;

    /// <summary>
    /// Restarts the timer: first firing after <paramref name="dueTime"/> (<see cref="Timeout.InfiniteTimeSpan"/> stops
    /// it), then every <paramref name="period"/> (<see cref="Timeout.InfiniteTimeSpan"/> or zero: once). A firing already
    /// queued still runs. Returns false, changing nothing, once the timer or its pool has been disposed.
    /// </summary>
    /// <remarks>Periodic firings fall on the pool's millisecond wheel ticks: a period is rounded up to whole milliseconds.
    /// On Linux a due time of 2 s or more is measured from the kernel's coarse clock and may fire up to one kernel tick
    /// plus 1 ms late, never early (see <see cref="WorkerPool.CreateTimer"/>).</remarks>
    public bool Change(TimeSpan dueTime, TimeSpan period)
    {
        long due = ToStopwatchTicks(dueTime, nameof(dueTime));
        long interval = ToStopwatchTicks(period, nameof(period));
        return Change(due, interval);
    }

    /// <summary>Stopwatch ticks; -1 for infinite.</summary>
    internal bool Change(long dueTicks, long periodTicks)
    {
        // The clock is read before the lock: the delay counts from the call. A long delay is placed with the coarse
        // clock (see CoarseClock): due from an upper bound of now, so never early, while the wheel catches up only to a
        // lower bound of now, so no other timer is pushed back.
        long now = 0, due = 0;
        if (dueTicks >= 0)
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
        lock (_pool.TimerLock)
        {
            if (IsDisposed || _pool.TimersStoppedLocked)
            {
                return false;
            }
            _pool.UnscheduleLocked(this);
            _periodMs = PeriodToMilliseconds(periodTicks);
            if (dueTicks < 0)
            {
                return true;
            }
            startThread = _pool.ScheduleLocked(this, due, now);
        }
        if (startThread)
        {
            _pool.StartTimerThread();
        }
        return true;
    }

    /// <summary>Cancels the timer. A firing that has not started yet never starts. Idempotent.</summary>
    public void Dispose()
    {
        lock (_pool.TimerLock)
        {
            Interlocked.Or(ref _flags, DisposedFlag);
            _pool.UnscheduleLocked(this);
        }
    }

    /// <summary>Same as <see cref="Dispose"/>; completes at once.</summary>
    public ValueTask DisposeAsync()
    {
        Dispose();
        return default;
    }

    /// <summary>
    /// Caller holds the timer lock, after the wheel expired this timer at tick <see cref="TimerNode.When"/>: schedules its
    /// next period, counted from the start of that tick (at or after the due time, so never early).
    /// </summary>
    internal void OnExpiredLocked(long nowTimestamp)
    {
        if (_periodMs != 0 && !IsDisposed)
        {
            long next = _pool.TickStart(When + _periodMs);
            if (next <= nowTimestamp)
            {
                next = nowTimestamp + _periodMs * WorkerPool.s_ticksPerWheelTick; // fell behind by a period or more: skip the missed firings
            }
            _pool.ScheduleLocked(this, next, nowTimestamp);
        }
    }

    /// <summary>Claims the right to queue a firing: false once disposed, or while a previous firing is still queued.</summary>
    internal bool TryMarkFirePending() =>
        Volatile.Read(ref _flags) == 0 && Interlocked.CompareExchange(ref _flags, FirePendingFlag, 0) == 0;

    internal WorkItemEntry CreateFireEntry() =>
        new(s_fire, this, (_callback as ContextualCallback)?.Context);

    private void Fire()
    {
        // Cleared before the callback: a firing that comes due while the callback runs is queued, as with Timer.
        int flags = Interlocked.And(ref _flags, ~FirePendingFlag);
        if ((flags & DisposedFlag) == 0)
        {
            TimerCallback callback = _callback as TimerCallback ?? ((ContextualCallback)_callback).Callback;
            callback(_state);
        }
    }

    /// <summary>The callback of a timer created where an ExecutionContext flows, with that context.</summary>
    private sealed class ContextualCallback(TimerCallback callback, ExecutionContext context)
    {
        public readonly TimerCallback Callback = callback;
        public readonly ExecutionContext Context = context;
    }

    /// <summary>A period in Stopwatch ticks (zero or negative: none) as whole wheel ticks (milliseconds), rounded up.</summary>
    private static uint PeriodToMilliseconds(long periodTicks)
    {
        if (periodTicks <= 0)
        {
            return 0;
        }
        long ms = (periodTicks + WorkerPool.s_ticksPerWheelTick - 1) / WorkerPool.s_ticksPerWheelTick;
        Debug.Assert(ms <= MaxMilliseconds, "Periods are validated to at most MaxMilliseconds.");
        return (uint)ms;
    }

    /// <summary>Converts a due time or period to Stopwatch ticks (-1: infinite), validating it as <see cref="Timer"/> does.</summary>
    internal static long ToStopwatchTicks(TimeSpan value, string paramName)
    {
        if (value == Timeout.InfiniteTimeSpan)
        {
            return -1;
        }
        if (value < TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(paramName, value, "The time must be non-negative or Timeout.InfiniteTimeSpan.");
        }
        if (value.Ticks > MaxMilliseconds * TimeSpan.TicksPerMillisecond)
        {
            throw new ArgumentOutOfRangeException(paramName, value, $"The time must be at most {MaxMilliseconds} ms.");
        }
        return TimeSpanTicksToStopwatchTicks(value.Ticks);
    }

    // Stopwatch ticks per TimeSpan tick when that is a whole number (100 on Linux, 1 where the frequency is 10 MHz).
    private static readonly long s_stopwatchTicksPerTimeSpanTick =
        Stopwatch.Frequency % TimeSpan.TicksPerSecond == 0 ? Stopwatch.Frequency / TimeSpan.TicksPerSecond : 0;

    /// <summary>Converts a non-negative TimeSpan tick count (at most about 49.7 days) to Stopwatch ticks, rounding down.</summary>
    internal static long TimeSpanTicksToStopwatchTicks(long ticks)
    {
        if (s_stopwatchTicksPerTimeSpanTick != 0)
        {
            return ticks * s_stopwatchTicksPerTimeSpanTick; // a multiplication, not a 128-bit division per timer
        }
        return ticks < long.MaxValue / Stopwatch.Frequency
            ? ticks * Stopwatch.Frequency / TimeSpan.TicksPerSecond
            : (long)((Int128)ticks * Stopwatch.Frequency / TimeSpan.TicksPerSecond);
    }

    /// <summary>The longest due time or period, as for <see cref="Timer"/>.</summary>
    internal const long MaxMilliseconds = 0xFFFFFFFE;
}
