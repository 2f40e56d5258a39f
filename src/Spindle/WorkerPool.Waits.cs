using System;
using System.Collections.Generic;
using System.Threading;
using Spindle.Queues;
using Spindle.Registrations;

namespace Spindle;

// Registered waits.
//
// Two kinds share RegisteredWait (Waits/RegisteredWait.cs): registrations on a PoolSignal cost no thread (Set queues
// their callbacks; timeouts are entries of the pool's timing wheel), and registrations on any WaitHandle are watched by
// wait threads, 63 handles per thread (Waits/WaitThread.cs), the fewest WaitHandle.WaitAny allows.
//
// _waitLock guards the wait-thread list, each wait thread's Reserved count and pending changes, the list of live
// registrations (intrusive links in RegisteredWait) and _waitsStopped. Shutdown sets _waitsStopped and unregisters every
// live registration, so no callback is queued after it and none that was queued starts (the pool drains first).
public sealed partial class WorkerPool
{
    private readonly object _waitLock = new();
    private readonly List<WaitThread> _waitThreads = [];
    private readonly List<Thread> _exitedWaitThreads = [];
    private RegisteredWait? _registrations;
    private int _registrationCount;
    private bool _waitsStopped;

    /// <summary>Wait threads that exist right now (each watches up to 63 <see cref="WaitHandle"/> registrations).</summary>
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

    /// <summary>Registrations not yet unregistered (a snapshot).</summary>
    public int RegisteredWaitCount => Volatile.Read(ref _registrationCount);

    internal int IdleTimeoutMilliseconds => _idleTimeoutMs;

