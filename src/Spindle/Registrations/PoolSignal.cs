using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Timers;

namespace Spindle;

/// <summary>Whether a <see cref="PoolSignal"/> resets itself after releasing one waiter.</summary>
public enum PoolSignalMode
{
    /// <summary>Like <see cref="AutoResetEvent"/>: each <see cref="PoolSignal.Set"/> releases one waiter, or stays set until one comes.</summary>
    AutoReset,

    /// <summary>Like <see cref="ManualResetEvent"/>: <see cref="PoolSignal.Set"/> releases every waiter and stays set until <see cref="PoolSignal.Reset"/>.</summary>
    ManualReset,
}

/// <summary>
/// An event that <see cref="WorkerPool"/> registrations wait on without any thread:
/// <see cref="WorkerPool.RegisterWait(PoolSignal, WaitOrTimerCallback, object?, TimeSpan, bool)"/> links a registration
/// into the signal, and <see cref="Set"/> queues the registered callbacks directly as work items. It can also be awaited.
/// </summary>
/// <remarks>
/// <para>Waiters are released in the order they started waiting. With <see cref="PoolSignalMode.AutoReset"/>, a
/// <see cref="Set"/> releases one waiter; a repeating registration released this way goes to the back of the line, so
/// several repeating registrations on one signal take turns.</para>
/// <para>A repeating registration fires once per <see cref="Set"/> that releases it: on a manual-reset signal that stays
/// set it does not fire again and again (as a repeating wait on a set <see cref="ManualResetEvent"/> would), but on the
/// next <see cref="Set"/>.</para>
/// <para>All members are thread-safe. The signal holds no operating-system handle and needs no disposal.</para>
/// </remarks>
public sealed class PoolSignal
{
    // Protocol: _isSet and the waiter list are written under _lock only. A one-shot waiter (an awaiter, a run-once
    // registration) is released by whoever unlinks it under the lock: Set, its cancellation, its timeout or its
    // unregistration; so exactly one of them acts on it. Repeating registrations stay linked until unregistered.
    // Releases (queueing callbacks, completing tasks) happen after the lock is let go.
    private readonly Lock _lock = new();
    private volatile bool _isSet;
    private Waiter? _head;
    private Waiter? _tail;

    /// <summary>Creates a signal.</summary>
    /// <param name="initialState">Whether the signal starts set.</param>
    /// <param name="mode">Auto-reset (the default) or manual-reset.</param>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="mode"/> is not a defined value.</exception>
    public PoolSignal(bool initialState = false, PoolSignalMode mode = PoolSignalMode.AutoReset)
    {
        if (mode is not PoolSignalMode.AutoReset and not PoolSignalMode.ManualReset)
        {
            throw new ArgumentOutOfRangeException(nameof(mode), mode, "Unknown signal mode.");
        }
        Mode = mode;
        _isSet = initialState;
    }

    /// <summary>Auto-reset or manual-reset.</summary>
    public PoolSignalMode Mode { get; }

    /// <summary>Whether the signal is set right now (a snapshot).</summary>
    public bool IsSet => _isSet;

    /// <summary>
    /// Sets the signal. Auto-reset: releases the first waiter, or stays set until a waiter comes. Manual-reset: releases
    /// every waiter and stays set. Released registrations have their callbacks queued on their pool; released awaiters
    /// continue asynchronously (never inline on the calling thread).
    /// </summary>
    public void Set()
    {
        if (Mode == PoolSignalMode.AutoReset)
        {
            Waiter? released = null;
            lock (_lock)
            {
                if (_head is null)
                {
                    _isSet = true;
                    return;
                }
                released = _head;
                if (released.Repeating)
                {
                    MoveToBack(released);
                }
                else
                {
                    Unlink(released);
                }
            }
            released.Release();
            return;
        }

        List<Waiter>? releasedAll = null;
        Waiter? single = null;
        lock (_lock)
        {
            _isSet = true;
            for (Waiter? waiter = _head; waiter is not null;)
            {
                Waiter? next = waiter.Next;
                if (!waiter.Repeating)
                {
                    Unlink(waiter);
                }
                if (single is null)
                {
                    single = waiter;
                }
                else
                {
                    (releasedAll ??= [single]).Add(waiter);
                }
                waiter = next;
            }
        }
        if (releasedAll is not null)
        {
            foreach (Waiter waiter in releasedAll)
            {
                waiter.Release();
            }
        }
        else
        {
            single?.Release();
        }
    }

    /// <summary>Clears the signal (releases nothing).</summary>
    public void Reset()
    {
        lock (_lock)
        {
            _isSet = false;
        }
    }

