using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;

namespace Spindle.Registrations;

/// <summary>
/// A thread that waits on up to <see cref="MaxHandles"/> registered <see cref="WaitHandle"/>s at once (plus its own
/// change event: <see cref="WaitHandle.WaitAny(WaitHandle[], int)"/> takes at most 64), queueing each registration's
/// callback when its handle is signalled or its timeout passes.
/// </summary>
/// <remarks>
/// <para>Protocol: <see cref="_registrations"/>, <see cref="_deadlines"/>, <see cref="_handles"/> and
/// <see cref="_count"/> belong to the thread alone. Other threads hand it changes through <see cref="_pendingAdds"/> and
/// <see cref="_pendingRemovals"/> under the pool's wait lock, and set <see cref="_changed"/>, which sits first in the
/// wait array: <c>WaitAny</c> reports the lowest signalled index, so changes are seen before any handle.
/// <see cref="Reserved"/> (registrations assigned, applied or not) is also guarded by the wait lock; the pool uses it
/// to pick a thread with room, and the thread exits, under the lock, once it is zero.</para>
/// </remarks>
internal sealed class WaitThread : IDisposable
{
    internal const int MaxHandles = 63;

    private readonly WaitRegistry _registry;
    private readonly object _waitLock;
    private readonly AutoResetEvent _changed = new(false);
    private readonly RegisteredWait[] _registrations = new RegisteredWait[MaxHandles];
    private readonly long[] _deadlines = new long[MaxHandles];
    private readonly List<RegisteredWait> _pendingAdds = [];
    private readonly List<RegisteredWait> _pendingRemovals = [];
    private WaitHandle[] _handles;
    private int _count;
    private bool _handlesDirty;
    private volatile bool _changesPending = true; // the first pass always looks at the pending adds, under the lock

    public WaitThread(WaitRegistry registry, object waitLock, string name, Func<ThreadStart, Thread>? factory)
    {
        _registry = registry;
        _waitLock = waitLock;
        _handles = [_changed];
        Thread = factory is not null ? factory(Main) : new Thread(Main, 256 * 1024);
        Thread.IsBackground = true;
        Thread.Name = name;
    }

    public Thread Thread { get; }

    /// <summary>Registrations assigned to this thread (guarded by the pool's wait lock).</summary>
    public int Reserved { get; private set; }

    /// <summary>Set under the wait lock when the thread has decided to exit: it takes no more registrations.</summary>
    public bool Exiting { get; private set; }

    /// <summary>Caller holds the wait lock and has checked <see cref="Reserved"/> &lt; <see cref="MaxHandles"/>.</summary>
    public void AddLocked(RegisteredWait registration)
    {
        Debug.Assert(Monitor.IsEntered(_waitLock) && Reserved < MaxHandles && !Exiting);
        registration.AssignWaitThread(this);
        _pendingAdds.Add(registration);
        Reserved++;
        _changesPending = true;
    }

    /// <summary>Hands the thread a change it must apply (after <see cref="AddLocked"/> or <see cref="RequestRemoval"/>).</summary>
    public void NotifyChanged() => _changed.Set();

    public void RequestRemoval(RegisteredWait registration)
    {
        lock (_waitLock)
        {
            if (registration.WaitThread != this)
            {
                return; // its slot is released already (a run-once registration that fired, or a disposed handle)
            }
            ReleaseSlotLocked(registration);
            if (_pendingAdds.Remove(registration))
            {
                return; // never reached the wait array
            }
            _pendingRemovals.Add(registration);
            _changesPending = true;
        }
        Wake();
    }

    /// <summary>
    /// Caller holds the wait lock: the registration stops counting against this thread's 63 (exactly once: whoever
    /// clears <see cref="RegisteredWait.WaitThread"/> does it). Its wait-array slot, if any, goes at the next change.
    /// </summary>
    private void ReleaseSlotLocked(RegisteredWait registration)
    {
        Debug.Assert(Monitor.IsEntered(_waitLock) && registration.WaitThread == this);
        registration.AssignWaitThread(null);
        Reserved--;
    }

