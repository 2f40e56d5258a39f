using System;
using System.Diagnostics;
using System.IO;
using System.Threading;
using Microsoft.Win32.SafeHandles;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Registrations;

namespace Spindle;

/// <summary>
/// A registered wait of a <see cref="WorkerPool"/> (from <see cref="WorkerPool.RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
/// or <see cref="WorkerPool.RegisterWait(PoolSignal, WaitOrTimerCallback, object?, TimeSpan, bool)"/>): its callback is
/// queued to the pool each time the handle or signal is signalled or the timeout passes, until it is unregistered.
/// </summary>
/// <remarks>
/// <para>Callbacks of one registration never overlap: firings that come while a callback of the same registration is
/// queued or running are remembered and run one after another. The built-in pool runs them concurrently; here a
/// callback needs no lock against its own next firing, and a handle signalled faster than its callback runs holds one
/// worker, not all of them.</para>
/// <para>After <see cref="Unregister(WaitHandle?)"/> returns no callback of the registration starts; firings that were
/// queued and had not started are dropped. One that had started finishes, and the wait object passed to
/// <see cref="Unregister(WaitHandle?)"/> is signalled once it has (a blocking call returns once it has).</para>
/// <para>The pool also ends a registration by itself: when it shuts down, when a registered handle is disposed, and when
/// a run-once registration's callback has run (the pool then keeps nothing of it, so a caller that never unregisters it
/// leaks nothing). The first <see cref="Unregister(WaitHandle?)"/> call still succeeds then: it returns <see langword="true"/> and signals
/// its wait object once no callback is running, as <see cref="RegisteredWaitHandle.Unregister(WaitHandle?)"/> does when
/// it succeeds, so code that waits for that signal never waits forever.</para>
/// </remarks>
public sealed class RegisteredWait : IShutdownAware, Queues.ICallbackWrapper
{
    // _callbackState: the running-callback count in the low bits and the Unregistered flag. Callbacks enter with a CAS
    // that refuses once the flag is set, so after the flag is set the count only falls. The flag is set by whoever ends
    // the registration first (End): the user's Unregister, or the pool (shutdown, a disposed handle); the one that sets
    // it detaches the registration. The user's wait object is independent of who ended it: Unregister writes it, then
    // sets the flag (again, perhaps) with an atomic that also reads the count. A callback leaving decrements the count
    // (an atomic) and then reads the wait object. Both sides write, fence, then read what the other wrote, so either
    // Unregister reads a count of zero, or the callback that leaves last reads the wait object; whoever does signals it,
    // and the exchange to null in SignalUnregisterWaitObject makes that exactly once. A callback that leaves last before
    // any Unregister finds no wait object and signals nothing; the Unregister that comes later then reads a zero count.
    // _unregisterCalled (an exchange) lets only the user's first call do this: internal ends never touch it. A blocking
    // Unregister (a wait object with no OS handle) is the same protocol with an event of its own as the wait object,
    // which it then waits for; from inside the registration's own callback it does not wait, since that callback is
    // the only one running (callbacks never overlap) and it cannot end while its own thread waits for it.
    private const int UnregisteredFlag = 1 << 30;

    // The registration whose callback the current thread is running, if any (see the blocking Unregister).
    [ThreadStatic]
    private static RegisteredWait? t_runningCallbackOf;

    private static readonly Action<object?> s_run = static registration => ((RegisteredWait)registration!).RunFiring();

    private readonly WaitRegistry _registry;
    private readonly WaitOrTimerCallback _callback;
    private readonly object? _state;
    private readonly ExecutionContext? _context;
    private int _callbackState;
    private int _unregisterCalled;
    private int _firedOnce;
    private object? _unregisterWaitObject; // an EventWaitHandle, a Semaphore, or a blocking Unregister's event

    // Firings queued and not yet run: the total, and how many of them are timeouts. A firing that takes the total from
    // 0 to 1 queues the registration; each run takes one firing and queues the registration again if more are left.
    private int _pendingFirings;
    private int _pendingTimeouts;

    // Pool-wide list of live registrations (WaitRegistry), guarded by the pool's wait lock (see LinkBefore, Unlink).
    private RegisteredWait? _poolPrevious;
    private RegisteredWait? _poolNext;
    private bool _inPoolList;
    private WaitThread? _waitThread;
    private WaitHandle? _handle;
    private PoolSignal.RegistrationWaiter? _signalWaiter;

    /// <summary>The next registration of the pool's list (under the wait lock).</summary>
    internal RegisteredWait? PoolNext => _poolNext;