    /// <summary>
    /// Waits asynchronously for the signal. Completes at once if it is set (consuming the set, for auto-reset). The
    /// continuation runs asynchronously, not on the thread that calls <see cref="Set"/>.
    /// </summary>
    /// <exception cref="OperationCanceledException">(In the task) <paramref name="cancellationToken"/> fired first.</exception>
    public Task WaitAsync(CancellationToken cancellationToken = default)
    {
        if (cancellationToken.IsCancellationRequested)
        {
            return Task.FromCanceled(cancellationToken);
        }
        AsyncWaiter waiter;
        lock (_lock)
        {
            if (_isSet)
            {
                if (Mode == PoolSignalMode.AutoReset)
                {
                    _isSet = false;
                }
                return Task.CompletedTask;
            }
            waiter = new AsyncWaiter(this);
            Link(waiter);
        }
        waiter.WatchCancellation(cancellationToken);
        return waiter.Task;
    }

    /// <summary>Lets <c>await signal;</c> wait for the signal (see <see cref="WaitAsync(CancellationToken)"/>).</summary>
    public TaskAwaiter GetAwaiter() => WaitAsync().GetAwaiter();

    /// <summary>
    /// Links a registration (pool side of <see cref="WorkerPool.RegisterWait(PoolSignal, WaitOrTimerCallback, object?, TimeSpan, bool)"/>).
    /// A set signal fires it at once (consumed, for auto-reset); a run-once registration fired that way is not linked.
    /// </summary>
    internal void Register(RegistrationWaiter waiter)
    {
        bool fireNow = false;
        lock (_lock)
        {
            if (_isSet)
            {
                fireNow = true;
                if (Mode == PoolSignalMode.AutoReset)
                {
                    _isSet = false;
                }
            }
            if (!fireNow || waiter.Repeating)
            {
                Link(waiter);
            }
        }
        waiter.Start(fireNow);
    }

    /// <summary>Unlinks <paramref name="waiter"/> if it is still linked; true if this call did it (and so owns its release).</summary>
    private bool TryUnlink(Waiter waiter)
    {
        lock (_lock)
        {
            if (!waiter.Linked)
            {
                return false;
            }
            Unlink(waiter);
            return true;
        }
    }

    private void Link(Waiter waiter)
    {
        if (_tail is null)
        {
            _head = waiter;
        }
        waiter.LinkAfter(_tail);
        _tail = waiter;
    }

    private void Unlink(Waiter waiter)
    {
        waiter.Unlink(out Waiter? previous, out Waiter? next);
        if (previous is null)
        {
            _head = next;
        }
        if (next is null)
        {
            _tail = previous;
        }
    }

    private void MoveToBack(Waiter waiter)
    {
        if (_tail != waiter)
        {
            Unlink(waiter);
            Link(waiter);
        }
    }

    /// <summary>A node of the waiter list; fields are guarded by the signal's lock.</summary>
    internal abstract class Waiter
    {
        private Waiter? _previous;
        private Waiter? _next;
        private bool _linked;

        /// <summary>The next waiter of the list (under the signal's lock).</summary>
        internal Waiter? Next => _next;

        /// <summary>Whether the waiter is in the signal's list (under the signal's lock).</summary>
        internal bool Linked => _linked;

        /// <summary>Under the signal's lock: appends this waiter after <paramref name="tail"/> (null: the list was empty).</summary>
        internal void LinkAfter(Waiter? tail)
        {
            _linked = true;
            _previous = tail;
            _next = null;
            if (tail is not null)
            {
                tail._next = this;
            }
        }

        /// <summary>Under the signal's lock: takes this waiter out of the list, joining its neighbours, and returns them.</summary>
        internal void Unlink(out Waiter? previous, out Waiter? next)
        {
            previous = _previous;
            next = _next;
            if (previous is not null)
            {
                previous._next = next;
            }
            if (next is not null)
            {
                next._previous = previous;
            }
            _previous = null;
            _next = null;
            _linked = false;
        }

        /// <summary>Stays linked after a release (repeating registrations).</summary>
        internal abstract bool Repeating { get; }

        /// <summary>Acts on a release; called outside the lock, once per release.</summary>
        internal abstract void Release();
    }

    /// <summary>An awaited wait: a task released by a set, or cancelled by its token.</summary>
    /// <remarks>
    /// The token's registration and the release race: <see cref="WaitAsync(CancellationToken)"/> links the waiter under
    /// the signal's lock and registers on the token after it (a token already cancelled runs the callback at once, which
    /// must find the waiter linked), so a set in between releases a waiter whose registration does not exist yet. Whichever
    /// of the two comes second disposes the registration: the registration is written, then published by a CAS of
    /// <c>_state</c> from none to registered; the release exchanges <c>_state</c> to released and disposes the
    /// registration only if it read registered (so it reads a whole one); a registration that finds released disposes its
    /// own. Without this, a waiter released in that window stayed registered on a long-lived token, reachable from it
    /// until the token's source was cancelled or collected.
    /// </remarks>
    private sealed class AsyncWaiter : Waiter
    {
        private const int NoRegistration = 0;
        private const int Registered = 1;
        private const int Released = 2;