    /// <summary>Shutdown: wake the thread so it sees its (unregistered) registrations go.</summary>
    public void Wake()
    {
        _changesPending = true; // let the thread look at the lock-protected state (shutdown, idle exit)
        try
        {
            _changed.Set();
        }
        catch (ObjectDisposedException)
        {
            // It has exited already.
        }
    }

    /// <summary>Releases the change event; the thread calls it itself as it exits.</summary>
    public void Dispose() => _changed.Dispose();

    private void Main()
    {
        bool idleExpired = false;
        while (true)
        {
            if (!ApplyChanges(idleExpired))
            {
                Dispose();
                return;
            }
            idleExpired = false;
            // With nothing to watch the thread lingers for the pool's idle timeout, so that a pattern of register and
            // unregister does not start a thread each time.
            int timeout = _count == 0 ? _registry.IdleTimeoutMilliseconds : MillisecondsToNextDeadline();
            int index;
            try
            {
                index = WaitHandle.WaitAny(_handles, timeout);
            }
            catch (AbandonedMutexException abandoned) when (abandoned.MutexIndex > 0)
            {
                index = abandoned.MutexIndex; // the mutex is now owned by this thread, as with the built-in pool
            }
            catch (ObjectDisposedException)
            {
                RemoveDisposedHandles();
                continue;
            }
            if (index == WaitHandle.WaitTimeout)
            {
                if (_count == 0)
                {
                    idleExpired = true;
                }
                else
                {
                    FireTimeouts();
                }
            }
            else if (index > 0)
            {
                OnSignalled(index - 1);
            }
        }
    }

    /// <summary>
    /// Applies queued adds and removals and rebuilds the wait array if needed. Returns false when the thread should exit:
    /// nothing to watch, and either idle for the idle timeout or the pool is shutting down.
    /// </summary>
    private bool ApplyChanges(bool idleExpired)
    {
        bool changed = _handlesDirty;
        // The common case, a wait after a signal, takes no lock: a thousand wait threads woken at once would otherwise
        // queue on the pool's wait lock. Writers set the flag under the lock before waking the thread, and the thread
        // clears it under the lock before reading what they wrote, so no change is missed.
        if (!_changesPending && !idleExpired)
        {
            if (changed)
            {
                RebuildHandles();
            }
            return true;
        }
        lock (_waitLock)
        {
            _changesPending = false;
            foreach (RegisteredWait removal in _pendingRemovals)
            {
                changed |= RemoveLocal(removal);
            }
            _pendingRemovals.Clear();
            long now = Stopwatch.GetTimestamp(); // after every pending registration call: their timeouts count from here
            foreach (RegisteredWait add in _pendingAdds)
            {
                if (add.IsUnregistered)
                {
                    continue; // its Unregister releases the slot (RequestRemoval)
                }
                _registrations[_count] = add;
                _deadlines[_count] = DeadlineFor(add, now);
                _count++;
                changed = true;
            }
            _pendingAdds.Clear();
            if (Reserved == 0 && (idleExpired || _registry.IsStoppedLocked))
            {
                Debug.Assert(_count == 0);
                Exiting = true;
                _registry.OnWaitThreadExitingLocked(this);
                return false;
            }
        }
        if (changed)
        {
            RebuildHandles();
        }
        return true;
    }

    private void RebuildHandles()
    {
        _handlesDirty = false;
        var handles = new WaitHandle[_count + 1];
        handles[0] = _changed;
        for (int i = 0; i < _count; i++)
        {
            handles[i + 1] = _registrations[i].Handle!;
        }
        _handles = handles;
    }

    private bool RemoveLocal(RegisteredWait registration)
    {
        for (int i = 0; i < _count; i++)
        {
            if (_registrations[i] == registration)
            {
                RemoveAt(i);
                return true;
            }
        }
        return false;
    }

