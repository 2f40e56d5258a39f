using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;

namespace Spindle;

// Long-running items (WorkItemOptions.LongRunning) run on dedicated threads, never on a worker, so they never hold a
// worker's place and never trigger starvation injection.
//
// Protocol: everything below is under _threadLock. An enqueue checks _state (shutdown changes it under the same lock,
// so the item is either accepted here or rejected), then hands the item to the most recently idled dedicated thread
// (stored in its Item field before the thread's blocker is signalled, after the lock is released) or starts a new
// thread with the item. A dedicated thread that finishes an item pushes itself on _idleDedicated and sleeps for the
// idle timeout; on timeout it exits only if it is still on the stack (nobody handed it an item); otherwise the signal
// is on its way and it takes it. Shutdown pops every idle dedicated thread and wakes it with no item, so it exits, and
// then joins them all. If a thread cannot be created the item goes to the global queue instead: it is never lost.
public sealed partial class WorkerPool
{
    [ThreadStatic]
    private static WorkerPool? t_dedicatedPool;

    private readonly List<DedicatedThread> _idleDedicated = []; // LIFO, under _threadLock
    private readonly List<DedicatedThread> _dedicated = [];     // every live dedicated thread, under _threadLock
    private int _dedicatedCount;

    internal void EnqueueLongRunning(in WorkItemEntry entry)
    {
        if (!TryEnqueueLongRunning(entry))
        {
            ThrowShutDown();
        }
    }

    /// <summary>Hands the item to a dedicated thread; false, having queued nothing, when the pool is shutting down.</summary>
    internal bool TryEnqueueLongRunning(in WorkItemEntry entry)
    {
        DedicatedThread? reused = null;
        bool fallback = false;
        lock (_threadLock)
        {
            if (_state != StateRunning)
            {
                return false;
            }
            // A running long-running item may still produce continuations: it holds the drain (released after it ran).
            AcquireDrainHold();
            if (_idleDedicated.Count != 0)
            {
                reused = _idleDedicated[^1];
                _idleDedicated.RemoveAt(_idleDedicated.Count - 1);
                reused.Item = entry;
            }
            else
            {
                try
                {
                    var dedicated = new DedicatedThread(this, entry);
                    Thread thread = CreateThread(dedicated.Main, $"{_threadNamePrefix} long-running");
                    dedicated.Thread = thread;
                    _dedicated.Add(dedicated);
                    Volatile.Write(ref _dedicatedCount, _dedicated.Count);
                    Record(ThreadInjectionReason.LongRunning); // before the item can run: whoever sees it ran sees this
                    try
                    {
                        thread.UnsafeStart();
                    }
                    catch (Exception)
                    {
                        Interlocked.Decrement(ref _injectionCounts[(int)ThreadInjectionReason.LongRunning]);
                        _dedicated.Remove(dedicated);
                        Volatile.Write(ref _dedicatedCount, _dedicated.Count);
                        throw;
                    }
                }
                catch (Exception)
                {
                    // The OS refused a thread: run the item as ordinary work rather than lose it or throw.
                    Record(ThreadInjectionReason.CreationFailed);
                    fallback = true;
                }
            }
        }
        if (reused is not null)
        {
            reused.Blocker.Signal();
            return true;
        }
        if (fallback)
        {
            ReleaseDrainHold(); // no dedicated thread runs it
            if (!_globalQueue.TryEnqueue(entry))
            {
                return false; // shutdown started after the check above: rejected, like any enqueue
            }
            WakeWorkerIfNeeded();
        }
        return true;
    }

    /// <summary>Dedicated threads waiting for an item (tests and diagnostics).</summary>
    internal int IdleDedicatedThreadCount
    {
        get
        {
            lock (_threadLock)
            {
                return _idleDedicated.Count;
            }
        }
    }

    private Thread[] SnapshotDedicatedThreads()
    {
        lock (_threadLock)
        {
            var threads = new Thread[_dedicated.Count + _retiredThreads.Count];
            int i = 0;
            foreach (DedicatedThread dedicated in _dedicated)
            {
                threads[i++] = dedicated.Thread!;
            }
            _retiredThreads.CopyTo(threads, i);
            return threads;
        }
    }

