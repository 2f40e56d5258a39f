using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Threading;

// The pool's lifetime, decided under the controller's lock because "stopped" means "no worker is left": the decision to
// add a worker and the decision to stop must exclude each other.
//
// Protocol:
// - BeginShutdown moves the scheduler's admission state from running to draining or cancelling (a cancelling call may
//   also upgrade a draining pool); the scheduler closes the global queue first. From then on every public enqueue
//   throws ObjectDisposedException: a global enqueue either claimed its slot before the close (and is drained) or sees
//   the close (and is rejected); a local enqueue checks the state, and if it raced the change its item sits in the ring
//   of a live worker that drains it.
// - Continuations are not new work: a Post to the pool's SynchronizationContext, a task queued to its TaskScheduler and
//   a timer firing belong to work the pool already accepted, and refusing them would crash the thread that completed
//   the awaited task or strand the awaiter. They are accepted onto the pool (global queue, TryAcceptBeforeStop) until
//   the pool has stopped, and after that run on the built-in ThreadPool (ItemRunner.RunElsewhere, counted).
// - Drain holds (_drainHolds) count work that has started and may still produce continuations: async Run items whose
//   task has not completed, and long-running items on dedicated threads. While a hold is out, idle workers park
//   instead of exiting, so that a continuation arriving during the drain still runs on the pool.
// - A worker exits when the pool is shutting down, no hold is out and it can see no work in any queue; a worker still
//   running an item drains its own ring before it can get there.
// - The pool stops (_stopped, under the lock) when shutdown has begun, no worker is left and no hold is out. Who makes
//   that transition (the last worker to exit, BeginShutdown of a pool without workers, a failed start, or the release of
//   the last hold) runs OnStopped: the urgent queue closes, the timer thread may exit, and _stoppedSource completes.
//   Anything a continuation put into the global queue before the stop is run by the last worker (on its way out) or by
//   the disposing thread; after the stop, continuations run elsewhere. Both sides decide under the lock, so nothing
//   falls between them.
internal sealed partial class ThreadController
{
    private int _drainHolds;                   // atomics; see the protocol
    private volatile bool _stopped;            // written under _lock, once
    // Completed by OnStopped; waited for by Shutdown (blocking) and ShutdownAsync (not). Continuations run
    // asynchronously, never on the thread that stops the pool (the last worker, on its way out).
    private readonly TaskCompletionSource _stoppedSource = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Whether the pool has stopped: no worker is left and every accepted item has run or was cancelled.</summary>
    public bool HasStopped => _stopped;

    /// <summary>Whether a drain hold is out.</summary>
    public bool HasDrainHolds => Volatile.Read(ref _drainHolds) != 0;

    // Shutdown calls that wait for the stop and then sweep what is left (atomics): while one waits, a thread that stops
    // the pool leaves the leftovers to it instead of handing them to the built-in pool, so that the call does not return
    // while they still run elsewhere. See EnterShutdownWait and HandOnLeftoversUnlessAShutdownCallWaits.
    private int _waitingShutdownCalls;

    /// <summary>A shutdown call begins waiting for the stop; it sweeps the leftovers once the pool has stopped.</summary>
    public void EnterShutdownWait() => Interlocked.Increment(ref _waitingShutdownCalls);

    /// <summary>
    /// A shutdown call stops waiting: after its sweep (<paramref name="swept"/>), or without one (an async wait
    /// cancelled). The last call to leave without a sweep hands on what a stop left to it (its decrement is a full fence
    /// before its read of the stop, against the stopping thread's fence before its read of the count).
    /// </summary>
    public void ExitShutdownWait(bool swept)
    {
        int left = Interlocked.Decrement(ref _waitingShutdownCalls);
        Debug.Assert(left >= 0, "Each call leaves the wait once.");
        if (!swept && left == 0 && _stopped && _scheduler.Sources.HasLeftovers)
        {
            _scheduler.RedirectLeftovers();
        }
    }