    /// <summary>
    /// Thread only: stops watching slot <paramref name="slot"/> (a run-once registration that fired, a disposed handle)
    /// and releases its accounting unless its Unregister already did. The wait array is rebuilt before the next wait.
    /// </summary>
    private void DropLocal(int slot, RegisteredWait registration)
    {
        lock (_waitLock)
        {
            RemoveAt(slot);
            if (registration.WaitThread == this)
            {
                ReleaseSlotLocked(registration);
            }
        }
    }

    /// <summary>Removes slot <paramref name="i"/> from the local arrays (the handle array is rebuilt by the caller's next ApplyChanges).</summary>
    private void RemoveAt(int i)
    {
        _count--;
        _registrations[i] = _registrations[_count];
        _deadlines[i] = _deadlines[_count];
        _registrations[_count] = null!;
        _handlesDirty = true;
    }

    // Deadlines are Stopwatch timestamps: the clock read when the wait (re)starts plus the timeout in Stopwatch ticks,
    // rounded up (RegisteredWait.TimeoutTicks), so a fraction of a millisecond is never lost. A registration is due once
    // the clock has reached its deadline; WaitAny, which takes whole milliseconds, is given the time left rounded up, and
    // a wake that comes before the deadline finds nothing due and waits again. (Environment.TickCount64 reads the
    // kernel's coarse clock on Linux, which trails the real time by up to a tick and a millisecond, and whole-millisecond
    // deadlines cut the fraction off a timeout: either let timeouts come early.)
    private static long DeadlineFor(RegisteredWait registration, long now) =>
        registration.TimeoutTicks < 0 ? long.MaxValue : now + registration.TimeoutTicks;

    // Rounded down: where the frequency is not a whole number of kilohertz, the waits below come out a little longer,
    // never shorter.
    private static readonly long s_ticksPerMillisecond = Math.Max(1, Stopwatch.Frequency / 1000);

    private int MillisecondsToNextDeadline()
    {
        long earliest = long.MaxValue;
        for (int i = 0; i < _count; i++)
        {
            earliest = Math.Min(earliest, _deadlines[i]);
        }
        if (earliest == long.MaxValue)
        {
            return Timeout.Infinite;
        }
        long left = earliest - Stopwatch.GetTimestamp();
        if (left <= 0)
        {
            return 0;
        }
        long milliseconds = left / s_ticksPerMillisecond + (left % s_ticksPerMillisecond != 0 ? 1 : 0);
        return (int)Math.Min(milliseconds, int.MaxValue - 1);
    }

    private void OnSignalled(int slot)
    {
        RegisteredWait registration = _registrations[slot];
        registration.Fire(timedOut: false);
        if (registration.ExecuteOnlyOnce)
        {
            DropLocal(slot, registration); // a run-once registration fired: its later Unregister finds nothing to remove
        }
        else
        {
            _deadlines[slot] = DeadlineFor(registration, Stopwatch.GetTimestamp());
        }
    }

    private void FireTimeouts()
    {
        long now = Stopwatch.GetTimestamp(); // also where repeated timeouts start again: at or after their deadline
        for (int i = _count - 1; i >= 0; i--)
        {
            if (_deadlines[i] > now)
            {
                continue;
            }
            RegisteredWait registration = _registrations[i];
            registration.Fire(timedOut: true);
            if (registration.ExecuteOnlyOnce)
            {
                DropLocal(i, registration);
            }
            else
            {
                _deadlines[i] = DeadlineFor(registration, now);
            }
        }
    }

    /// <summary>
    /// A handle was disposed while registered: its registration ends (no callback; the user's first Unregister still
    /// returns true and signals its wait object).
    /// </summary>
    private void RemoveDisposedHandles()
    {
        for (int i = _count - 1; i >= 0; i--)
        {
            RegisteredWait registration = _registrations[i];
            bool disposed;
            try
            {
                disposed = registration.Handle!.SafeWaitHandle.IsClosed;
            }
            catch (ObjectDisposedException)
            {
                disposed = true;
            }
            if (disposed)
            {
                DropLocal(i, registration);
                registration.End();
            }
        }
    }
}
