using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle;

// Shutdown: the public surface and the orchestration. The lifetime protocol (drain holds, the stop, continuations
// across the stop) is the thread controller's (Threading/ThreadController.Lifetime.cs); the leftover sweep is the
// scheduler's.
public sealed partial class WorkerPool
{
    /// <summary>
    /// Callbacks that arrived after this pool had stopped and therefore ran on the built-in <see cref="ThreadPool"/>:
    /// posts to <see cref="SynchronizationContext"/>, tasks queued to <see cref="TaskScheduler"/> (continuations and new
    /// tasks alike: neither can tell them apart, and refusing a continuation would strand its awaiter), firings of this
    /// pool's timers that were still scheduled, and lane items the stop left behind. Counted when each starts there (a
    /// firing of a timer disposed before it started does nothing and is not counted); each is also reported by the
    /// <c>Spindle</c> event source's <c>CallbackRedirected</c> warning (keyword <c>Lifetime</c>), which names the item.
    /// See <see cref="Shutdown(ShutdownMode)"/>.
    /// </summary>
    public long RedirectedCallbackCount => _runner.RedirectedCount;

    /// <summary>
    /// Stops accepting work, runs every item already accepted, and waits for the workers to exit. Idempotent. Called
    /// from one of this pool's own work items it does not wait for the workers (which would deadlock): it returns at
    /// once and the workers finish the accepted items and exit on their own. See <see cref="Shutdown(ShutdownMode)"/>.
    /// </summary>
    /// <remarks>
    /// A pool whose host gave up waiting for its shutdown (the <c>Spindle.Extensions.Hosting</c> package, once the host's
    /// shutdown timeout has fired) does not wait here either: the items it left running finish on their own, and
    /// <see cref="Shutdown(ShutdownMode)"/> and <see cref="ShutdownAsync(ShutdownMode, CancellationToken)"/> still wait
    /// for them.
    /// </remarks>
    public void Dispose()
    {
        if (Volatile.Read(ref _unwatchedFinish) is not null)
        {
            BeginShutdown(ShutdownMode.Drain); // keeps "stops accepting work" true; nothing changes if shutdown has begun
            return;
        }
        Shutdown(ShutdownMode.Drain);
    }

    /// <summary>
    /// Like <see cref="Dispose"/>, but waits for the pool to stop without blocking a thread:
    /// <c>ShutdownAsync(ShutdownMode.Drain)</c>.
    /// </summary>
    public ValueTask DisposeAsync()
    {
        if (Volatile.Read(ref _unwatchedFinish) is not null)
        {
            BeginShutdown(ShutdownMode.Drain);
            return ValueTask.CompletedTask;
        }
        return new(ShutdownAsync(ShutdownMode.Drain));
    }

    /// <summary>
    /// The caller has begun the shutdown (asserted). From now on <see cref="Dispose"/> and <see cref="DisposeAsync"/> do not wait for
    /// the pool to stop, and the pool finishes its shutdown in the background instead. For an owner that bounded its
    /// wait for the shutdown, gave up, and cannot keep a container it does not control from disposing the pool later:
    /// <c>Spindle.Extensions.Hosting</c>, whose service provider disposes every pool it created, calls it when the
    /// host's shutdown timeout ends the pool's stop. Idempotent and irreversible.
    /// </summary>
    internal void LeaveRunningItemsOnDispose()
    {
        Debug.Assert(IsShutdownStarted);
        // Published before it starts, by one CAS that picks the only finisher: whoever reads it set (Dispose,
        // DisposeAsync, a ShutdownAsync that finds the pool stopped) sees the finisher it is to leave the work to or
        // wait for.
        var finish = new Task<Task>(FinishShutdownUnwatchedAsync);
        if (Interlocked.CompareExchange(ref _unwatchedFinish, finish, null) is null)
        {
            // Started elsewhere: if the pool has stopped already, the finisher would otherwise sweep leftovers (run user
            // items) on the owner's thread, inside its stop.
            finish.Start(System.Threading.Tasks.TaskScheduler.Default);
        }
    }

    /// <summary>Whether <see cref="LeaveRunningItemsOnDispose"/> was called: disposal then does not wait (the pool's lanes' neither).</summary>
    internal bool LeavesRunningItemsOnDispose => Volatile.Read(ref _unwatchedFinish) is not null;

    // The background finisher made by LeaveRunningItemsOnDispose (null until then; set once, by CAS; the owner sets it
    // on its thread, and a container disposes the pool on another). Set, it tells Dispose and DisposeAsync not to wait.
    // An explicit Shutdown or ShutdownAsync waits for it after the pool has stopped, so that it does not return while
    // the finisher still releases threads or runs leftovers (see UnwatchedFinishToWaitFor).
    private Task<Task>? _unwatchedFinish;

