using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;

namespace Spindle;

// The injection controller: the one place that adds or retires a worker thread, and records why.
//
// The pool aims for _threadTarget runnable workers:
//     target = min(MaxThreads, max(MinThreads, ProcessorCount) + _blockingCount + _starvationBoost)
// - _blockingCount: workers inside a blocking region (EnterBlockingRegion). Each lends its place to a replacement.
// - _starvationBoost: threads the monitor added because work waited while every worker was stuck (WorkerPool.Monitor.cs);
//   the monitor raises it during a stall and lets it decay once the queues are empty or the cores are saturated.
// Every input is written under _threadLock, which recomputes the target; the target is read lock-free (volatile).
//
// Adding: an enqueue that finds nobody idle or searching adds a worker while _threadCount < target (Demand); the
// monitor adds in ramps (Starvation); a blocking region adds one when work is waiting (BlockingRegion); raising the
// minimum starts threads at once (MinimumRaised). Threads are created and started under _threadLock.
//
// Retiring: a worker retires (exits) under _threadLock when the pool has more threads than the target (after an item,
// or instead of parking: RetiredSurplus), or when it has been parked for IdleTimeout and the pool is above its minimum
// (RetiredIdle). A retiring worker's local queues are empty (it checks under the lock, and only it fills them), and a
// parked one first removes itself from the idle stack, so no waker can hand it an item it will never run. After
// leaving the worker list it fences and looks at the queues once more: an enqueuer that saw the old thread count (and
// so added nobody) published its item before that look, which then sees the item and wakes or adds a worker.
public sealed partial class WorkerPool
{
    private readonly Lock _threadLock = new();
    private Worker[] _workers;          // copy-on-write under _threadLock; read lock-free by stealers and counters
    private int _threadCount;           // written under _threadLock (Volatile), read anywhere
    private int _nextWorkerId;          // under _threadLock
    private long _exitedWorkersCompleted;
    private int _creationFailures;      // consecutive failures, under _threadLock
    private Timer? _retryTimer;         // under _threadLock

    // Live limits and target inputs, all written under _threadLock.
    private int _minThreads;
    private int _maxThreads;
    private int _blockingCount;
    private int _starvationBoost;
    private volatile int _threadTarget;

    // Retired workers that may still be running their stop hook; shutdown joins them. Under _threadLock.
    private readonly List<Thread> _retiredThreads = [];

    private readonly long[] _injectionCounts = new long[(int)ThreadInjectionReason.RetiredSurplus + 1];

    /// <summary>
    /// How many times the pool has added or retired a thread for <paramref name="reason"/> since it was created
    /// (for <see cref="ThreadInjectionReason.CreationFailed"/>, how many creations failed).
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="reason"/> is not a defined value.</exception>
    public long GetThreadInjectionCount(ThreadInjectionReason reason)
    {
        if ((uint)reason >= (uint)_injectionCounts.Length)
        {
            throw new ArgumentOutOfRangeException(nameof(reason), reason, "Unknown injection reason.");
        }
        return Interlocked.Read(ref _injectionCounts[(int)reason]);
    }

    /// <summary>Total number of thread creations that failed (each is retried with backoff).</summary>
    internal long CreationFailureCount => GetThreadInjectionCount(ThreadInjectionReason.CreationFailed);

    /// <summary>The number of runnable workers the pool currently aims for (see the protocol comment).</summary>
    internal int ThreadTarget => _threadTarget;

    private void Record(ThreadInjectionReason reason) => Interlocked.Increment(ref _injectionCounts[(int)reason]);

    private void InitializeLimits(int minThreads, int maxThreads)
    {
        lock (_threadLock)
        {
            _minThreads = minThreads;
            _maxThreads = maxThreads;
            RecomputeTargetLocked();
        }
    }

    private void RecomputeTargetLocked()
    {
        Debug.Assert(_threadLock.IsHeldByCurrentThread);
        Debug.Assert(_blockingCount >= 0 && _starvationBoost >= 0 && _minThreads <= _maxThreads);
        long target = (long)Math.Max(_minThreads, Environment.ProcessorCount) + _blockingCount + _starvationBoost;
        _threadTarget = (int)Math.Min(_maxThreads, target);
    }

