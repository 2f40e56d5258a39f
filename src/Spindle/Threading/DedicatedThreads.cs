using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Threading;

/// <summary>
/// Long-running items (<see cref="WorkItemOptions.LongRunning"/>, <c>TaskCreationOptions.LongRunning</c>) run on
/// dedicated threads, never on a worker, so they never hold a worker's place and never trigger starvation injection.
/// </summary>
/// <remarks>
/// <para>State (owned here, under <see cref="_lock"/>): the idle threads (LIFO), every live thread, the retired ones
/// shutdown must join, the count, and this component's own injection counts (LongRunning, RetiredIdle,
/// CreationFailed) and completed count (atomics).</para>
/// <para>Protocol: an enqueue takes a drain hold (a running long-running item may still produce continuations) and
/// then reads the admission state: shutdown writes that state, fences and reads the hold count, so either the enqueue
/// sees the shutdown (and gives its hold back: rejected) or the shutdown sees the hold (and drains the item). An
/// accepted item goes to the most recently idled thread (stored in its Item field under the lock; the thread's blocker
/// is signalled after the lock is released), else to a thread that has just finished an item and is on its way back
/// (see below), or starts a new thread with it. A thread that finishes an item pushes
/// itself on the idle stack and sleeps for the idle timeout; on timeout it exits only if it is still on the stack
/// (nobody handed it an item); otherwise the signal is on its way and it takes it. Shutdown pops every idle thread and
/// wakes it with no item, so it exits, and then joins them all. If a thread cannot be created the item goes to the
/// global queue instead: it is never lost.</para>
/// <para>On its way back: the item's own last act (setting an event, completing a task) can wake the code that queues
/// the next long-running items before the thread that ran it has reached the idle stack; with more such threads than
/// cores, or several finishing at once and taking turns at the lock, several are still on their way. Each thread counts itself in <see cref="_returning"/> as soon
/// as its item returns (atomically, outside the lock) and out again at its next look under the lock. An enqueue that
/// finds no idle thread but more returning threads than items already left for them (<see cref="_handoffs"/>) leaves
/// the item there instead of starting a thread; a returning thread takes one at that look, before it would go idle or
/// see a shutdown (the item holds a drain hold, so shutdown waits for it; a cancelling shutdown has the thread drop it,
/// as it drops any item handed over and not yet started). Each of the counted threads makes that look,
/// so the items left never outnumber the threads that will look (checked in DEBUG). Otherwise a service that queues the
/// next batch of long-running items when the last one completes would start a thread for each item whose thread had
/// not got back yet, and keep it for the idle timeout.</para>
/// </remarks>
internal sealed class DedicatedThreads
{
    [ThreadStatic]
    private static IPoolHost? t_currentPool;

    private readonly Lock _lock = new();
    private readonly IPoolHost _pool;
    private readonly WorkerPoolOptions _options;
    private readonly string _threadName;
    private readonly Scheduler _scheduler;
    private readonly ThreadController _threads;
    private readonly ItemRunner _runner;
    private readonly List<DedicatedThread> _idle = [];
    private readonly List<DedicatedThread> _all = [];
    private readonly List<Thread> _retired = [];
    private readonly Queue<WorkItemEntry> _handoffs = new(); // items left for returning threads (see the remarks)
    private int _returning; // threads whose item has returned, not yet back under the lock (see the remarks)
    private int _count;
    private long _completed;
    private long _started;
    private long _retiredIdle;

    public DedicatedThreads(IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, ThreadController threads, ItemRunner runner)
    {
        _pool = pool;
        _options = options;
        _threadName = $"{options.ThreadNamePrefixOrName} long-running";
        _scheduler = scheduler;
        _threads = threads;
        _runner = runner;
    }

    /// <summary>The pool whose dedicated thread is the calling thread, or null.</summary>
    public static IPoolHost? CurrentPool => t_currentPool;

    /// <summary>Dedicated threads that exist (running or idle).</summary>
    public int Count => Volatile.Read(ref _count);

    /// <summary>Items run to completion on dedicated threads.</summary>
    public long CompletedCount => Interlocked.Read(ref _completed);

    /// <summary>This component's share of <see cref="WorkerPool.GetThreadInjectionCount"/>.</summary>
    public long GetInjectionCount(ThreadInjectionReason reason) => reason switch
    {
        ThreadInjectionReason.LongRunning => Interlocked.Read(ref _started),
        ThreadInjectionReason.RetiredIdle => Interlocked.Read(ref _retiredIdle),
        ThreadInjectionReason.CreationFailed => _threads.Starts.GetFailures(PoolThreadKind.Dedicated),
        _ => 0,
    };