    /// <summary>
    /// The background finisher, if there is one and the calling thread may wait for it, once the pool has stopped; with
    /// <paramref name="threads"/>, the threads the caller is about to wait for (see <see cref="ReleaseThreadsAfterStop"/>).
    /// Not in the finisher itself; not on a thread that runs an entry of this pool off its workers (a leftover the
    /// finisher's sweep runs further down the stack, or a stopped lane's entry holding the slot that sweep waits for: such
    /// a call returns without waiting for other leftovers, as a pool item's does); not on a thread the finisher waits to
    /// exit (the last worker, whose stop runs event and meter listeners on its way out).
    /// </summary>
    private Task<Task>? UnwatchedFinishToWaitFor(bool isUnwatchedFinisher, List<Thread> threads) =>
        isUnwatchedFinisher || _scheduler.RunsOwnEntryOffWorkersOnThisThread || threads.Contains(Thread.CurrentThread)
            ? null
            : Volatile.Read(ref _unwatchedFinish);

    /// <summary>
    /// What a waiting <see cref="Dispose"/> does once the pool has stopped (the last worker out has stopped it), done
    /// with nobody waiting: look for leftovers no worker exists to run, release the monitor and the wait threads so
    /// that they exit, and sweep.
    /// </summary>
    private async Task FinishShutdownUnwatchedAsync()
    {
        try
        {
            await FinishShutdownAsync(ShutdownMode.Drain, CancellationToken.None, isUnwatchedFinisher: true).ConfigureAwait(false);
        }
        catch (Exception exception)
        {
            // A leftover item's exception that the pool's policy leaves unhandled: a waiting Dispose would throw it to
            // its caller. Nobody is waiting, so it stays unhandled, as it would on one of the pool's workers.
            ThreadPool.UnsafeQueueUserWorkItem(static state => ((ExceptionDispatchInfo)state!).Throw(),
                ExceptionDispatchInfo.Capture(exception));
        }
    }

    /// <summary>
    /// The number of accepted items this pool has cancelled (never run) because of shutdown so far: the figure
    /// <see cref="Shutdown(ShutdownMode)"/> returns, readable at any time (for example after a
    /// <see cref="ShutdownAsync(ShutdownMode, CancellationToken)"/> that was cancelled).
    /// </summary>
    public long CancelledWorkItemCount => _runner.CancelledCount;

    /// <summary>
    /// Like <see cref="Shutdown(ShutdownMode)"/>, but waits for the pool to stop without blocking a thread; when
    /// <paramref name="cancellationToken"/> fires first, stops waiting and cancels the items that have not started.
    /// </summary>
    /// <param name="mode">What to do with accepted items that have not started.</param>
    /// <param name="cancellationToken">Ends the wait, typically a host's shutdown timeout: the pool then switches to
    /// <see cref="ShutdownMode.CancelPending"/> (items that have not started are cancelled and counted), and the returned
    /// task is cancelled. Items already running finish on their own, after which the pool stops.</param>
    /// <returns>
    /// A task for the number of items cancelled by shutdown (see <see cref="Shutdown(ShutdownMode)"/>), completed once
    /// the pool has stopped and its threads have exited; cancelled when the token ended the wait first (read
    /// <see cref="CancelledWorkItemCount"/> and <see cref="PendingWorkItemCount"/> then).
    /// </returns>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public Task<int> ShutdownAsync(ShutdownMode mode, CancellationToken cancellationToken = default) =>
        ShutdownAsync(mode, ShutdownMode.CancelPending, cancellationToken);

    /// <summary>
    /// Like <see cref="ShutdownAsync(ShutdownMode, CancellationToken)"/>, with what to do with the items that have not
    /// started when <paramref name="cancellationToken"/> ends the wait.
    /// </summary>
    /// <param name="mode">What to do with accepted items that have not started.</param>
    /// <param name="whenCancelled"><see cref="ShutdownMode.CancelPending"/>: cancel them (and count them);
    /// <see cref="ShutdownMode.Drain"/>: only stop waiting, and let the pool drain them on its own.</param>
    /// <param name="cancellationToken">Ends the wait; the returned task is then cancelled.</param>
    /// <returns>See <see cref="ShutdownAsync(ShutdownMode, CancellationToken)"/>.</returns>
    /// <remarks>
    /// Called from one of this pool's own work items it does not wait (waiting would wait for itself): the task is
    /// already complete, with the figure so far, as <see cref="Shutdown(ShutdownMode)"/> returns at once there.
    /// </remarks>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> or <paramref name="whenCancelled"/> is not
    /// a defined value.</exception>
    public Task<int> ShutdownAsync(ShutdownMode mode, ShutdownMode whenCancelled, CancellationToken cancellationToken)
    {
        ValidateMode(mode, nameof(mode));
        ValidateMode(whenCancelled, nameof(whenCancelled));
        BeginShutdown(mode);
        if (IsOwnThread)
        {
            // Waiting would wait for this very item: return the figure so far, as Shutdown does here.
            return Task.FromResult((int)_runner.CancelledCount);
        }
        return FinishShutdownAsync(whenCancelled, cancellationToken);
    }

