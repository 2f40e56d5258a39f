using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Scheduling;

namespace Spindle;

// Shutdown: the public surface and the orchestration. The lifetime protocol (drain holds, the stop, continuations
// across the stop) is the thread controller's (Threading/ThreadController.Lifetime.cs); the leftover sweep is the
// scheduler's.
public sealed partial class WorkerPool
{
    /// <summary>
    /// Callbacks that arrived after this pool had stopped and therefore ran on the built-in <see cref="ThreadPool"/>:
    /// continuations posted to <see cref="SynchronizationContext"/>, tasks queued to <see cref="TaskScheduler"/>, and
    /// firings of this pool's timers that were still scheduled. See <see cref="Shutdown(ShutdownMode)"/>.
    /// </summary>
    public long RedirectedCallbackCount => _runner.RedirectedCount;

    /// <summary>
    /// Stops accepting work, runs every item already accepted, and waits for the workers to exit. Idempotent. Called
    /// from one of this pool's own work items it does not wait for the workers (which would deadlock): it returns at
    /// once and the workers finish the accepted items and exit on their own. See <see cref="Shutdown(ShutdownMode)"/>.
    /// </summary>
    public void Dispose() => Shutdown(ShutdownMode.Drain);

    /// <summary>
    /// Like <see cref="Dispose"/>, but waits for the workers without blocking the calling thread.
    /// </summary>
    public ValueTask DisposeAsync()
    {
        if (IsOwnThread)
        {
            Dispose();
            return ValueTask.CompletedTask;
        }
        BeginShutdown(ShutdownMode.Drain);
        return new ValueTask(Task.Factory.StartNew(
            static state => ((WorkerPool)state!).Shutdown(ShutdownMode.Drain),
            this, default, TaskCreationOptions.LongRunning | TaskCreationOptions.DenyChildAttach, System.Threading.Tasks.TaskScheduler.Default));
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
    /// <see cref="ThreadPool"/> (counted by <see cref="RedirectedCallbackCount"/>): it is never lost and never throws into
    /// the thread that completed the awaited work.</item>
    /// <item>The pool's timers keep firing during the drain, on the pool; timers still scheduled when the pool stops fire
    /// on the built-in pool until they are disposed (so <c>Task.Delay</c>, <c>CancelAfter</c> and <c>PeriodicTimer</c>
    /// on <see cref="TimeProvider"/> always complete). The timer thread exits once no timer is scheduled.</item>
    /// <item>Shutdown ends every wait registration, as <see cref="RegisteredWait.Unregister(WaitHandle?)"/> does: no
    /// wait callback starts after shutdown has begun (one that is running finishes).</item>
    /// </list>
    /// </remarks>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public int Shutdown(ShutdownMode mode)
    {
        if (mode is not ShutdownMode.Drain and not ShutdownMode.CancelPending)
        {
            throw new ArgumentOutOfRangeException(nameof(mode), mode, "Unknown shutdown mode.");
        }
        BeginShutdown(mode);
        if (IsOwnThread)
        {
            return (int)_runner.CancelledCount;
        }
        _threads.WaitUntilStopped();
        // Workers that exited during shutdown, retired workers that may still be running their stop hook, and dedicated
        // threads.
        foreach (Thread thread in _threads.SnapshotRetiredThreads())
        {
            thread.Join();
        }
        foreach (Thread thread in _dedicated.SnapshotThreads())
        {
            thread.Join();
        }
        _threads.StopMonitor();
        _waits.JoinThreads();
        _scheduler.SweepLeftovers();
        return (int)_runner.CancelledCount;
    }

    private void BeginShutdown(ShutdownMode mode)
    {
        _threads.BeginShutdown(mode == ShutdownMode.CancelPending ? Scheduler.StateCancelling : Scheduler.StateDraining);
        _waits.Stop();
        _dedicated.ReleaseIdle();
    }
}