    /// <summary>Dedicated threads waiting for an item (tests and diagnostics).</summary>
    public int IdleCount
    {
        get
        {
            lock (_lock)
            {
                return _idle.Count;
            }
        }
    }

    /// <summary>
    /// Tests only: holds this component's lock (re-entrant for the holder), so that a thread whose item has returned
    /// stops on its way back, counted as returning, until the scope ends.
    /// </summary>
    internal Lock.Scope EnterLockForTests() => _lock.EnterScope();

    /// <summary>Hands the item to a dedicated thread; false, having queued nothing, when the pool is shutting down.</summary>
    public bool TryEnqueue(in WorkItemEntry entry)
    {
        DedicatedThread? reused = null;
        bool fallback = false;
        lock (_lock)
        {
            // The hold first, then the state (see the remarks).
            _threads.AcquireDrainHold();
            if (_scheduler.IsShutdownStarted)
            {
                fallback = true; // released below, outside the lock: the release may stop the pool
            }
            else if (_idle.Count != 0)
            {
                reused = _idle[^1];
                _idle.RemoveAt(_idle.Count - 1);
                reused.Item = entry;
            }
            else if (_handoffs.Count < Volatile.Read(ref _returning))
            {
                _handoffs.Enqueue(entry); // a thread on its way back takes it at its next look (see the remarks)
            }
            else if (_options.MaxThreadsDerived && _all.Count + _threads.ThreadCount >= _threads.MaxThreads)
            {
                // The maximum came from the OS's thread limit: dedicated threads share it with the workers, and beyond
                // it the item runs as ordinary work (see WorkerPoolOptions.MaxThreads).
                fallback = true;
            }
            else
            {
                bool counted = false;
                try
                {
                    var dedicated = new DedicatedThread(this, entry);
                    Thread thread = PoolThread.Create(_options, dedicated.Main, _threadName);
                    dedicated.Thread = thread;
                    _all.Add(dedicated);
                    Volatile.Write(ref _count, _all.Count);
                    Interlocked.Increment(ref _started); // before the item can run: whoever sees it ran sees this
                    try
                    {
                        _threads.Starts.Start(thread, PoolThreadKind.Dedicated); // counts a refusal
                    }
                    catch (Exception)
                    {
                        Interlocked.Decrement(ref _started);
                        _all.Remove(dedicated);
                        Volatile.Write(ref _count, _all.Count);
                        counted = true;
                        throw;
                    }
                }
                catch (Exception)
                {
                    // The OS refused a thread: run the item as ordinary work rather than lose it or throw.
                    if (!counted)
                    {
                        _threads.Starts.RecordFailure(PoolThreadKind.Dedicated);
                    }
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
            _threads.ReleaseDrainHold(); // no dedicated thread runs it
            // Shutdown started (before or after the check above): rejected, like any enqueue.
            return _scheduler.TryEnqueueShared(entry);
        }
        return true;
    }

    /// <summary>Every dedicated thread that may still be running, retired ones included (shutdown joins them).</summary>
    public Thread[] SnapshotThreads()
    {
        lock (_lock)
        {
            var threads = new Thread[_all.Count + _retired.Count];
            int i = 0;
            foreach (DedicatedThread dedicated in _all)
            {
                threads[i++] = dedicated.Thread!;
            }
            _retired.CopyTo(threads, i);
            return threads;
        }
    }

    /// <summary>Wakes every idle dedicated thread with no item, so that it exits (shutdown).</summary>
    public void ReleaseIdle()
    {
        DedicatedThread[] idle;
        lock (_lock)
        {
            Debug.Assert(_scheduler.IsShutdownStarted);
            idle = [.. _idle];
            _idle.Clear();
        }
        foreach (DedicatedThread dedicated in idle)
        {
            dedicated.Blocker.Signal();
        }
    }

    /// <summary>A thread that runs long-running items one at a time, then waits for the next.</summary>
    private sealed class DedicatedThread(DedicatedThreads owner, WorkItemEntry first)
    {
        public readonly ThreadBlocker Blocker = owner._options.BlockerKind is BlockerKind kind ? ThreadBlocker.Create(kind) : ThreadBlocker.Create();
        public Thread? Thread;
        public WorkItemEntry Item = first; // handed over under the owner's lock, read by this thread after the signal
        private readonly RunningItemRecord _record = new();  // this thread's, as a worker's (see ItemRunner.Run)
        private SamplePacer _timing = SamplePacer.EveryItem(); // its items are long: each is timed
        private bool _returned; // counted in the owner's returning threads, not yet out again (this thread's own)

        public void Main()
        {
            t_currentPool = owner._pool;
            DefaultContext.OnPoolThreadStarted();
            var threadState = new PoolThreadState(owner._options.UseBackgroundThreads);
            ItemRunner runner = owner._runner;
            try
            {
                runner.RunHook(owner._options.OnWorkerStarted);
                while (TakeItem(out WorkItemEntry item))
                {
                    if (owner._scheduler.IsShutdownStarted && CancelledBeforeStart(ref item))
                    {
                        continue;
                    }
                    try
                    {
                        runner.Run(_record, ref _timing, ref item, ref threadState, lane: null);
                        // On the way back: an enqueue may leave the next item for this thread from now on. Not when the
                        // item's exception escapes (the process is failing): this thread would never look for it.
                        Interlocked.Increment(ref owner._returning);
                        _returned = true;
                    }
                    finally
                    {
                        Interlocked.Increment(ref owner._completed);
                        owner._threads.ReleaseDrainHold();
                    }
                    _record.DropCallback(); // a waiting dedicated thread keeps no item alive
                }
            }
            finally
            {
                try
                {
                    runner.RunHook(owner._options.OnWorkerStopping);
                }
                finally
                {
                    t_currentPool = null;
                }
            }
        }

        /// <summary>
        /// An item handed to this thread (left for it on its way back, or given to it while idle) that a cancelling
        /// shutdown met before it started: dropped and counted like a queued item, its drain hold given back. Its
        /// completion (a Run task cancelled, a work item told) runs the caller's code, which may wait for the pool's
        /// stop: it runs once the hold is given back.
        /// </summary>
        private bool CancelledBeforeStart(ref WorkItemEntry item)
        {
            using (CancelCompletions.Defer())
            {
                if (!owner._runner.CancelsInstead(item, lane: null, owner._scheduler.IsCancelling))
                {
                    return false;
                }
                item = default;
                owner._threads.ReleaseDrainHold();
            }
            return true;
        }

        private bool TakeItem(out WorkItemEntry item)
        {
            while (true)
            {
                lock (owner._lock)
                {
                    if (_returned)
                    {
                        // Back: out of the count, and an item left for a returning thread is this thread's to take. One
                        // left while the pool shuts down is still taken (its drain hold keeps the pool from stopping
                        // until then): it runs, or a cancelling shutdown drops it (see CancelledBeforeStart).
                        _returned = false;
                        Interlocked.Decrement(ref owner._returning);
                        Debug.Assert(owner._handoffs.Count <= Volatile.Read(ref owner._returning) + 1, "more items left than threads to look for them");
                        if (owner._handoffs.TryDequeue(out item))
                        {
                            return true;
                        }
                    }
                    Debug.Assert(owner._handoffs.Count <= Volatile.Read(ref owner._returning), "an item left with no thread to take it");
                    if (Item.Callback is not null)
                    {
                        item = Item;
                        Item = default;
                        return true;
                    }
                    if (owner._scheduler.IsShutdownStarted)
                    {
                        LeaveLocked();
                        item = default;
                        return false;
                    }
                    owner._idle.Add(this);
                }
                if (Blocker.Wait(owner._options.IdleTimeoutMilliseconds))
                {
                    continue; // handed an item, or released by shutdown
                }
                lock (owner._lock)
                {
                    if (owner._idle.Remove(this))
                    {
                        // Nobody picked this thread: retire. Shutdown still joins it through the retired list.
                        Interlocked.Increment(ref owner._retiredIdle); // before the count drops: readers see both
                        LeaveLocked();
                        owner._retired.RemoveAll(static t => !t.IsAlive);
                        owner._retired.Add(Thread!);
                        item = default;
                        return false;
                    }
                }
                Blocker.Wait(); // an enqueue popped this thread: its signal is on the way
            }
        }

        private void LeaveLocked()
        {
            Debug.Assert(owner._lock.IsHeldByCurrentThread);
            if (!owner._scheduler.IsShutdownStarted)
            {
                owner._all.Remove(this);
            }
            // During shutdown the thread stays listed so that shutdown joins it.
            Volatile.Write(ref owner._count, owner._count - 1);
        }
    }
}
