using System;
using System.Threading;
using Spindle.Timers;

namespace Spindle;

// Timers (the public surface; the timing wheel and its thread are Timers/TimerService.cs).
public sealed partial class WorkerPool
{
    /// <summary>
    /// A <see cref="System.TimeProvider"/> whose timers are this pool's: <see cref="System.TimeProvider.CreateTimer"/>
    /// schedules on the pool's timing wheel and runs callbacks on the pool's workers. Time itself (UTC now, time zone,
    /// timestamps) is the system's. Pass it to code written against <see cref="System.TimeProvider"/>
    /// (<c>Task.Delay(TimeSpan, TimeProvider)</c>, <c>new CancellationTokenSource(TimeSpan, TimeProvider)</c>, …).
    /// </summary>
    public TimeProvider TimeProvider =>
        Volatile.Read(ref _timeProvider) ?? Interlocked.CompareExchange(ref _timeProvider, new WorkerPoolTimeProvider(this), null) ?? _timeProvider!;

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
    /// stopped (start it with <see cref="ITimer.Change(TimeSpan, TimeSpan)"/>); the pool's timer thread starts at once
    /// then, so that the first firing does not wait for a new thread's first time slice.</param>
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
    /// <para>A scheduled timer needs the pool's timer thread, which starts with the first timer. If it cannot be started
    /// (the system refuses a thread), a call that would schedule a timer throws what the thread start threw, and nothing
    /// is scheduled: this method with a finite <paramref name="dueTime"/> creates no timer, and
    /// <see cref="ITimer.Change(TimeSpan, TimeSpan)"/> leaves the timer as it was.</para>
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
        var timer = new PoolTimer(_timers, callback, state, CaptureContext());
        // The threads a firing needs exist from now on: the timer thread (also for a timer created unscheduled, to be
        // started by a later Change) and one worker. Created at the first firing instead, while every core is busy, a
        // new thread waits for its first time slice behind every runnable thread: about 100 ms with ten spinning
        // long-running items on two cores, and the firing waited with it. An idle worker is parked and costs nothing.
        // They are started before the due time starts counting: each start waits for the new thread to run, which
        // on a loaded machine can take longer than a short due time, and the timer would then fire before this call
        // returned, too early for a caller that disposes it at once.
        _timers.EnsureTimerThread();
        if (_threads.ThreadCount == 0)
        {
            _threads.TryAddWorker(ThreadInjectionReason.Demand);
        }
        timer.Change(due, interval);
        return timer;
    }

    /// <summary>Timers scheduled on the wheel right now (a snapshot, for diagnostics).</summary>
    public int ScheduledTimerCount => _timers.ScheduledCount;

    /// <summary>Whether the pool's timer thread exists (it starts with the first timer; tests and diagnostics).</summary>
    internal bool HasTimerThread => _timers.HasTimerThread;

    /// <summary>Whether the pool's timer thread is running (tests: shutdown joins it).</summary>
    internal bool TimerThreadIsAlive => _timers.TimerThreadIsAlive;
}
