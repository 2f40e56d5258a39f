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
/// Protocol (see also WorkerPool.Timers.cs): the wheel links, <see cref="_dueTimestamp"/>, <see cref="_period"/> and
/// <see cref="_disposed"/> are written under the pool's timer lock. <see cref="_disposed"/> is also read without the
/// lock by <see cref="Fire"/>: a firing already queued when the timer is disposed sees the flag and does nothing, so
/// once <see cref="Dispose"/> returns no callback starts (one that had started may still be running).
/// </remarks>
internal sealed class PoolTimer : TimerNode, ITimer
{
    private static readonly Action<object?> s_fire = static timer => ((PoolTimer)timer!).Fire();

    private readonly WorkerPool _pool;
    private readonly TimerCallback _callback;
    private readonly object? _state;
    private readonly ExecutionContext? _context;
    private long _dueTimestamp;
    private long _period;
    private volatile bool _disposed;
    private int _firePending;

    /// <summary>The next timer of the pool's ready list (guarded by the pool's ready-list lock).</summary>
    internal PoolTimer? NextReady;

    internal PoolTimer(WorkerPool pool, TimerCallback callback, object? state, ExecutionContext? context)
    {
        _pool = pool;
        _callback = callback;
        _state = state;
        _context = context;
    }

    /// <summary>
    /// Restarts the timer: first firing after <paramref name="dueTime"/> (<see cref="Timeout.InfiniteTimeSpan"/> stops
    /// it), then every <paramref name="period"/> (<see cref="Timeout.InfiniteTimeSpan"/> or zero: once). A firing already
    /// queued still runs. Returns false, changing nothing, once the timer or its pool has been disposed.
    /// </summary>
    public bool Change(TimeSpan dueTime, TimeSpan period)
    {
        long due = ToStopwatchTicks(dueTime, nameof(dueTime));
        long interval = ToStopwatchTicks(period, nameof(period));
        return Change(due, interval);
    }

    /// <summary>Stopwatch ticks; -1 for infinite.</summary>
    internal bool Change(long dueTicks, long periodTicks)
    {
        bool startThread;
        lock (_pool.TimerLock)
        {
            if (_disposed || _pool.TimersStoppedLocked)
            {
                return false;
            }
            _pool.UnscheduleLocked(this);
            _period = periodTicks > 0 ? periodTicks : 0;
            if (dueTicks < 0)
            {
                return true;
            }
            long now = Stopwatch.GetTimestamp();
            _dueTimestamp = now + dueTicks;
            startThread = _pool.ScheduleLocked(this, _dueTimestamp, now);
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
            _disposed = true;
            _pool.UnscheduleLocked(this);
        }
    }

    /// <summary>Same as <see cref="Dispose"/>; completes at once.</summary>
    public ValueTask DisposeAsync()
    {
        Dispose();
        return default;
    }

    /// <summary>Timer thread, under the timer lock, after the wheel expired this timer: schedules its next period.</summary>
    internal void OnExpiredLocked(long nowTimestamp)
    {
        if (_period > 0 && !_disposed)
        {
            long next = _dueTimestamp + _period;
            if (next <= nowTimestamp)
            {
                next = nowTimestamp + _period; // fell behind by a period or more: skip the missed firings
            }
            _dueTimestamp = next;
            _pool.ScheduleLocked(this, next, nowTimestamp);
        }
    }

    /// <summary>Timer thread: claims the right to queue a firing (false while a previous firing is still queued).</summary>
    internal bool TryMarkFirePending() => !_disposed && Interlocked.Exchange(ref _firePending, 1) == 0;

    internal WorkItemEntry CreateFireEntry() => new(s_fire, this, _context);

    private void Fire()
    {
        // Cleared before the callback: a firing that comes due while the callback runs is queued, as with Timer.
        Volatile.Write(ref _firePending, 0);
        if (!_disposed)
        {
            _callback(_state);
        }
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
        if (value.TotalMilliseconds > MaxMilliseconds)
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