    /// <summary>Under the wait lock: puts this registration at the head of the pool's list, before <paramref name="head"/>.</summary>
    internal void LinkBefore(RegisteredWait? head)
    {
        Debug.Assert(!_inPoolList);
        _poolNext = head;
        if (head is not null)
        {
            head._poolPrevious = this;
        }
        _inPoolList = true;
    }

    /// <summary>
    /// Under the wait lock: takes this registration out of the pool's list, joining its neighbours. Returns false if it
    /// was not in the list; otherwise <paramref name="next"/> is the list's new head when this registration was the head
    /// (<paramref name="wasHead"/>).
    /// </summary>
    internal bool Unlink(out bool wasHead, out RegisteredWait? next)
    {
        next = _poolNext;
        wasHead = _poolPrevious is null;
        if (!_inPoolList)
        {
            return false;
        }
        if (_poolPrevious is not null)
        {
            _poolPrevious._poolNext = _poolNext;
        }
        if (_poolNext is not null)
        {
            _poolNext._poolPrevious = _poolPrevious;
        }
        _poolPrevious = null;
        _poolNext = null;
        _inPoolList = false;
        return true;
    }

    // The timeout is validated by the caller: zero to int.MaxValue milliseconds, or infinite. It is kept whole.
    /// <inheritdoc/>
    object? IShutdownAware.QueuedCallback => s_run;

    /// <summary>The registration's callback (stuck-item reports name it rather than the firing).</summary>
    object? Queues.ICallbackWrapper.WrappedCallback => _callback;

    /// <summary>A firing always runs at shutdown: it finds shutdown begun (and the registration ended) and runs no callback.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

    /// <summary>
    /// Once shutdown has begun a firing runs no callback (see <see cref="RunFiring"/>): one handed to the built-in pool
    /// after the stop is neither run there nor counted as a callback that ran.
    /// </summary>
    bool IShutdownAware.HasEnded => _registry.IsShutdownStarted;

    internal RegisteredWait(WaitRegistry registry, WaitOrTimerCallback callback, object? state, ExecutionContext? context, TimeSpan timeout, bool executeOnlyOnce)
    {
        _registry = registry;
        _callback = callback;
        _state = state;
        _context = context;
        Timeout = timeout;
        TimeoutTicks = timeout == System.Threading.Timeout.InfiniteTimeSpan ? -1 : Timers.PoolTimer.TimeSpanTicksToStopwatchTicksRoundedUp(timeout.Ticks);
        ExecuteOnlyOnce = executeOnlyOnce;
    }

    /// <summary>Whether the registration stops after its first callback.</summary>
    public bool ExecuteOnlyOnce { get; }

    /// <summary>The timeout as given at registration, or <see cref="Timeout.InfiniteTimeSpan"/>.</summary>
    public TimeSpan Timeout { get; }

    /// <summary>
    /// Whether the registration has ended: <see cref="Unregister(WaitHandle?)"/> has been called, the pool has begun to
    /// shut down, the registered handle was disposed, or the registration runs only once and its callback has run.
    /// </summary>
    public bool IsUnregistered => (Volatile.Read(ref _callbackState) & UnregisteredFlag) != 0;

    /// <summary>The timeout in Stopwatch ticks, rounded up (so never shorter than <see cref="Timeout"/>); -1 for none.</summary>
    internal long TimeoutTicks { get; }

    /// <summary>The wait thread watching the handle (handle registrations only; under the wait lock).</summary>
    internal WaitThread? WaitThread => _waitThread;

    /// <summary>Under the wait lock: the wait thread that watches the handle from now on (null: none any more).</summary>
    internal void AssignWaitThread(WaitThread? thread) => _waitThread = thread;

    /// <summary>The handle (handle registrations only).</summary>
    internal WaitHandle? Handle => _handle;

    /// <summary>The signal's waiter node (signal registrations only).</summary>
    internal PoolSignal.RegistrationWaiter? SignalWaiter => _signalWaiter;

    /// <summary>The registry, before the registration is published: what it waits on, a handle or a signal's waiter.</summary>
    internal void Attach(WaitHandle? handle, PoolSignal.RegistrationWaiter? signalWaiter)
    {
        Debug.Assert(_handle is null && _signalWaiter is null);
        _handle = handle;
        _signalWaiter = signalWaiter;
    }

