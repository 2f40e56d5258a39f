using System;
using System.Diagnostics;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;

namespace Spindle.Timers;

/// <summary>
/// A timer of a <see cref="WorkerPool"/> (returned as <see cref="ITimer"/> by <see cref="WorkerPool.CreateTimer"/> and
/// by the pool's <see cref="WorkerPool.TimeProvider"/>): one object, an entry of the pool's timing wheel.
/// </summary>
/// <remarks>
/// <para>Kept small (64 bytes on 64-bit, with the wheel links), because a server keeps one per outstanding timeout, each
/// one is fresh memory to the allocator and the collector copies every one that survives a gen0 collection: no due
/// timestamp (a periodic timer's next firing is computed from the wheel tick it fired in), the due tick, the wheel slot
/// and the two flags in one word (<see cref="TimerNode"/>), and the ready list outside the object. What only some
/// timers need, a period or an ExecutionContext with values, lives in a companion object that takes the callback's
/// place (<see cref="Companion"/>).</para>
/// <para>Protocol (see also WorkerPool.Timers.cs and TimerNode): the wheel fields and <see cref="_callback"/> are written
/// under the pool's timer lock. <see cref="DisposedFlag"/> is set by <see cref="Dispose"/> (under the lock) and read
/// without the lock by <see cref="Fire"/>, so a firing already queued when the timer is disposed does nothing, and once
/// <see cref="Dispose"/> returns no callback starts (one that had started may still be running).
/// <see cref="FirePendingFlag"/> is set by whoever expires the timer (under the lock) and cleared by the worker just
/// before the callback runs, without the lock: the one write to the word that TimerNode allows outside it.</para>
/// </remarks>
internal sealed class PoolTimer : TimerNode, ITimer
{
    private const long FirePendingFlag = OwnerFlagA;
    private const long DisposedFlag = OwnerFlagB;

    private static readonly Action<object?> s_fire = static timer => ((PoolTimer)timer!).Fire();

    private readonly WorkerPool _pool;
    private object _callback; // the TimerCallback, or a Companion when the timer is periodic or an ExecutionContext flows
    private readonly object? _state;

    internal PoolTimer(WorkerPool pool, TimerCallback callback, object? state, ExecutionContext? context)
    {
        _pool = pool;
        // The default context (no AsyncLocal values) is what a worker runs in between items: it needs no companion.
        _callback = context is null || WorkerPool.IsDefaultContext(context) ? callback : new Companion(callback, context, 0);
        _state = state;
    }

    private bool IsDisposed => (ReadWord() & DisposedFlag) != 0;

    /// <summary>The period in whole milliseconds (0: one-shot). Read under the timer lock.</summary>
    private uint PeriodMilliseconds => (_callback as Companion)?.PeriodMs ?? 0;

