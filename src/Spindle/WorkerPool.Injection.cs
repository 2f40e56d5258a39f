using System;
using System.Diagnostics;
using System.Threading;

namespace Spindle;

/// <summary>
/// Why the pool adds a thread. Today it only documents the call sites; the injection controller (starvation, blocking
/// regions, long-running work, retirement) will record it and add reasons.
/// </summary>
internal enum InjectionReason
{
    /// <summary>Work arrived and no worker was idle while the pool was below its thread target.</summary>
    Demand,

    /// <summary>A failed creation is being retried.</summary>
    Retry,
}

// The one place that decides to add a thread. Today's policy: create workers on demand (work queued, nobody idle or
// searching) up to the thread target, max(MinThreads, ProcessorCount) capped at MaxThreads, and keep them. Dynamic
// injection (starvation, blocking regions, retirement) plugs in here.
public sealed partial class WorkerPool
{
    private readonly Lock _threadLock = new();
    private Worker[] _workers;          // copy-on-write under _threadLock; read lock-free by stealers and counters
    private int _threadCount;           // written under _threadLock (Volatile), read anywhere
    private int _nextWorkerId;          // under _threadLock
    private long _exitedWorkersCompleted;
    private int _creationFailures;      // consecutive failures, under _threadLock
    private Timer? _retryTimer;         // under _threadLock
    private long _creationFailureCount; // total, for tests and diagnostics

    // max(MinThreads, ProcessorCount) capped at MaxThreads; fixed for the pool's lifetime until runtime limits arrive.
    private int _threadTarget;

    /// <summary>Total number of thread creations that failed (each is retried with backoff).</summary>
    internal long CreationFailureCount => Interlocked.Read(ref _creationFailureCount);

    /// <summary>Adds a worker if the policy allows it. Never throws: a failed creation is retried later.</summary>
    /// <remarks>
    /// The thread is created and started under <c>_threadLock</c>, so every worker that shutdown can see (it snapshots
    /// the list under the same lock) has a started thread it can join. Starting takes tens of microseconds and happens
    /// at most <c>_threadTarget</c> times, so holding the lock across it costs nothing measurable.
    /// </remarks>
    private void TryAddWorker(InjectionReason reason)
    {
        Debug.Assert(reason is InjectionReason.Demand or InjectionReason.Retry);
        lock (_threadLock)
        {
            if (_threadCount >= _threadTarget || _state != StateRunning || _retryTimer is not null)
            {
                return;
            }
            Worker worker;
            Thread thread;
            try
            {
                worker = new Worker(this, ++_nextWorkerId);
                thread = CreateThread(worker);
            }
            catch (Exception)
            {
                // Whatever the failure (OutOfMemoryException, ThreadStartException, a throwing factory), the enqueue
                // that got us here has already been accepted: never throw, retry later.
                ScheduleCreationRetryLocked();
                return;
            }
            worker.Thread = thread;
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
            try
            {
                thread.UnsafeStart(); // no ExecutionContext capture: a worker never runs in its creator's context
            }
            catch (Exception)
            {
                Volatile.Write(ref _workers, current);
                Volatile.Write(ref _threadCount, _threadCount - 1);
                Interlocked.Decrement(ref _searching.Value);
                ScheduleCreationRetryLocked();
                return;
            }
            _creationFailures = 0;
        }
    }

    private Thread CreateThread(Worker worker)
    {
        Func<ThreadStart, int, Thread>? factory = _options.ThreadFactory;
        Thread thread = factory is not null
            ? factory(worker.Main, _options.StackSize)
            : new Thread(worker.Main, _options.StackSize);
        thread.IsBackground = _options.UseBackgroundThreads;
        thread.Name = $"{_threadNamePrefix} #{worker.Id}";
        return thread;
    }

    private void ScheduleCreationRetryLocked()
    {
        Debug.Assert(_threadLock.IsHeldByCurrentThread);
        Interlocked.Increment(ref _creationFailureCount);
        _creationFailures++;
        // 1, 2, 4 ... 256 ms. The timer is the built-in one: this path only runs when the OS refuses threads, and it
        // must work when this pool has no thread at all.
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
        TryAddWorker(InjectionReason.Retry);
        if (AnyWorkVisible())
        {
            WakeWorkerIfNeeded();
        }
    }

    private void OnWorkerExited(Worker worker)
    {
        lock (_threadLock)
        {
            Worker[] current = _workers;
            int index = Array.IndexOf(current, worker);
            if (index < 0)
            {
                return;
            }
            Debug.Assert(worker.HasNoLocalWork, "A worker exits only with an empty ring and LIFO slot.");
            var next = new Worker[current.Length - 1];
            Array.Copy(current, 0, next, 0, index);
            Array.Copy(current, index + 1, next, index, current.Length - index - 1);
            Interlocked.Add(ref _exitedWorkersCompleted, worker.CompletedCount);
            Volatile.Write(ref _workers, next);
            Volatile.Write(ref _threadCount, _threadCount - 1);
        }
    }
}