    /// <summary>
    /// Cancels the registration: no callback starts after this call returns. If <paramref name="waitObject"/> is not
    /// null it is signalled once no callback of the registration is running (at once if none is), or, for a wait handle
    /// with no OS handle, the call itself waits for that, as <see cref="RegisteredWaitHandle.Unregister(WaitHandle?)"/>
    /// does. This holds also when the pool has already ended the registration (its shutdown, or a disposed handle): see
    /// the remarks.
    /// </summary>
    /// <param name="waitObject">An <see cref="EventWaitHandle"/> to set or a <see cref="Semaphore"/> to release by one
    /// (one already at its maximum count is left as it is: it is signalled already); a <see cref="WaitHandle"/> whose
    /// <see cref="WaitHandle.SafeWaitHandle"/> is invalid (a subclass that never set one) to return only once no callback
    /// is running (called from inside the registration's own callback, the call returns at once: the callback that
    /// called it is the only one running, and it cannot end while it waits); or null to return at once and signal
    /// nothing. Signalling it never throws, whether it happens in this call or later on the pool's worker that ran the
    /// last callback: a wait object that cannot be signalled then (disposed, or one the operating system refuses to
    /// signal) is left as it is, as the built-in pool leaves one.</param>
    /// <returns><see langword="true"/> on the first call, including when the pool had already ended the registration;
    /// <see langword="false"/> (doing nothing, and not signalling <paramref name="waitObject"/>) on later calls.</returns>
    /// <exception cref="ObjectDisposedException"><paramref name="waitObject"/> has been disposed (nothing changes: the
    /// registration stays registered).</exception>
    /// <exception cref="ArgumentException"><paramref name="waitObject"/> has an OS handle but is neither an
    /// <see cref="EventWaitHandle"/> nor a <see cref="Semaphore"/> (a <see cref="Mutex"/>, say, which only its owner
    /// can release).</exception>
    public bool Unregister(WaitHandle? waitObject)
    {
        bool blocking = false;
        if (waitObject is not null)
        {
            SafeWaitHandle handle = waitObject.SafeWaitHandle;
            ObjectDisposedException.ThrowIf(handle.IsClosed, waitObject);
            blocking = handle.IsInvalid;
            if (!blocking && waitObject is not EventWaitHandle and not Semaphore)
            {
                throw new ArgumentException("The wait object must be an EventWaitHandle, a Semaphore, or a wait handle with no OS handle.", nameof(waitObject));
            }
        }
        if (Interlocked.Exchange(ref _unregisterCalled, 1) != 0)
        {
            return false;
        }
        if (!blocking)
        {
            _unregisterWaitObject = waitObject; // before End's atomic, which orders it (see the protocol above)
            EndForUnregister();
        }
        else if (t_runningCallbackOf == this)
        {
            End(); // this thread's callback is the only one running: nothing to wait for, nothing to signal
        }
        else
        {
            var callbacksDone = new ManualResetEventSlim();
            _unregisterWaitObject = callbacksDone;
            EndForUnregister();
            callbacksDone.Wait();
        }
        return true;
    }

    /// <summary>Ends the registration for <see cref="Unregister(WaitHandle?)"/>, which has stored its wait object.</summary>
    private void EndForUnregister()
    {
        int previous = End();
        if ((previous & ~UnregisteredFlag) == 0)
        {
            SignalUnregisterWaitObject(); // nothing runs, and with the flag set nothing starts
        }
    }

    /// <summary>
    /// Ends the registration, for the user's <see cref="Unregister(WaitHandle?)"/> or for the pool (its shutdown, a
    /// disposed handle): no callback starts afterwards. Idempotent: the call that sets the flag detaches the
    /// registration. Returns the callback state as it was just before (the count of running callbacks, and the flag if
    /// the registration had already ended).
    /// </summary>
    internal int End()
    {
        int previous = Interlocked.Or(ref _callbackState, UnregisteredFlag);
        if ((previous & UnregisteredFlag) == 0)
        {
            Detach();
            _registry.ForgetRegistration(this);
        }
        return previous;
    }

    private void Detach()
    {
        if (SignalWaiter is { } waiter)
        {
            waiter.Detach();
        }
        else
        {
            WaitThread?.RequestRemoval(this);
        }
    }

    /// <summary>
    /// The handle or signal was signalled (<paramref name="timedOut"/> false) or the timeout passed: queue a callback.
    /// Returns false when the registration is done (unregistered, or a run-once registration that already fired).
    /// </summary>
    internal bool Fire(bool timedOut)
    {
        if (IsUnregistered)
        {
            return false;
        }
        if (ExecuteOnlyOnce && Interlocked.Exchange(ref _firedOnce, 1) != 0)
        {
            return false;
        }
        if (timedOut)
        {
            Interlocked.Increment(ref _pendingTimeouts);
        }
        if (Interlocked.Increment(ref _pendingFirings) == 1)
        {
            Queue();
        }
        return true;
    }