    /// <summary>Wakes every idle dedicated thread with no item, so that it exits (shutdown).</summary>
    private void ReleaseIdleDedicatedThreads()
    {
        DedicatedThread[] idle;
        lock (_threadLock)
        {
            Debug.Assert(_state != StateRunning);
            idle = [.. _idleDedicated];
            _idleDedicated.Clear();
        }
        foreach (DedicatedThread dedicated in idle)
        {
            dedicated.Blocker.Signal();
        }
    }

    /// <summary>A thread that runs long-running items one at a time, then waits for the next.</summary>
    private sealed class DedicatedThread(WorkerPool pool, WorkItemEntry first)
    {
        public readonly ThreadBlocker Blocker = pool._options.BlockerKind is BlockerKind kind ? ThreadBlocker.Create(kind) : ThreadBlocker.Create();
        public Thread? Thread;
        public WorkItemEntry Item = first; // handed over under _threadLock, read by this thread after the signal

        private string? _name;
        private CultureInfo? _culture;
        private CultureInfo? _uiCulture;

        public void Main()
        {
            t_dedicatedPool = pool;
            s_defaultContext ??= ExecutionContext.Capture();
            Thread thread = System.Threading.Thread.CurrentThread;
            _name = thread.Name;
            _culture = CultureInfo.CurrentCulture;
            _uiCulture = CultureInfo.CurrentUICulture;
            try
            {
                pool.RunHook(pool._options.OnWorkerStarted);
                while (TakeItem(out WorkItemEntry item))
                {
                    Run(ref item, thread);
                }
            }
            finally
            {
                try
                {
                    pool.RunHook(pool._options.OnWorkerStopping);
                }
                finally
                {
                    t_dedicatedPool = null;
                }
            }
        }

        private bool TakeItem(out WorkItemEntry item)
        {
            while (true)
            {
                lock (pool._threadLock)
                {
                    if (Item.Callback is not null)
                    {
                        item = Item;
                        Item = default;
                        return true;
                    }
                    if (pool._state != StateRunning)
                    {
                        Leave();
                        item = default;
                        return false;
                    }
                    pool._idleDedicated.Add(this);
                }
                if (Blocker.Wait(pool._idleTimeoutMs))
                {
                    continue; // handed an item, or released by shutdown
                }
                lock (pool._threadLock)
                {
                    if (pool._idleDedicated.Remove(this))
                    {
                        // Nobody picked this thread: retire. Shutdown still joins it through _retiredThreads.
                        pool.Record(ThreadInjectionReason.RetiredIdle); // before the count drops: readers see both
                        Leave();
                        pool._retiredThreads.RemoveAll(static t => !t.IsAlive);
                        pool._retiredThreads.Add(Thread!);
                        item = default;
                        return false;
                    }
                }
                Blocker.Wait(); // an enqueue popped this thread: its signal is on the way
            }
        }

        private void Leave()
        {
            Debug.Assert(pool._threadLock.IsHeldByCurrentThread);
            if (pool._state == StateRunning)
            {
                pool._dedicated.Remove(this);
            }
            // During shutdown the thread stays listed so that Shutdown joins it.
            Volatile.Write(ref pool._dedicatedCount, pool._dedicatedCount - 1);
        }

        private void Run(ref WorkItemEntry item, Thread thread)
        {
            try
            {
                ExecutionContext? context = item.Context;
                if (context is null || ReferenceEquals(context, s_defaultContext))
                {
                    item.Invoke();
                }
                else
                {
                    ExecutionContext.Restore(context);
                    item.Invoke();
                }
            }
            catch (Exception exception)
            {
                pool.HandleItemException(exception);
            }
            finally
            {
                item = default;
                Interlocked.Increment(ref pool._exitedWorkersCompleted);
                // Undo what the item may have changed, as a worker does between items.
                RestoreThreadState(_culture!, _uiCulture!);
                RestoreThreadIdentity(thread, _name, pool._options.UseBackgroundThreads);
                pool.ReleaseDrainHold();
            }
        }
    }
}