    /// <summary>
    /// Changes the pool's minimum and maximum thread counts while it runs. Raising the minimum starts threads at once;
    /// lowering the maximum retires surplus threads as they finish their current items.
    /// </summary>
    /// <param name="minThreads">Threads the pool keeps (idle ones above it retire after <see cref="WorkerPoolOptions.IdleTimeout"/>); 0 to <paramref name="maxThreads"/>.</param>
    /// <param name="maxThreads">Upper bound on worker threads; 1 to <see cref="WorkerPoolOptions.MaxThreadLimit"/>.</param>
    /// <exception cref="ArgumentOutOfRangeException">A count is out of range, or <paramref name="minThreads"/> exceeds <paramref name="maxThreads"/>.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public void SetThreadLimits(int minThreads, int maxThreads)
    {
        WorkerPoolOptions.ValidateThreadLimits(minThreads, maxThreads, nameof(minThreads), nameof(maxThreads));
        bool lowered;
        lock (_threadLock)
        {
            if (_state != StateRunning)
            {
                ThrowShutDown();
            }
            lowered = maxThreads < _maxThreads || minThreads < _minThreads;
            _minThreads = minThreads;
            _maxThreads = maxThreads;
            RecomputeTargetLocked();
        }
        while (Volatile.Read(ref _threadCount) < minThreads && TryAddWorker(ThreadInjectionReason.MinimumRaised))
        {
        }
        if (lowered)
        {
            // Parked workers re-evaluate: above the new maximum they retire, and with a lower minimum their idle
            // timeout may now apply.
            WakeAllWorkers();
        }
        EnsureMonitor();
    }

    /// <summary>
    /// Tells the pool that the calling work item is about to block, so that waiting work gets a replacement thread at
    /// once. Dispose the returned region when the blocking call returns; see <see cref="BlockingRegion"/>.
    /// </summary>
    /// <returns>An active region on a pool worker; an inactive one (disposing it does nothing) on any other thread.</returns>
    /// <example><code>
    /// using (WorkerPool.EnterBlockingRegion())
    /// {
    ///     response = client.Send(request); // synchronous I/O
    /// }
    /// </code></example>
    public static BlockingRegion EnterBlockingRegion()
    {
        Worker? worker = t_currentWorker;
        if (worker is null)
        {
            return default;
        }
        if (worker.RegionDepth++ == 0)
        {
            worker.Pool.OnBlockingRegionEntered();
        }
        return new BlockingRegion(worker);
    }

    private void OnBlockingRegionEntered()
    {
        lock (_threadLock)
        {
            _blockingCount++;
            RecomputeTargetLocked();
        }
        // Waiting work gets a worker now: a parked one if any, otherwise a new thread in the place this one lends.
        if (AnyWorkVisible())
        {
            if (_idle.Count == 0 && Volatile.Read(ref _searching.Value) == 0)
            {
                TryAddWorker(ThreadInjectionReason.BlockingRegion);
            }
            else
            {
                WakeWorkerIfNeeded();
            }
        }
    }

    internal void ExitBlockingRegion(Worker worker)
    {
        Debug.Assert(worker.IsCurrentThread);
        if (worker.RegionDepth == 0 || --worker.RegionDepth != 0)
        {
            return;
        }
        lock (_threadLock)
        {
            _blockingCount--;
            RecomputeTargetLocked();
        }
        // The surplus (if any) retires after its current item: see Worker.Dispatch.
    }