    private void Queue()
    {
        if (!_registry.TryQueueFiring(new WorkItemEntry(s_run, this, _context)))
        {
            // The pool is shutting down and unregisters every registration: the firing is dropped with it.
            Volatile.Write(ref _pendingFirings, 0);
        }
    }

    private void RunFiring()
    {
        bool timedOut = false;
        int timeouts = Volatile.Read(ref _pendingTimeouts);
        while (timeouts > 0)
        {
            int seen = Interlocked.CompareExchange(ref _pendingTimeouts, timeouts - 1, timeouts);
            if (seen == timeouts)
            {
                timedOut = true;
                break;
            }
            timeouts = seen;
        }
        try
        {
            // No wait callback starts once shutdown has begun, even in the moment before shutdown has reached this
            // registration to end it: a firing taken by a worker then runs nothing.
            if (!_registry.IsShutdownStarted && TryEnterCallback())
            {
                // For the stuck-item detector: every firing's callback is s_run.
                Worker? worker = OwnedItems.Enter(this);
                RegisteredWait? outer = t_runningCallbackOf;
                t_runningCallbackOf = this;
                try
                {
                    _callback(_state, timedOut);
                }
                finally
                {
                    t_runningCallbackOf = outer;
                    OwnedItems.Exit(worker);
                    ExitCallback();
                    if (ExecuteOnlyOnce)
                    {
                        // A run-once registration has run its callback: it has ended, and the pool's list lets go of it
                        // (its callback, state and handle), as the built-in pool does once the caller drops its handle.
                        // A later Unregister still returns true and signals its wait object (see the remarks).
                        End();
                    }
                }
            }
        }
        finally
        {
            if (Interlocked.Decrement(ref _pendingFirings) > 0)
            {
                Queue(); // more firings came meanwhile: run the next one after the items queued before it
            }
        }
    }

    private bool TryEnterCallback()
    {
        int state = Volatile.Read(ref _callbackState);
        while ((state & UnregisteredFlag) == 0)
        {
            int seen = Interlocked.CompareExchange(ref _callbackState, state + 1, state);
            if (seen == state)
            {
                return true;
            }
            state = seen;
        }
        return false;
    }

    private void ExitCallback()
    {
        int state = Interlocked.Decrement(ref _callbackState);
        Debug.Assert((state & ~UnregisteredFlag) >= 0);
        if (state == UnregisteredFlag)
        {
            SignalUnregisterWaitObject();
        }
    }

    /// <summary>
    /// Signals the wait object <see cref="Unregister(WaitHandle?)"/> stored, exactly once (the exchange picks who): on
    /// the thread that called it, or on the worker whose callback left last. Never throws for the caller's wait object,
    /// which may be a Semaphore already at its maximum count, disposed, or one the operating system refuses to signal:
    /// on a worker the exception would meet the pool's exception policy (under the default, the end of the process)
    /// for the caller's misuse, and on the calling thread it would come after the registration had ended, which the
    /// call cannot undo. The built-in pool ignores a failure to signal its wait object too.
    /// </summary>
    private void SignalUnregisterWaitObject()
    {
        switch (Interlocked.Exchange(ref _unregisterWaitObject, null))
        {
            case ManualResetEventSlim callbacksDone:
                callbacksDone.Set(); // the blocking Unregister's own event: nothing of the caller's, and it cannot fail
                break;
            case WaitHandle waitObject:
                TrySignal(waitObject);
                break;
        }
    }

    private static void TrySignal(WaitHandle waitObject)
    {
        Debug.Assert(waitObject is EventWaitHandle or Semaphore, "Unregister admits no other kind of wait object.");
        try
        {
            if (waitObject is Semaphore semaphore)
            {
                semaphore.Release();
            }
            else
            {
                ((EventWaitHandle)waitObject).Set();
            }
        }
        catch (SemaphoreFullException)
        {
            // At its maximum count the semaphore is signalled already (a wait on it returns at once): it stays as it is.
        }
        catch (ObjectDisposedException)
        {
            // The caller disposed its wait object before the last callback finished: nobody can be waiting on it.
        }
        catch (Exception exception) when (exception is IOException or UnauthorizedAccessException)
        {
            // The operating system refused to signal it (a handle opened without the right to modify it): it stays
            // unsignalled, as the built-in pool leaves a handle that its SetEvent fails on.
        }
    }
}