        private readonly PoolSignal _signal;
        private readonly TaskCompletionSource _completion = new(TaskCreationOptions.RunContinuationsAsynchronously);
        private CancellationTokenRegistration _registration;
        private int _state;

        public AsyncWaiter(PoolSignal signal) => _signal = signal;

        public Task Task => _completion.Task;

        internal override bool Repeating => false;

        public void WatchCancellation(CancellationToken cancellationToken)
        {
            if (!cancellationToken.CanBeCanceled)
            {
                return;
            }
            CancellationTokenRegistration registration = cancellationToken.UnsafeRegister(static (state, token) =>
            {
                var waiter = (AsyncWaiter)state!;
                if (waiter._signal.TryUnlink(waiter))
                {
                    waiter._completion.TrySetCanceled(token);
                }
            }, this);
            _registration = registration;
            if (Interlocked.CompareExchange(ref _state, Registered, NoRegistration) == Released)
            {
                registration.Dispose(); // released before the registration existed: nobody else will dispose it
            }
        }

        internal override void Release()
        {
            if (Interlocked.Exchange(ref _state, Released) == Registered)
            {
                _registration.Dispose();
            }
            _completion.TrySetResult();
        }
    }

    /// <summary>The signal side of a <see cref="RegisteredWait"/>: fires it on release, and owns its timeout timer.</summary>
    internal sealed class RegistrationWaiter : Waiter
    {
        private static readonly TimerCallback s_onTimeout = static state => ((RegistrationWaiter)state!).OnTimeout();

        private readonly PoolSignal _signal;
        private readonly RegisteredWait _registration;
        private readonly TimerService _timers;
        private readonly long _timeoutTicks;
        private ITimer? _timeoutTimer;

        public RegistrationWaiter(PoolSignal signal, RegisteredWait registration, TimerService timers, long timeoutTicks)
        {
            _signal = signal;
            _registration = registration;
            _timers = timers;
            _timeoutTicks = timeoutTicks;
        }

        internal override bool Repeating => !_registration.ExecuteOnlyOnce;

        /// <summary>After linking: fire now (the signal was set) and start the timeout clock.</summary>
        public void Start(bool fireNow)
        {
            if (fireNow)
            {
                _registration.Fire(timedOut: false);
                if (!Repeating)
                {
                    return;
                }
            }
            if (_timeoutTicks >= 0)
            {
                // A repeating zero timeout would fire without pause: it fires once per wheel tick instead.
                long period = Repeating ? Math.Max(_timeoutTicks, TimerService.s_ticksPerWheelTick) : -1;
                var timer = new PoolTimer(_timers, s_onTimeout, this, null);
                Volatile.Write(ref _timeoutTimer, timer);
                // From a clock read under the timer lock (the registry started the timer thread): a Set between the
                // publication above and this start has restarted the timer from its own moment, and a clock read
                // before it would put the timeout back to less than a timeout after that Set.
                timer.Restart(_timeoutTicks, period);
                if (_registration.IsUnregistered)
                {
                    timer.Dispose(); // an Unregister that ran before the timer was published
                }
            }
        }

        internal override void Release()
        {
            if (!_registration.Fire(timedOut: false))
            {
                return;
            }
            if (Volatile.Read(ref _timeoutTimer) is PoolTimer timer)
            {
                if (Repeating)
                {
                    // The timeout counts from the last release, as a wait thread's would, and from no earlier than
                    // the last timeout: a timeout that expired while this release was on its way must not be followed
                    // by another one less than a timeout later (see PoolTimer.Restart).
                    timer.Restart(_timeoutTicks, Math.Max(_timeoutTicks, TimerService.s_ticksPerWheelTick));
                }
                else
                {
                    timer.Dispose();
                }
            }
        }

        private void OnTimeout()
        {
            if (Repeating)
            {
                // The next timeout counts from this one's callback, as a wait thread's counts from the timeout it
                // detects, not from the due time of this one: a timer thread or a worker that came late would
                // otherwise bring the next timeout less than a timeout after this one.
                if (Volatile.Read(ref _timeoutTimer) is PoolTimer timer)
                {
                    timer.Restart(_timeoutTicks, Math.Max(_timeoutTicks, TimerService.s_ticksPerWheelTick));
                }
                _registration.Fire(timedOut: true);
            }
            else if (_signal.TryUnlink(this))
            {
                _registration.Fire(timedOut: true);
            }
        }

        /// <summary>Unregistration: leave the signal and stop the timeout clock.</summary>
        public void Detach()
        {
            _signal.TryUnlink(this);
            Volatile.Read(ref _timeoutTimer)?.Dispose();
        }
    }
}