    /// <summary>Adds a worker if the thread count is below the target. Never throws: a failed creation is retried later.</summary>
    /// <returns>Whether a thread was started.</returns>
    /// <remarks>
    /// The decision, the listing and the counts happen under <c>_threadLock</c>; the thread is started after the lock
    /// is released, because <see cref="Thread.Start()"/> waits until the new thread runs, which on busy cores takes a
    /// scheduling round, and several injections (the monitor's ramp, the workers it starts, blocking regions) must be
    /// able to start threads in parallel. Until the start has completed the worker's <c>StartState</c> is pending:
    /// shutdown waits for it before joining (an unstarted thread cannot be joined), and nothing else needs the thread.
    /// If the start fails, the worker (which never ran and holds nothing) is unlisted again under the lock.
    /// </remarks>
    private bool TryAddWorker(ThreadInjectionReason reason)
    {
        Debug.Assert(reason is ThreadInjectionReason.Demand or ThreadInjectionReason.Starvation
            or ThreadInjectionReason.BlockingRegion or ThreadInjectionReason.MinimumRaised);
        Worker worker;
        Thread thread;
        lock (_threadLock)
        {
            // During the drain a worker may still be needed (a continuation arriving when every worker had exited or
            // retired); once the pool has stopped, never.
            if (_threadCount >= _threadTarget || _stopped || _retryTimer is not null)
            {
                return false;
            }
            try
            {
                worker = new Worker(this, ++_nextWorkerId);
                thread = CreateThread(worker.Main, $"{_threadNamePrefix} #{worker.Id}");
            }
            catch (Exception)
            {
                // Whatever the failure (OutOfMemoryException, ThreadStartException, a throwing factory), the enqueue
                // that got us here has already been accepted: never throw, retry later.
                ScheduleCreationRetryLocked();
                return false;
            }
            worker.Thread = thread;
            worker.InjectedFor = reason;
            // The new worker counts as a searcher until it first looks for work, so the enqueues that follow do not
            // each create another thread; it hands the role on like any searcher (see WorkerPool.Parking.cs).
            worker.WokenAsSearcher = true;
            Interlocked.Increment(ref _searching.Value);
            // Listed before it starts, so that whatever it does first (including exiting) finds itself in the list.
            Worker[] current = _workers;
            var next = new Worker[current.Length + 1];
            Array.Copy(current, next, current.Length);
            next[^1] = worker;
            Volatile.Write(ref _workers, next);
            Volatile.Write(ref _threadCount, _threadCount + 1);
            Record(reason); // before the thread runs anything, so that whoever sees its work done sees the reason
        }
        try
        {
            thread.UnsafeStart(); // no ExecutionContext capture: a worker never runs in its creator's context
        }
        catch (Exception)
        {
            bool stopped;
            lock (_threadLock)
            {
                Interlocked.Decrement(ref _injectionCounts[(int)reason]);
                UnlistWorkerLocked(worker);
                Interlocked.Decrement(ref _searching.Value);
                if (_state == StateRunning && _retryTimer is null)
                {
                    ScheduleCreationRetryLocked();
                }
                else
                {
                    Record(ThreadInjectionReason.CreationFailed);
                }
                stopped = TryStopLocked();
            }
            Volatile.Write(ref worker.StartState, Worker.StartFailed);
            if (stopped)
            {
                OnStopped(); // the disposing thread sweeps what is left (this thread may be anyone's)
            }
            return false;
        }
        Volatile.Write(ref worker.StartState, Worker.StartSucceeded);
        lock (_threadLock)
        {
            _creationFailures = 0;
        }
        EnsureMonitorIfNoneIdle();
        return true;
    }

    /// <summary>
    /// Called by a new worker before its first item: while the pool is still below its target and work waits with
    /// nobody free, it starts the next thread itself, so a ramp of N threads takes about log2(N) thread-start rounds
    /// instead of N.
    /// </summary>
    private void ContinueRamp(Worker worker)
    {
        // Only ramps (starvation, blocking regions) fan out; ordinary demand is served by the enqueue path.
        if (worker.InjectedFor is ThreadInjectionReason.Starvation or ThreadInjectionReason.BlockingRegion
            && Volatile.Read(ref _threadCount) < _threadTarget && _idle.Count == 0 && AnyWorkVisible())
        {
            TryAddWorker(worker.InjectedFor);
        }
    }

    private Thread CreateThread(ThreadStart start, string name)
    {
        Func<ThreadStart, int, Thread>? factory = _options.ThreadFactory;
        Thread thread = factory is not null
            ? factory(start, _options.StackSize)
            : new Thread(start, _options.StackSize);
        thread.IsBackground = _options.UseBackgroundThreads;
        thread.Name = name;
        return thread;
    }