    private async Task<int> FinishShutdownAsync(ShutdownMode whenCancelled, CancellationToken cancellationToken, bool isUnwatchedFinisher = false)
    {
        _threads.EnterShutdownWait();
        bool swept = false;
        try
        {
            int cancelled = await FinishShutdownWaitingAsync(whenCancelled, isUnwatchedFinisher, cancellationToken).ConfigureAwait(false);
            swept = true; // it returns only after its sweep
            return cancelled;
        }
        finally
        {
            _threads.ExitShutdownWait(swept);
        }
    }

    private async Task<int> FinishShutdownWaitingAsync(ShutdownMode whenCancelled, bool isUnwatchedFinisher, CancellationToken cancellationToken)
    {
        try
        {
            await _threads.WaitUntilStoppedAsync(cancellationToken).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
        {
            if (whenCancelled == ShutdownMode.CancelPending)
            {
                BeginShutdown(ShutdownMode.CancelPending);
            }
            throw;
        }
        // Wait for the threads on their way out without blocking, then sweep as Shutdown does. A background finisher
        // (a shutdown an owner stopped waiting for) releases the same threads and sweeps the same queues: wait for it
        // first, or this call could return while it still runs a leftover.
        List<Thread> threads = ReleaseThreadsAfterStop();
        if (UnwatchedFinishToWaitFor(isUnwatchedFinisher, threads) is Task<Task> unwatched)
        {
            await (await unwatched.ConfigureAwait(false)).ConfigureAwait(false);
        }
        await WhenExited(threads).ConfigureAwait(false);
        _scheduler.SweepLeftovers();
        return (int)_runner.CancelledCount;
    }

    /// <summary>
    /// The pool has stopped: wakes the stall monitor and the wait threads so that they exit, and returns every thread
    /// that belonged to the pool and may still be running: workers on their way out and retired ones (their stop hooks),
    /// dedicated threads, the monitor, the relief thread and the wait threads. Shutdown waits for all of them.
    /// </summary>
    /// <remarks>
    /// Called by every waiting shutdown call (Shutdown, Dispose, ShutdownAsync, the background finisher), concurrently
    /// when several run at once, and each returns only once every thread of its list has exited: so every call must
    /// get every such thread. The components keep their lists after handing them out (the releases are idempotent);
    /// one that gave a thread to the first caller only would let a second caller return while it still ran.
    /// </remarks>
    private List<Thread> ReleaseThreadsAfterStop()
    {
        Debug.Assert(_threads.HasStopped);
        List<Thread> threads = [.. _threads.SnapshotRetiredThreads(), .. _dedicated.SnapshotThreads()];
        if (_threads.ReleaseMonitor() is Thread monitor)
        {
            threads.Add(monitor);
        }
        if (_scheduler.Relief.Release() is Thread relief)
        {
            threads.Add(relief);
        }
        threads.AddRange(_waits.ReleaseThreads());
        return threads;
    }

    /// <summary>Completes once every thread in <paramref name="threads"/> has exited (polls: a thread has no exit event).</summary>
    private static async Task WhenExited(List<Thread> threads)
    {
        foreach (Thread thread in threads)
        {
            while (thread.IsAlive && thread != Thread.CurrentThread)
            {
                await Task.Delay(1).ConfigureAwait(false);
            }
        }
    }

    /// <summary>
    /// Stops accepting work and waits for the pool to stop, either running (<see cref="ShutdownMode.Drain"/>) or
    /// cancelling (<see cref="ShutdownMode.CancelPending"/>) the items that have not started. Items already running always
    /// finish. Idempotent; a cancelling call after a draining one cancels what has not started yet.
    /// </summary>
    /// <param name="mode">What to do with accepted items that have not started.</param>
    /// <returns>
    /// The number of accepted items this pool has cancelled (never run) because of shutdown, over every call: work items
    /// queued with the <c>QueueUserWorkItem</c> and <c>UnsafeQueueUserWorkItem</c> methods, and <c>Run</c> and
    /// <c>RunAsValueTask</c> items (their tasks complete as cancelled; an item its own token had cancelled already is not
    /// counted again). Continuations, scheduler tasks and timer callbacks are never cancelled by shutdown, and wait
    /// callbacks end with their registrations: none of them is counted. When called from one of this pool's own work
    /// items the call does not wait, and the figure covers
    /// only the items cancelled so far.
    /// </returns>
    /// <remarks>
    /// <para>What shutdown means for work that is already under way:</para>
    /// <list type="bullet">
    /// <item>An <c>await</c> inside a <c>Run</c> item that has not completed keeps the pool draining: its continuations run
    /// on the pool, and shutdown waits for the item's task, as it waits for a running item and for long-running items.
    /// So a <c>Run</c> item must not wait for the shutdown of its own pool from a thread that is not the pool's (after
    /// <c>ConfigureAwait(false)</c>): that would wait for itself. On the pool's own threads the call does not wait.</item>
    /// <item>A continuation posted to <see cref="SynchronizationContext"/> or a task queued to <see cref="TaskScheduler"/>
    /// during the drain runs on the pool, in both modes. One that arrives after the pool has stopped runs on the built-in
    /// <see cref="ThreadPool"/> (counted by <see cref="RedirectedCallbackCount"/> and reported by the
    /// <c>CallbackRedirected</c> event): it is never lost and never throws into the thread that completed the awaited
    /// work. New work through these two doors (<c>Task.Factory.StartNew</c> on the scheduler, a plain <c>Post</c>) is
    /// treated the same way, since neither door can tell it from a continuation. A capped lane's callbacks keep the
    /// lane's cap wherever they run, so a serial lane's run one at a time and in order.</item>
    /// <item>The pool's timers keep firing during the drain, on the pool, but they do not keep it: once only timer firings
    /// are left (no accepted item, continuation or async <c>Run</c> task), the pool stops, even while periodic timers
    /// keep coming due. Timers still scheduled when the pool stops fire
    /// on the built-in pool until they are disposed (so <c>Task.Delay</c>, <c>CancelAfter</c> and <c>PeriodicTimer</c>
    /// on <see cref="TimeProvider"/> always complete). The timer thread exits once no timer is scheduled.</item>
    /// <item>Shutdown ends every wait registration, as <see cref="RegisteredWait.Unregister(WaitHandle?)"/> does: no
    /// wait callback starts after shutdown has begun (one that is running finishes). A registration's owner may still
    /// call <see cref="RegisteredWait.Unregister(WaitHandle?)"/>: its first call returns true and signals the wait
    /// object once the registration's callback is not running.</item>
    /// </list>
    /// </remarks>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public int Shutdown(ShutdownMode mode)
    {
        ValidateMode(mode, nameof(mode));
        BeginShutdown(mode);
        if (IsOwnThread)
        {
            return (int)_runner.CancelledCount;
        }
        _threads.EnterShutdownWait();
        bool swept = false;
        try
        {
            _threads.WaitUntilStopped();
            List<Thread> threads = ReleaseThreadsAfterStop();
            if (UnwatchedFinishToWaitFor(isUnwatchedFinisher: false, threads) is Task<Task> unwatched)
            {
                // The finisher sweeps the same queues: without this wait, a leftover it has taken could still run when
                // this call returns. It completes without throwing (it rethrows a leftover's exception elsewhere).
                unwatched.GetAwaiter().GetResult().GetAwaiter().GetResult();
            }
            foreach (Thread thread in threads)
            {
                if (thread != Thread.CurrentThread)
                {
                    thread.Join();
                }
            }
            _scheduler.SweepLeftovers();
            swept = true;
        }
        finally
        {
            _threads.ExitShutdownWait(swept);
        }
        return (int)_runner.CancelledCount;
    }

    private static void ValidateMode(ShutdownMode mode, string paramName)
    {
        if (mode is not ShutdownMode.Drain and not ShutdownMode.CancelPending)
        {
            throw new ArgumentOutOfRangeException(paramName, mode, "Unknown shutdown mode.");
        }
    }

    private void BeginShutdown(ShutdownMode mode)
    {
        if (mode != ShutdownMode.CancelPending)
        {
            _threads.BeginShutdown(Scheduler.StateDraining);
            _waits.Stop();
            _dedicated.ReleaseIdle();
            _io.OnShutdownStarted();
            return;
        }
        // Cancel what is queued now (Run tasks complete as cancelled at once), not only when a worker gets to it. The
        // sweep takes entries that must run anyway (scheduler tasks, posts) out of the queues while it decides on them and
        // queues them again; a drain hold, taken before the close, keeps the last worker from stopping the pool in that
        // window, which would send them to the built-in pool after Shutdown had promised to run them here.
        // The tasks of the items it cancels complete after the hold is released (the scope's end): their continuations
        // are the caller's code, which may dispose this pool and wait for the stop that the hold keeps off.
        using CancelCompletions.Scope completions = CancelCompletions.Defer();
        _threads.AcquireDrainHold();
        try
        {
            _threads.BeginShutdown(Scheduler.StateCancelling);
            _waits.Stop();
            _dedicated.ReleaseIdle();
            _io.OnShutdownStarted();
            _scheduler.CancelQueuedNow();
        }
        finally
        {
            _threads.ReleaseDrainHold();
        }
    }
}