    /// <summary>
    /// Restarts the timer: first firing after <paramref name="dueTime"/> (<see cref="Timeout.InfiniteTimeSpan"/> stops
    /// it), then every <paramref name="period"/> (<see cref="Timeout.InfiniteTimeSpan"/> or zero: once). A firing already
    /// queued still runs. Returns false, changing nothing, once the timer or its pool has been disposed.
    /// </summary>
    /// <remarks>Periodic firings fall on the pool's millisecond wheel ticks: a period is rounded up to whole milliseconds.
    /// On Linux a long due time (about 4 s or more) is measured from the kernel's coarse clock and may fire up to about
    /// 21 ms late, never early (see <see cref="WorkerPool.CreateTimer"/>).</remarks>
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
            SetPeriodLocked(PeriodToMilliseconds(periodTicks));
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
            SetOwnerFlagsLocked(DisposedFlag);
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
        uint periodMs = PeriodMilliseconds;
        if (periodMs != 0 && !IsDisposed)
        {
            long next = _pool.TickStart(When + periodMs);
            if (next <= nowTimestamp)
            {
                next = nowTimestamp + periodMs * WorkerPool.s_ticksPerWheelTick; // fell behind by a period or more: skip the missed firings
            }
            _pool.ScheduleLocked(this, next, nowTimestamp);
        }
    }

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

    internal WorkItemEntry CreateFireEntry() =>
        new(s_fire, this, (Volatile.Read(ref _callback) as Companion)?.Context);

    private void Fire()
    {
        // Cleared before the callback: a firing that comes due while the callback runs is queued, as with Timer.
        long word = ClearOwnerFlagAtomically();
        if ((word & DisposedFlag) == 0)
        {
            object callback = Volatile.Read(ref _callback);
            (callback as TimerCallback ?? ((Companion)callback).Callback)(_state);
        }
    }

    /// <summary>Caller holds the timer lock: records the period, replacing the companion only when it changes.</summary>
    private void SetPeriodLocked(uint periodMs)
    {
        object callback = _callback;
        var companion = callback as Companion;
        if ((companion?.PeriodMs ?? 0) == periodMs)
        {
            return;
        }
        TimerCallback target = companion?.Callback ?? (TimerCallback)callback;
        ExecutionContext? context = companion?.Context;
        // A worker may be reading the field (Fire, CreateFireEntry): either object gives the same callback and context.
        Volatile.Write(ref _callback, periodMs == 0 && context is null ? target : new Companion(target, context, periodMs));
    }

    /// <summary>
    /// What only some timers need, kept out of the timer object: the period of a periodic timer, and the
    /// ExecutionContext of one created where AsyncLocal values flow. Immutable; replaced when the period changes.
    /// </summary>
    private sealed class Companion(TimerCallback callback, ExecutionContext? context, uint periodMs)
    {
        public readonly TimerCallback Callback = callback;
        public readonly ExecutionContext? Context = context;
        public readonly uint PeriodMs = periodMs;
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
    /// <remarks>Small enough to inline: the throwing paths live in <see cref="ThrowOutOfRange"/>, so the hot path has no
    /// frame to set up for them.</remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    internal static long ToStopwatchTicks(TimeSpan value, string paramName)
    {
        long ticks = value.Ticks;
        if ((ulong)ticks <= MaxMilliseconds * TimeSpan.TicksPerMillisecond)
        {
            return TimeSpanTicksToStopwatchTicks(ticks);
        }
        if (value == Timeout.InfiniteTimeSpan)
        {
            return -1;
        }
        ThrowOutOfRange(value, paramName);
        return 0;
    }

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowOutOfRange(TimeSpan value, string paramName) =>
        throw new ArgumentOutOfRangeException(paramName, value, value < TimeSpan.Zero
            ? "The time must be non-negative or Timeout.InfiniteTimeSpan."
            : $"The time must be at most {MaxMilliseconds} ms.");

    // Stopwatch ticks per TimeSpan tick when that is a whole number (100 on Linux, 1 where the frequency is 10 MHz).
    private static readonly long s_stopwatchTicksPerTimeSpanTick =
        Stopwatch.Frequency % TimeSpan.TicksPerSecond == 0 ? Stopwatch.Frequency / TimeSpan.TicksPerSecond : 0;

    /// <summary>Converts a non-negative TimeSpan tick count (at most about 49.7 days) to Stopwatch ticks, rounding down.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    internal static long TimeSpanTicksToStopwatchTicks(long ticks) =>
        s_stopwatchTicksPerTimeSpanTick != 0
            ? ticks * s_stopwatchTicksPerTimeSpanTick // a multiplication, not a 128-bit division per timer
            : ScaleTimeSpanTicks(ticks);

    /// <summary>
    /// Converts a non-negative TimeSpan tick count (at most about 49.7 days) to Stopwatch ticks, rounding up: a delay
    /// measured with the result is never shorter than the TimeSpan (the same as the rounding-down conversion wherever a
    /// TimeSpan tick is a whole number of Stopwatch ticks, as on Linux and Windows).
    /// </summary>
    internal static long TimeSpanTicksToStopwatchTicksRoundedUp(long ticks)
    {
        if (s_stopwatchTicksPerTimeSpanTick != 0)
        {
            return ticks * s_stopwatchTicksPerTimeSpanTick;
        }
        Int128 scaled = (Int128)ticks * Stopwatch.Frequency;
        return (long)((scaled + TimeSpan.TicksPerSecond - 1) / TimeSpan.TicksPerSecond);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static long ScaleTimeSpanTicks(long ticks) =>
        ticks < long.MaxValue / Stopwatch.Frequency
            ? ticks * Stopwatch.Frequency / TimeSpan.TicksPerSecond
            : (long)((Int128)ticks * Stopwatch.Frequency / TimeSpan.TicksPerSecond);

    /// <summary>The longest due time or period, as for <see cref="Timer"/>.</summary>
    internal const long MaxMilliseconds = 0xFFFFFFFE;
}