    private void ScheduleCreationRetryLocked()
    {
        Debug.Assert(_threadLock.IsHeldByCurrentThread);
        Record(ThreadInjectionReason.CreationFailed);
        _creationFailures++;
        // 1, 2, 4 ... 256 ms. The timer is the built-in one: this path only runs when the OS refuses threads, and it
        // must work when this pool has no thread at all (not even its monitor).
        int delay = 1 << Math.Min(_creationFailures - 1, 8);
        _retryTimer = new Timer(static state => ((WorkerPool)state!).RetryCreation(), this, Timeout.Infinite, Timeout.Infinite);
        _retryTimer.Change(delay, Timeout.Infinite);
    }

    private void RetryCreation()
    {
        lock (_threadLock)
        {
            _retryTimer?.Dispose();
            _retryTimer = null;
        }
        if (_state != StateRunning)
        {
            return;
        }
        TryAddWorker(ThreadInjectionReason.Demand);
        if (AnyWorkVisible())
        {
            WakeWorkerIfNeeded();
        }
    }

    /// <summary>
    /// Retires <paramref name="worker"/> (the calling thread) if the pool is above <paramref name="reason"/>'s floor:
    /// the target for <see cref="ThreadInjectionReason.RetiredSurplus"/>, the minimum for
    /// <see cref="ThreadInjectionReason.RetiredIdle"/>. On success the worker is out of the list and must exit.
    /// </summary>
    private bool TryRetire(Worker worker, ThreadInjectionReason reason)
    {
        Debug.Assert(worker.IsCurrentThread);
        Debug.Assert(reason is ThreadInjectionReason.RetiredSurplus or ThreadInjectionReason.RetiredIdle);
        lock (_threadLock)
        {
            int floor = reason == ThreadInjectionReason.RetiredIdle ? _minThreads : _threadTarget;
            if (_threadCount <= floor || _state != StateRunning || !worker.HasNoLocalWork)
            {
                return false;
            }
            Record(reason); // before the count drops, so that a reader who sees the lower count sees the reason too
            RemoveWorkerLocked(worker);
            _retiredThreads.RemoveAll(static t => !t.IsAlive);
            _retiredThreads.Add(worker.Thread!);
        }
        // See the protocol comment: one more look after leaving the list, so that no enqueue is left without a worker.
        Interlocked.MemoryBarrier();
        if (AnyWorkVisible())
        {
            WakeWorkerIfNeeded();
        }
        EnsureMonitorIfNoneIdle(); // the pool may have just lost its last parked worker
        return true;
    }

    private void OnWorkerExited(Worker worker)
    {
        bool stopped;
        lock (_threadLock)
        {
            if (Array.IndexOf(_workers, worker) >= 0)
            {
                RemoveWorkerLocked(worker);
                if (_state != StateRunning)
                {
                    // Shutdown joins it (it is between here and the end of its thread).
                    _retiredThreads.Add(worker.Thread!);
                }
            }
            stopped = TryStopLocked();
        }
        if (stopped)
        {
            // The last worker out: what a continuation queued between the others' exit and the stop runs here.
            OnStopped();
            SweepLeftovers();
        }
    }

    /// <summary>Undoes the listing of a worker whose thread could not be started.</summary>
    private void UnlistWorkerLocked(Worker worker)
    {
        Debug.Assert(worker.CompletedCount == 0, "A worker whose thread never started has run nothing.");
        DropFromListLocked(worker);
    }

    private void RemoveWorkerLocked(Worker worker)
    {
        // Completed count first, then the list: a reader summing both may briefly count this worker twice, never zero
        // times, and CompletedWorkItemCount documents that it is a snapshot.
        Interlocked.Add(ref _exitedWorkersCompleted, worker.CompletedCount);
        DropFromListLocked(worker);
    }

    private void DropFromListLocked(Worker worker)
    {
        Debug.Assert(_threadLock.IsHeldByCurrentThread);
        Debug.Assert(worker.HasNoLocalWork, "A worker leaves only with an empty ring and LIFO slot.");
        Worker[] current = _workers;
        int index = Array.IndexOf(current, worker);
        Debug.Assert(index >= 0);
        var next = new Worker[current.Length - 1];
        Array.Copy(current, 0, next, 0, index);
        Array.Copy(current, index + 1, next, index, current.Length - index - 1);
        Volatile.Write(ref _workers, next);
        Volatile.Write(ref _threadCount, _threadCount - 1);
    }
}
