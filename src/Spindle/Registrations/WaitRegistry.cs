using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle.Registrations;

// The wait registry: every live registration of a pool and the wait threads.
//
// Two kinds share RegisteredWait (RegisteredWait.cs): registrations on a PoolSignal cost no thread (Set queues
// their callbacks; timeouts are entries of the pool's timing wheel), and registrations on any WaitHandle are watched by
// wait threads, 63 handles per thread (WaitThread.cs), the fewest WaitHandle.WaitAny allows.
//
// _waitLock guards the wait-thread list, each wait thread's Reserved count and pending changes, the list of live
// registrations (intrusive links in RegisteredWait) and _waitsStopped. Shutdown sets _waitsStopped and unregisters every
// live registration, so no callback is queued after it and none that was queued starts (the pool drains first).
// Firings go to the scheduler's global queue (TryQueueFiring); the registry calls nothing else of the pool.
internal sealed class WaitRegistry
{
    private readonly object _waitLock = new();
    private readonly IPoolHost _pool;
    private readonly string _threadNamePrefix;
    private readonly Scheduler _scheduler;
    private readonly TimerService _timers;
    private readonly Func<ThreadStart, Thread>? _threadFactory; // test seam (WorkerPoolOptions.WaitThreadFactory)
    private readonly List<WaitThread> _waitThreads = [];
    private readonly List<Thread> _exitedWaitThreads = [];
    private RegisteredWait? _registrations;
    private int _registrationCount;
    private bool _waitsStopped;

    public WaitRegistry(IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, TimerService timers)
    {
        _pool = pool;
        _threadNamePrefix = options.ThreadNamePrefixOrName;
        IdleTimeoutMilliseconds = options.IdleTimeoutMilliseconds;
        _scheduler = scheduler;
        _timers = timers;
        _threadFactory = options.WaitThreadFactory;
    }

    /// <summary>How long a wait thread with nothing to watch lingers before it exits.</summary>
    internal int IdleTimeoutMilliseconds { get; }

    /// <summary>Wait threads that exist right now.</summary>
    public int WaitThreadCount
    {
        get
        {
            lock (_waitLock)
            {
                return _waitThreads.Count;
            }
        }
    }

    /// <summary>Registrations that have not ended (a snapshot; see <see cref="RegisteredWait.IsUnregistered"/>).</summary>
    public int RegistrationCount => Volatile.Read(ref _registrationCount);

    /// <summary>Registers a wait on any handle (arguments validated by the caller); throws when the pool is shutting down.</summary>
    public RegisteredWait RegisterHandle(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, ExecutionContext? context, TimeSpan timeout, bool executeOnlyOnce)
    {
        var registration = new RegisteredWait(this, callBack, state, context, timeout, executeOnlyOnce);
        registration.Attach(waitObject, signalWaiter: null);
        WaitThread? target;
        lock (_waitLock)
        {
            ThrowIfStoppedLocked();
            target = FindWaitThreadWithRoomLocked();
            if (target is null)
            {
                // Started under the lock (once per 63 registrations), so that shutdown never finds an unstarted thread
                // to join. The new thread's first step takes the lock, so it simply waits for this call to finish.
                target = new WaitThread(this, _waitLock, $"{_threadNamePrefix} wait {_waitThreads.Count + 1}", _threadFactory);
                // If the thread cannot be started, nothing has been recorded yet and the exception reaches the caller.
                _timers.Starts.Start(target.Thread, PoolThreadKind.Wait); // a refusal is counted
                _waitThreads.Add(target);
                target.AddLocked(registration);
                TrackLocked(registration);
                return registration;
            }
            target.AddLocked(registration);
            TrackLocked(registration);
        }
        target.NotifyChanged();
        return registration;
    }

    /// <summary>Registers a wait on a <see cref="PoolSignal"/> (arguments validated by the caller); throws when the pool is shutting down.</summary>
    public RegisteredWait RegisterSignal(PoolSignal signal, WaitOrTimerCallback callBack, object? state, ExecutionContext? context, TimeSpan timeout, bool executeOnlyOnce)
    {
        var registration = new RegisteredWait(this, callBack, state, context, timeout, executeOnlyOnce);
        var waiter = new PoolSignal.RegistrationWaiter(signal, registration, _timers, registration.TimeoutTicks);
        registration.Attach(handle: null, waiter);
        if (registration.TimeoutTicks >= 0)
        {
            // The timeout is a timer of the pool: its thread must run before anything is recorded, so that a failure to
            // start it reaches the caller with nothing registered (the timer itself is scheduled after the link). A pool
            // that is shutting down refuses first, without starting a thread that would exit at once.
            if (_scheduler.IsShutdownStarted)
            {
                _pool.ThrowShutDown();
            }
            _timers.StartTimerThread();
        }
        lock (_waitLock)
        {
            ThrowIfStoppedLocked();
            TrackLocked(registration);
        }
        signal.Register(waiter);
        if (registration.IsUnregistered)
        {
            // The pool's shutdown unregistered it between the tracking above and the link: its detach found nothing to
            // unlink, so unlink here. A dead waiter left in the signal would take an auto-reset Set from a live one.
            // (The shutdown sets the flag before it unlinks, and the link is made under the signal's lock, so either
            // the shutdown's unlink comes after the link or this read sees the flag.)
            waiter.Detach();
        }
        return registration;
    }

