using System;
using System.Diagnostics;
using System.Threading;
using System.Runtime.CompilerServices;
using Spindle.Primitives;

namespace Spindle.Threading;

/// <summary>
/// Refused workers: the OS would not start a thread (a cgroup's pids.max, RLIMIT_NPROC, memory for a stack). A refusal
/// is an ordinary event, not an error: the pool stops growing, backs off, and retries later.
/// </summary>
/// <remarks>
/// <para>Protocol. Under the controller's lock a refusal raises the streak and sets <see cref="_retryAt"/> to now plus
/// 1 ms doubling to 256 ms; until then <see cref="TryAddWorker(ThreadInjectionReason)"/> refuses at once, whoever asks
/// (an enqueue, a ramp, the monitor). A success clears both. Someone must ask again after the deadline even when no
/// further enqueue comes: the stall monitor does (<see cref="RetryCreationIfDue"/>, each tick, and it is not quiet while
/// a retry is pending). The refusal arms it. If the monitor has no thread either (the OS refused it too), the built-in
/// timer retries when the process has timers already, or when the pool has no worker at all. The runtime starts its
/// timer thread with the first timer, and a process at its thread limit aborts when that start fails, so this path asks
/// for it only where nothing else would ever retry: with no worker and no monitor, queued items would otherwise wait
/// for the next enqueue, which may never come. Failing all of that, the next enqueue after the deadline retries, and a
/// shutdown runs what is left on the disposing thread.</para>
/// <para>No built-in thread-pool thread or timer is needed otherwise: at a thread limit those are refused too.</para>
/// </remarks>
internal sealed partial class ThreadController
{
    /// <summary>Whether a refusal's deadline has not passed (caller holds the lock).</summary>
    private bool InBackoffLocked() => _retryAt != 0 && Stopwatch.GetTimestamp() < _retryAt;

    /// <summary>Whether a refused worker waits for its retry (read by the monitor without the lock; a stale answer costs a tick).</summary>
    public bool CreationRetryPending => Volatile.Read(ref _retryAt) != 0;

    /// <summary>Records a refusal's backoff (caller holds the lock): 1, 2, 4 ... 256 ms from now.</summary>
    private void BackOffLocked()
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        _creationFailures++;
        int delayMs = 1 << Math.Min(_creationFailures - 1, 8);
        Volatile.Write(ref _retryAt, Math.Max(1, Stopwatch.GetTimestamp() + delayMs * Stopwatch.Frequency / 1000));
    }

    /// <summary>The reasons' names, by value (they are declared without values, so in order from zero).</summary>
    private static readonly string[] s_reasonNames = Enum.GetNames<ThreadInjectionReason>();

    /// <summary>
    /// The name of <paramref name="reason"/> for traces, without <see cref="Enum.ToString()"/>'s allocation on every thread
    /// start (whose code the runtime recompiles mid-burst once a burst has started thirty threads).
    /// </summary>
    private static string NameOf(ThreadInjectionReason reason)
    {
        Debug.Assert(s_reasonNames[(int)reason] == reason.ToString(), "the reasons are declared in order from zero");
        return s_reasonNames[(int)reason];
    }

    /// <summary>
    /// Outside the lock, after a refused worker for <paramref name="reason"/> (<paramref name="counted"/>: the start
    /// counted it already): counts and traces it, and makes sure someone retries (see the remarks).
    /// </summary>
    private void OnRefused(ThreadInjectionReason reason, bool counted)
    {
        if (!counted)
        {
            _starts.RecordFailure(PoolThreadKind.Worker, NameOf(reason));
        }
        if (_scheduler.IsShutdownStarted)
        {
            return;
        }
        _monitor.EnsureMonitor();
        if (!_monitor.HasThread && (Timer.ActiveCount > 0 || _roster.Count == 0))
        {
            ScheduleBuiltInRetry();
        }
    }

    private void ScheduleBuiltInRetry()
    {
        long waitTicks = Volatile.Read(ref _retryAt) - Stopwatch.GetTimestamp();
        int delayMs = (int)Math.Clamp(waitTicks * 1000 / Stopwatch.Frequency + 1, 1, 1000);
        try
        {
            // One-shot, held by _builtInRetry until it fires: a Timer nobody references may be collected before it
            // fires: its finalizer cancels it. A retry already armed is replaced.
            var timer = new Timer(static state => ((ThreadController)state!).RetryFromBuiltInTimer(), this, Timeout.Infinite, Timeout.Infinite);
            Interlocked.Exchange(ref _builtInRetry, timer)?.Dispose();
            timer.Change(delayMs, Timeout.Infinite);
        }
        catch (Exception)
        {
            // No timer either: the next enqueue after the deadline retries.
        }
    }

    // The built-in timer's pending retry (see ScheduleBuiltInRetry); null when none is armed.
    private Timer? _builtInRetry;

    private void RetryFromBuiltInTimer()
    {
        Interlocked.Exchange(ref _builtInRetry, null)?.Dispose();
        if (_scheduler.IsShutdownStarted || !_scheduler.Sources.AnyWorkVisible())
        {
            return;
        }
        long retryAt = Volatile.Read(ref _retryAt);
        if (retryAt != 0 && Stopwatch.GetTimestamp() < retryAt)
        {
            // The timer's clock is not the Stopwatch's: it may fire a little before the deadline, and nobody else retries.
            ScheduleBuiltInRetry();
            return;
        }
        RetryCreationIfDue();
    }

    /// <summary>
    /// Called by the stall monitor each tick: once a refusal's deadline has passed, brings the pool back to its minimum
    /// (a refused start may have been one of the minimum's: one that raising it made, or one whose listing let an idle
    /// worker retire while the start was in flight) and adds a worker if work waits that no idle worker can take; then
    /// forgets the deadline (the streak stays, so the next refusal backs off longer).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public void RetryCreationIfDue()
    {
        long retryAt = Volatile.Read(ref _retryAt);
        if (retryAt == 0 || Stopwatch.GetTimestamp() < retryAt)
        {
            return;
        }
        if (!_scheduler.IsShutdownStarted)
        {
            // Refused again: a new deadline, kept below, and the loop ends.
            while (_roster.Count < MinThreads && TryAddWorker(ThreadInjectionReason.MinimumRaised))
            {
            }
        }
        if (_scheduler.Sources.AnyWorkVisible() && !_scheduler.IsShutdownStarted)
        {
            if (_idle.IdleCount != 0)
            {
                _idle.WakeWorkerIfNeeded();
            }
            else
            {
                TryAddWorker(ThreadInjectionReason.Demand); // refused again: a new deadline, kept below
            }
        }
        lock (_lock)
        {
            if (_retryAt == retryAt)
            {
                Volatile.Write(ref _retryAt, 0);
            }
        }
    }
}