    /// <summary>
    /// This thread stopped the pool and is not a shutdown call that sweeps: hands the leftovers to the built-in pool
    /// unless a shutdown call waits, which sweeps them itself (see <see cref="ExitShutdownWait"/>).
    /// </summary>
    private void HandOnLeftoversUnlessAShutdownCallWaits()
    {
        Interlocked.MemoryBarrier(); // the stop's write before the read of the count (see ExitShutdownWait)
        if (Volatile.Read(ref _waitingShutdownCalls) == 0 && _scheduler.Sources.HasLeftovers)
        {
            _scheduler.RedirectLeftovers();
        }
    }

    /// <summary>For diagnostics: the drain holds out now.</summary>
    public int DrainHoldCount => Volatile.Read(ref _drainHolds);

    /// <summary>
    /// Begins shutdown in <paramref name="state"/> (draining or cancelling); does nothing when the pool is already at
    /// or past it. Wakes every parked worker so that each looks again and drains or exits.
    /// </summary>
    /// <returns>Whether this call moved the pool to <paramref name="state"/>.</returns>
    public bool BeginShutdown(int state)
    {
        bool stopped;
        bool first;
        lock (_lock)
        {
            first = !_scheduler.IsShutdownStarted;
            if (!_scheduler.Close(state))
            {
                return false;
            }
            // The state store must be visible before the hold count is read (TryStopLocked): a hold released meanwhile
            // either sees the new state (and tries the stop itself) or is seen released here.
            Interlocked.MemoryBarrier();
            _retryAt = 0; // a drain that needs a worker tries at once
            stopped = TryStopLocked();
        }
        if (first)
        {
            TraceShutdownStarted(state);
        }
        if (stopped)
        {
            OnStopped();
        }
        _idle.WakeAll();
        _monitor.Signal();
        return true;
    }

    // Orders the two shutdown events for a listener: ShutdownFinished is written only after ShutdownStarted, even when
    // a worker stops the pool between the close (under the lock) and the thread that closed it writing ShutdownStarted
    // (outside the lock, since a listener runs inline). 0: neither written; 1: Started written; 2: the stop came first
    // and left Finished to the thread that writes Started.
    private int _shutdownTrace;

    private void TraceShutdownStarted(int state)
    {
        if (SpindleEventSource.Log.IsOn(EventLevel.Informational, SpindleEventSource.Keywords.Lifetime))
        {
            SpindleEventSource.Log.ShutdownStarted(_pool.Name,
                (state == Scheduler.StateCancelling ? ShutdownMode.CancelPending : ShutdownMode.Drain).ToString());
        }
        if (Interlocked.Exchange(ref _shutdownTrace, 1) == 2)
        {
            TraceShutdownFinished();
        }
    }

    private void TraceShutdownFinished()
    {
        if (SpindleEventSource.Log.IsOn(EventLevel.Informational, SpindleEventSource.Keywords.Lifetime))
        {
            SpindleEventSource.Log.ShutdownFinished(_pool.Name, _pool.CompletedWorkItemCount, _pool.CancelledWorkItemCount, _pool.RedirectedCallbackCount);
        }
    }