    private void ThrowIfStoppedLocked()
    {
        if (_waitsStopped || _scheduler.IsShutdownStarted)
        {
            _pool.ThrowShutDown();
        }
    }

    private WaitThread? FindWaitThreadWithRoomLocked()
    {
        // Newest first: registrations fill threads in order, so the newest thread is the one most likely to have room.
        for (int i = _waitThreads.Count - 1; i >= 0; i--)
        {
            WaitThread thread = _waitThreads[i];
            if (thread.Reserved < WaitThread.MaxHandles && !thread.Exiting)
            {
                return thread;
            }
        }
        return null;
    }

    private void TrackLocked(RegisteredWait registration)
    {
        registration.LinkBefore(_registrations);
        _registrations = registration;
        _registrationCount++;
    }

    /// <summary>Called once per registration by its unregistration.</summary>
    internal void ForgetRegistration(RegisteredWait registration)
    {
        lock (_waitLock)
        {
            if (!registration.Unlink(out bool wasHead, out RegisteredWait? next))
            {
                return;
            }
            if (wasHead)
            {
                _registrations = next;
            }
            _registrationCount--;
        }
    }

    /// <summary>Whether the pool's shutdown has begun (from then on no wait callback starts).</summary>
    internal bool IsShutdownStarted => _scheduler.IsShutdownStarted;

    /// <summary>Whether shutdown has ended every registration (read by wait threads under the wait lock).</summary>
    internal bool IsStoppedLocked => _waitsStopped;

    /// <summary>A wait thread decided to exit (caller holds the wait lock).</summary>
    internal void OnWaitThreadExitingLocked(WaitThread thread)
    {
        _waitThreads.Remove(thread);
        _exitedWaitThreads.RemoveAll(static exited => !exited.IsAlive);
        _exitedWaitThreads.Add(thread.Thread);
    }

    /// <summary>Queues a wait firing for any worker; false (dropping it) when the pool is shutting down.</summary>
    internal bool TryQueueFiring(in WorkItemEntry entry) => _scheduler.TryEnqueueShared(entry);

    /// <summary>Shutdown: no more registrations; every live one is unregistered, and wait threads are woken to exit.</summary>
    public void Stop()
    {
        List<RegisteredWait> live = [];
        WaitThread[] threads;
        lock (_waitLock)
        {
            _waitsStopped = true;
            for (RegisteredWait? registration = _registrations; registration is not null; registration = registration.PoolNext)
            {
                live.Add(registration);
            }
            threads = [.. _waitThreads];
        }
        foreach (RegisteredWait registration in live)
        {
            registration.End();
        }
        foreach (WaitThread thread in threads)
        {
            thread.Wake();
        }
    }

    /// <summary>
    /// After <see cref="Stop"/>: wakes every wait thread so that it exits, and returns every wait thread that may still
    /// be running (the caller waits for them). No wait thread starts after the stop.
    /// </summary>
    /// <remarks>
    /// Every call returns every such thread: concurrent shutdown calls each wait for all of them, so none may take a
    /// thread from the list for itself. A thread that has left the list of running threads
    /// (<see cref="OnWaitThreadExitingLocked"/>) may still be running its last steps, which is why the exited ones stay
    /// listed until a later exit finds them dead.
    /// </remarks>
    public Thread[] ReleaseThreads()
    {
        Thread[] exited;
        WaitThread[] running;
        lock (_waitLock)
        {
            Debug.Assert(_waitsStopped);
            AssertThreadListsLocked();
            exited = [.. _exitedWaitThreads];
            running = [.. _waitThreads];
        }
        var threads = new Thread[exited.Length + running.Length];
        exited.CopyTo(threads, 0);
        for (int i = 0; i < running.Length; i++)
        {
            running[i].Wake();
            threads[exited.Length + i] = running[i].Thread;
        }
        return threads;
    }

    /// <summary>A wait thread is listed as running or as exited, never both (the move is made under the wait lock).</summary>
    [Conditional("DEBUG")]
    private void AssertThreadListsLocked()
    {
        Debug.Assert(Monitor.IsEntered(_waitLock));
        foreach (WaitThread thread in _waitThreads)
        {
            Debug.Assert(!thread.Exiting && !_exitedWaitThreads.Contains(thread.Thread), "A wait thread is listed both as running and as exited.");
        }
    }
}