    /// <summary>
    /// Queues <paramref name="callBack"/> on this pool each time <paramref name="waitObject"/> is signalled or
    /// <paramref name="timeout"/> passes without a signal, like <see cref="ThreadPool.RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.
    /// </summary>
    /// <param name="waitObject">Any wait handle. Handles are watched by wait threads of this pool, 63 per thread (the
    /// most <see cref="WaitHandle.WaitAny(WaitHandle[], int)"/> allows besides the thread's own change event). A
    /// <see cref="PoolSignal"/> registration (<see cref="RegisterWait(PoolSignal, WaitOrTimerCallback, object?, TimeSpan, bool)"/>)
    /// needs no thread at all.</param>
    /// <param name="callBack">Called with <paramref name="state"/> and whether the wait timed out. It flows the caller's
    /// <see cref="ExecutionContext"/> when the pool does; exceptions follow the pool's <see cref="ExceptionPolicy"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="timeout">How long each wait lasts before the callback runs with <c>timedOut</c> true and the wait
    /// starts again; <see cref="Timeout.InfiniteTimeSpan"/> for none. The clock restarts after each signal and each
    /// timeout. A timeout is measured with the precise clock (<see cref="System.Diagnostics.Stopwatch"/>), fractions of
    /// a millisecond included, and never comes early.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <remarks>Disposing <paramref name="waitObject"/> while it is registered unregisters the registration.</remarks>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="timeout"/> is negative (other than infinite) or
    /// longer than <see cref="int.MaxValue"/> milliseconds.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, TimeSpan timeout, bool executeOnlyOnce)
    {
        ArgumentNullException.ThrowIfNull(waitObject);
        ArgumentNullException.ThrowIfNull(callBack);
        ValidateWaitTimeout(timeout);
        // As with the built-in pool, a disposed handle is refused here, before anything is recorded or a slot taken (a
        // handle disposed later is found by its wait thread, whose WaitAny throws for it, and unregistered there).
        ObjectDisposedException.ThrowIf(waitObject.SafeWaitHandle.IsClosed, waitObject);
        var registration = new RegisteredWait(this, callBack, state, CaptureContext(), timeout, executeOnlyOnce) { Handle = waitObject };
        WaitThread? target;
        lock (_waitLock)
        {
            ThrowIfWaitsStopped();
            target = FindWaitThreadWithRoomLocked();
            if (target is null)
            {
                // Started under the lock (once per 63 registrations), so that shutdown never finds an unstarted thread
                // to join. The new thread's first step takes the lock, so it simply waits for this call to finish.
                target = new WaitThread(this, _waitLock, $"{_threadNamePrefix} wait {_waitThreads.Count + 1}");
                // If the thread cannot be started, nothing has been recorded yet and the exception reaches the caller.
                target.Thread.UnsafeStart(target);
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

    /// <summary>Same as <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
    /// with the timeout in milliseconds (<see cref="Timeout.Infinite"/> for none).</summary>
    /// <param name="waitObject">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="callBack">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="millisecondsTimeout">The timeout in milliseconds; <see cref="Timeout.Infinite"/> for none.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="millisecondsTimeout"/> is less than -1.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, int millisecondsTimeout, bool executeOnlyOnce)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(millisecondsTimeout, -1);
        return RegisterWaitForSingleObject(waitObject, callBack, state, TimeSpan.FromMilliseconds(millisecondsTimeout), executeOnlyOnce);
    }

    /// <summary>Same as <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
    /// with the timeout in milliseconds (-1 for none).</summary>
    /// <param name="waitObject">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="callBack">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="millisecondsTimeout">The timeout in milliseconds, at most <see cref="int.MaxValue"/>; -1 for none.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="millisecondsTimeout"/> is less than -1 or greater
    /// than <see cref="int.MaxValue"/>.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, long millisecondsTimeout, bool executeOnlyOnce)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(millisecondsTimeout, -1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(millisecondsTimeout, int.MaxValue);
        return RegisterWaitForSingleObject(waitObject, callBack, state, TimeSpan.FromMilliseconds(millisecondsTimeout), executeOnlyOnce);
    }

    /// <summary>Same as <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
    /// with the timeout in milliseconds (<see cref="uint.MaxValue"/>, which is -1 as an unsigned number, for none).</summary>
    /// <param name="waitObject">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="callBack">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="millisecondsTimeout">The timeout in milliseconds, at most <see cref="int.MaxValue"/>;
    /// <see cref="uint.MaxValue"/> for none.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="millisecondsTimeout"/> is greater than
    /// <see cref="int.MaxValue"/> and is not <see cref="uint.MaxValue"/>.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, uint millisecondsTimeout, bool executeOnlyOnce)
    {
        if (millisecondsTimeout > int.MaxValue && millisecondsTimeout != uint.MaxValue)
        {
            throw new ArgumentOutOfRangeException(nameof(millisecondsTimeout), millisecondsTimeout, "The timeout must be at most int.MaxValue milliseconds, or uint.MaxValue for none.");
        }
        TimeSpan timeout = millisecondsTimeout == uint.MaxValue ? Timeout.InfiniteTimeSpan : TimeSpan.FromMilliseconds(millisecondsTimeout);
        return RegisterWaitForSingleObject(waitObject, callBack, state, timeout, executeOnlyOnce);
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> on this pool each time <paramref name="signal"/> releases the registration or
    /// <paramref name="timeout"/> passes without a release. The registration holds no thread: <see cref="PoolSignal.Set"/>
    /// queues the callback directly, and the timeout is an entry of the pool's timing wheel.
    /// </summary>
    /// <param name="signal">The signal. If it is set now, the callback is queued at once (an auto-reset signal is
    /// consumed).</param>
    /// <param name="callBack">Called with <paramref name="state"/> and whether the wait timed out. It flows the caller's
    /// <see cref="ExecutionContext"/> when the pool does; exceptions follow the pool's <see cref="ExceptionPolicy"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="timeout">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.
    /// The timeout is an entry of the pool's millisecond timing wheel: the first comes at the first wheel tick at or
    /// after the full timeout (fractions of a millisecond included), and a repeating registration's later timeouts come
    /// every timeout rounded up to whole milliseconds (at least one), so none comes early.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="signal"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="timeout"/> is negative (other than infinite) or
    /// longer than <see cref="int.MaxValue"/> milliseconds.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public RegisteredWait RegisterWait(PoolSignal signal, WaitOrTimerCallback callBack, object? state, TimeSpan timeout, bool executeOnlyOnce)
    {
        ArgumentNullException.ThrowIfNull(signal);
        ArgumentNullException.ThrowIfNull(callBack);
        ValidateWaitTimeout(timeout);
        var registration = new RegisteredWait(this, callBack, state, CaptureContext(), timeout, executeOnlyOnce);
        var waiter = new PoolSignal.RegistrationWaiter(signal, registration, this, registration.TimeoutTicks);
        registration.SignalWaiter = waiter;
        lock (_waitLock)
        {
            ThrowIfWaitsStopped();
            TrackLocked(registration);
        }
        signal.Register(waiter);
        return registration;
    }

    /// <summary>The timeout is kept whole (no rounding to milliseconds): see <see cref="RegisteredWait.TimeoutTicks"/>.</summary>
    private static void ValidateWaitTimeout(TimeSpan timeout)
    {
        if (timeout != Timeout.InfiniteTimeSpan && (timeout < TimeSpan.Zero || timeout.TotalMilliseconds > int.MaxValue))
        {
            throw new ArgumentOutOfRangeException(nameof(timeout), timeout, "The timeout must be between 0 and int.MaxValue milliseconds, or Timeout.InfiniteTimeSpan.");
        }
    }

    private void ThrowIfWaitsStopped()
    {
        if (_waitsStopped || _state != StateRunning)
        {
            ThrowShutDown();
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
        registration.PoolNext = _registrations;
        if (_registrations is not null)
        {
            _registrations.PoolPrevious = registration;
        }
        _registrations = registration;
        registration.InPoolList = true;
        _registrationCount++;
    }

    /// <summary>Called once per registration by its unregistration.</summary>
    internal void ForgetRegistration(RegisteredWait registration)
    {
        lock (_waitLock)
        {
            if (!registration.InPoolList)
            {
                return;
            }
            if (registration.PoolPrevious is null)
            {
                _registrations = registration.PoolNext;
            }
            else
            {
                registration.PoolPrevious.PoolNext = registration.PoolNext;
            }
            if (registration.PoolNext is not null)
            {
                registration.PoolNext.PoolPrevious = registration.PoolPrevious;
            }
            registration.PoolPrevious = null;
            registration.PoolNext = null;
            registration.InPoolList = false;
            _registrationCount--;
        }
    }

    /// <summary>A wait thread decided to exit (caller holds the wait lock).</summary>
    internal void OnWaitThreadExitingLocked(WaitThread thread)
    {
        _waitThreads.Remove(thread);
        _exitedWaitThreads.RemoveAll(static exited => !exited.IsAlive);
        _exitedWaitThreads.Add(thread.Thread);
    }

    /// <summary>Queues an entry on the global queue for any worker; false (dropping it) when the pool is shutting down.</summary>
    internal bool TryEnqueueShared(in WorkItemEntry entry)
    {
        if (!_globalQueue.TryEnqueue(entry))
        {
            return false;
        }
        WakeWorkerIfNeeded();
        return true;
    }

    /// <summary>Shutdown: no more registrations; every live one is unregistered, and wait threads are woken to exit.</summary>
    private void StopWaits()
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
            registration.UnregisterCore(null);
        }
        foreach (WaitThread thread in threads)
        {
            thread.Wake();
        }
    }

    private void JoinWaitThreads()
    {
        while (true)
        {
            Thread[] exited;
            WaitThread[] running;
            lock (_waitLock)
            {
                exited = [.. _exitedWaitThreads];
                _exitedWaitThreads.Clear();
                running = [.. _waitThreads];
            }
            foreach (Thread thread in exited)
            {
                thread.Join();
            }
            if (running.Length == 0)
            {
                return;
            }
            foreach (WaitThread thread in running)
            {
                thread.Wake();
                thread.Thread.Join();
            }
        }
    }
}