    /// <summary>
    /// Caller holds the lock: makes the pool stopped if shutdown has begun, no worker is left and no drain hold is out.
    /// Returns whether this call made the transition (the caller then calls <see cref="OnStopped"/> after releasing the
    /// lock).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private bool TryStopLocked()
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        if (_stopped || !_scheduler.IsShutdownStarted || _roster.Count != 0 || Volatile.Read(ref _drainHolds) != 0)
        {
            return false;
        }
        _stopped = true;
        return true;
    }

    /// <summary>The pool has just stopped: timer firings from now on run elsewhere, and waiting shutdown calls return.</summary>
    private void OnStopped()
    {
        Debug.Assert(_stopped);
        _scheduler.Urgent.Close();
        _scheduler.Lanes.OnPoolStopped();
        _timers.ReleaseThreadAfterStop();
        _pool.OnIoStopped();
        _pool.Metrics.Dispose();
        if (Interlocked.CompareExchange(ref _shutdownTrace, 2, 0) != 0)
        {
            TraceShutdownFinished(); // Started is written: Finished follows it
        }
        _stoppedSource.TrySetResult();
    }

    /// <summary>
    /// Waits for the stop. While waiting, sees that whatever sits in the queues with no worker to run it runs (see
    /// <see cref="RunLeftoversWithoutWorkers"/>), so that a drain hold waiting on such an item cannot wait forever.
    /// </summary>
    public void WaitUntilStopped()
    {
        while (!_stoppedSource.Task.Wait(10))
        {
            RunLeftoversWithoutWorkers();
        }
    }

    /// <summary>
    /// A waiting shutdown call's look: when work is queued and the pool has no worker, starts one for it, and runs the
    /// work on the calling thread only when the pool cannot (thread creation failing, or backing off after a failure).
    /// Returns whether it found such work.
    /// </summary>
    /// <remarks>
    /// A pool starts its workers on demand, so a pool whose only work was a long-running item has none while it drains.
    /// A continuation that item posts is queued first and starts a worker just after (the enqueue's wake): a look that
    /// fell between the two and ran the continuation here ran it off the pool's threads, where
    /// <c>WorkerPool.Current</c> is null. Asking for a worker first keeps it on the pool; the count is read again
    /// after a refusal, because the refusal may mean that the enqueue's own worker got there first.
    /// </remarks>
    private bool RunLeftoversWithoutWorkers()
    {
        if (_roster.Count != 0 || !_scheduler.Sources.HasLeftovers)
        {
            return false;
        }
        bool added;
        t_sweepsAfterStop = true; // a refusal that stops the pool leaves the leftovers to this caller (see TryAddWorker)
        try
        {
            added = TryAddWorker(ThreadInjectionReason.Demand);
        }
        finally
        {
            t_sweepsAfterStop = false;
        }
        if (!added && _roster.Count == 0)
        {
            _scheduler.SweepLeftovers();
        }
        return true;
    }

    /// <summary>
    /// Whether the calling thread is a waiting shutdown call asking for a worker (<see cref="RunLeftoversWithoutWorkers"/>),
    /// which runs what is left itself if the pool stops instead.
    /// </summary>
    [ThreadStatic]
    private static bool t_sweepsAfterStop;

    /// <summary>
    /// Like <see cref="WaitUntilStopped"/> without blocking a thread: completes when the pool has stopped, or is
    /// cancelled by <paramref name="cancellationToken"/>. Looks for work no worker exists to run after 10 ms, and
    /// then at intervals that double up to 160 ms, so that a wait for an item that never ends (a host that gave up on
    /// it finishes its shutdown in the background) costs a few looks a second, not a hundred.
    /// </summary>
    public async Task WaitUntilStoppedAsync(CancellationToken cancellationToken)
    {
        Task stopped = _stoppedSource.Task;
        int intervalMs = 10;
        while (!stopped.IsCompleted)
        {
            try
            {
                await stopped.WaitAsync(TimeSpan.FromMilliseconds(intervalMs), cancellationToken).ConfigureAwait(false);
            }
            catch (TimeoutException)
            {
                intervalMs = Math.Min(intervalMs * 2, 160);
                if (RunLeftoversWithoutWorkers())
                {
                    intervalMs = 10; // what ran may queue more (an async chain's next step): look again soon
                }
            }
        }
    }

    /// <summary>
    /// Takes a drain hold: work that has started and may still produce continuations (an async Run item's task, a
    /// long-running item). While a hold is out, a shutting-down pool keeps its workers (parked) instead of stopping.
    /// </summary>
    public void AcquireDrainHold() => Interlocked.Increment(ref _drainHolds);

    /// <summary>Releases a hold taken with <see cref="AcquireDrainHold"/>; the last one lets a shutting-down pool stop.</summary>
    public void ReleaseDrainHold()
    {
        int left = Interlocked.Decrement(ref _drainHolds); // a full fence before the read of the admission state
        Debug.Assert(left >= 0);
        if (left != 0 || !_scheduler.IsShutdownStarted)
        {
            return;
        }
        _idle.WakeAll(); // parked workers look again and exit (see IdleCoordinator.Park)
        bool stopped;
        lock (_lock)
        {
            stopped = TryStopLocked();
        }
        if (stopped)
        {
            OnStopped();
            // No worker was left to run what is queued (thread creation failed) and this thread is not the pool's: hand
            // it on, unless a shutdown call waits to sweep it.
            HandOnLeftoversUnlessAShutdownCallWaits();
        }
    }

    /// <summary>
    /// Whether a worker of a shutting-down pool may exit: no drain hold is out and no queue holds work but fired timers.
    /// True counts the caller as on its way out (see <see cref="RefusesWhileWindingDownLocked"/>) until
    /// <see cref="OnWorkerExited"/>: the caller exits.
    /// </summary>
    /// <remarks>
    /// Fired timers do not keep the pool: periodic timers fire for as long as they exist, and enough of them (or a
    /// pool too small or too starved of CPU for them) would keep every worker busy and the drain from ever ending. What
    /// the timers fire while the pool still has accepted work, or a drain hold, runs on the pool; once only firings are
    /// left, the workers leave, the last one out runs those still queued (the leftover sweep), and later ones run on the
    /// built-in pool, as after any stop.
    /// </remarks>
    public bool TryExitForShutdown(Worker worker)
    {
        Debug.Assert(worker.IsCurrentThread);
        if (Volatile.Read(ref _drainHolds) != 0 || _scheduler.Sources.AnyWorkVisibleBesidesTimers())
        {
            return false;
        }
        lock (_lock)
        {
            _windingDown = true;
            _leavingWorkers.Add(worker);
        }
        return true;
    }

    /// <summary>
    /// Whether a new worker must not start because the shutting-down pool is winding down. Caller holds the lock.
    /// </summary>
    /// <remarks>
    /// <para>Work keeps arriving during a drain that is not accepted work: a periodic timer's firings, continuations. Were
    /// each such arrival that finds no worker free to start one (a demand) or that waits while the only workers are on
    /// their way out (the stall monitor's starvation), a worker on its way out (its stop hook, the lock, a busy core)
    /// would often have a successor before it left, the successor would do the same, and the pool would never be
    /// without a worker, which is when it stops: the drain would not end.</para>
    /// <para>So once some worker has exited for lack of work (winding down), a demand is met by the workers still
    /// counted, and while one is on its way out, nothing starts a worker at all. A worker still counted either runs an
    /// item and looks at the queues after it, or is parked and is woken (a wake prefers the idle stack), or is on its way
    /// out: it looks once more after leaving the list and wakes a parked one, and the last one out stops the pool and
    /// runs what is left (OnWorkerExited). With no worker counted (every one exited while a drain hold was out), a
    /// demand starts one as before; with none on its way out, a worker blocked in an item gets the stall monitor's
    /// help as while running.</para>
    /// </remarks>
    private bool RefusesWhileWindingDownLocked(ThreadInjectionReason reason)
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        return _windingDown && ((reason == ThreadInjectionReason.Demand && _roster.Count != 0) || _leavingWorkers.Count != 0);
    }

    // Under _lock. _windingDown: set once, by the first worker that exits a shutting-down pool for lack of work.
    // _leavingWorkers: workers between that decision (TryExitForShutdown) and leaving the list (OnWorkerExited).
    private bool _windingDown;
    private readonly List<Worker> _leavingWorkers = [];

    /// <summary>
    /// A continuation arrived while the pool is shutting down: queues it through <paramref name="scheduler"/> if the
    /// pool has not stopped (whoever stops it runs what is queued), else returns false (it runs elsewhere).
    /// </summary>
    public bool TryAcceptBeforeStop(Scheduler scheduler, in WorkItemEntry entry)
    {
        lock (_lock)
        {
            if (_stopped)
            {
                return false;
            }
            scheduler.EnqueueWhileDrainingLocked(entry);
            return true;
        }
    }

    /// <summary>Retired and exited workers' threads that may still be running (shutdown joins them).</summary>
    public Thread[] SnapshotRetiredThreads()
    {
        lock (_lock)
        {
            Debug.Assert(!_stopped || _roster.Workers.Length == 0, "A stopped pool lists no worker.");
            return [.. _retiredThreads];
        }
    }

    /// <summary>Shutdown has waited for the stop: wakes the stall monitor to exit and returns its thread (null if none).</summary>
    public Thread? ReleaseMonitor() => _monitor.Release();
}
