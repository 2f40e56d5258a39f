using System;
using System.Diagnostics;
using System.Threading;
using Spindle.Queues;
using Spindle.Scheduling;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle.Polling;

/// <summary>What a <see cref="ReadinessWaiter"/> calls back (on a worker of the pool) once a wait it armed has ended.</summary>
internal interface IReadinessListener
{
    /// <summary>The wait ended: readiness came, or <see cref="ReadinessWaiter.EndWait"/> returns why not (cancelled, closed).</summary>
    void OnReady();
}

/// <summary>How <see cref="ReadinessWaiter.Arm"/> went.</summary>
internal enum ArmResult
{
    /// <summary>Armed: the listener will be called on the pool.</summary>
    Waiting,

    /// <summary>Readiness came since the attempt: try again now.</summary>
    Ready,

    /// <summary>The waiter is closed (socket disposed, pool shutting down).</summary>
    Closed,
}

/// <summary>
/// One direction (read or write) of a socket registered with the pool's I/O driver: counts the readiness events the
/// poller reports, and lets one operation at a time wait for the next one, without allocating.
/// </summary>
/// <remarks>
/// <para>Protocol. <see cref="_sequence"/> is written by the poller only (<see cref="Signal"/>: an interlocked increment,
/// then a look at <see cref="_state"/>). An operation reads the sequence before its system call; on <c>EAGAIN</c> it
/// calls <see cref="Arm"/> with what it read, which arms the waiter (an interlocked exchange) and then looks at the
/// sequence again. Both sides write with a full fence before they read the other's field, so at least one sees the
/// other: a readiness event that raced the failed call either makes <see cref="Arm"/> answer
/// <see cref="ArmResult.Ready"/> or finds the waiter armed and fires it. The driver is edge-triggered, so an event is
/// never repeated: this is what keeps it from being lost.</para>
/// <para>States: Idle, Armed (a listener waits), Firing (one party won the race to end the wait and is writing why),
/// Fired. The poller, a cancellation callback, <see cref="Close"/> and the arming call's own look at its token compete
/// to fire with a compare-exchange from Armed; exactly one wins, and it queues the listener's
/// <see cref="IReadinessListener.OnReady"/> to the pool (never runs it on the poller thread). The listener calls
/// <see cref="EndWait"/> there, which returns the waiter to Idle.</para>
/// <para>Each arming is a wait of its own: the state word carries the arming's number beside the state
/// (<see cref="GenerationStep"/>), and a party that fires compares against the whole word it read. So a party that read
/// Armed and was then delayed can only end the wait it saw, never a later one armed meanwhile. Without the number, the
/// arming call's look at an already cancelled token (which runs after the arming) could lose the race to the poller,
/// stall while the listener ended that wait, the operation completed and the next operation of the direction armed
/// again, then win against the next wait and end it with the earlier operation's cancellation: traced on one core, a
/// send failed with the token of the send before it, which its caller had never cancelled.</para>
/// <para>The cancellation registration is written by <see cref="Arm"/> before it arms, and disposed by whoever ends
/// that wait: <see cref="EndWait"/>, or <see cref="Arm"/> itself when it disarms at once. So a registration never
/// outlives its wait, and a token's late callback can only reach the wait it was registered for; its callback is given
/// its own token, which it reports.</para>
/// </remarks>
internal sealed class ReadinessWaiter
{
    private const int Idle = 0;
    private const int Armed = 1;
    private const int Firing = 2;
    private const int Fired = 3;
    private const int StateMask = 3;

    /// <summary>The state word's unit of arming numbers: the low bits hold the state, the rest count armings (wrapping).</summary>
    private const int GenerationStep = StateMask + 1;

    private static readonly Action<object?, CancellationToken> s_cancel =
        static (waiter, token) => ((ReadinessWaiter)waiter!).FireCancelled(token);
    // A readiness wake-up resumes an operation the socket accepted: shutdown runs it in both modes (see ContinuationCallback).
    private static readonly Action<object?> s_ready = new ContinuationCallback(static listener => ((IReadinessListener)listener!).OnReady()).Run;

    private readonly Scheduler _scheduler;
    private readonly Func<Exception> _closedError;
    private int _sequence;
    private int _state;
    private bool _closed;
    private bool _hungUp;
    private Exception? _error;
    private IReadinessListener? _listener;
    private CancellationTokenRegistration _registration;

    public ReadinessWaiter(Scheduler scheduler, Func<Exception> closedError)
    {
        _scheduler = scheduler;
        _closedError = closedError;
    }

    /// <summary>Readiness events seen so far (read before an attempt, passed to <see cref="Arm"/> after it fails).</summary>
    public int Sequence => Volatile.Read(ref _sequence);

    /// <summary>
    /// Whether an event has reported the peer's end of stream, a hang-up or an error (<see cref="MarkHungUp"/>). Once
    /// that is so, an attempt can end without emptying the socket (a receive that took the last bytes and the end of
    /// stream with them; the next reads 0 at once) and no event will say so again.
    /// </summary>
    public bool HasHungUp => Volatile.Read(ref _hungUp);

    /// <summary>Whether <see cref="Close"/> has run: every wait from now on ends at once.</summary>
    public bool IsClosed => Volatile.Read(ref _closed);

    /// <summary>
    /// Poller, before the <see cref="Signal"/> of an event that reports the peer's end of stream, a hang-up or an
    /// error: sets <see cref="HasHungUp"/> for good. Written before the signal's interlocked increment, so an operation
    /// that has read the incremented <see cref="Sequence"/> sees it.
    /// </summary>
    public void MarkHungUp() => Volatile.Write(ref _hungUp, true);

    /// <summary>Poller: a readiness event for this direction.</summary>
    public void Signal()
    {
        Interlocked.Increment(ref _sequence);
        int word = Volatile.Read(ref _state);
        if ((word & StateMask) == Armed)
        {
            Fire(word, null);
        }
    }

    /// <summary>Ends the pending wait, if any, and every later one, with <c>closedError()</c>. Idempotent.</summary>
    public void Close()
    {
        Volatile.Write(ref _closed, true);
        Interlocked.MemoryBarrier();
        int word = Volatile.Read(ref _state);
        if ((word & StateMask) == Armed)
        {
            Fire(word, _closedError());
        }
    }

    /// <summary>
    /// The operation (one at a time per direction): waits for a readiness event after the <paramref name="seen"/>-th,
    /// or for <paramref name="cancellationToken"/>. On <see cref="ArmResult.Waiting"/>, <paramref name="listener"/> is
    /// called on the pool when the wait ends, and must call <see cref="EndWait"/>.
    /// </summary>
    public ArmResult Arm(IReadinessListener listener, int seen, CancellationToken cancellationToken)
    {
        _error = null;
        _listener = listener;
        // The registration is made and stored before the wait is armed: once armed, an event may end the wait and the
        // listener's EndWait (on a worker) dispose the registration at any moment, so it must already be there. A
        // cancellation whose callback runs before the arming finds the waiter idle and does nothing: the check after
        // the arming catches it.
        if (cancellationToken.CanBeCanceled)
        {
            _registration = cancellationToken.UnsafeRegister(s_cancel, this);
        }
        int idle = Volatile.Read(ref _state);
        Debug.Assert((idle & StateMask) == Idle, "One operation at a time arms, and only once the previous wait has ended.");
        int armed = unchecked((idle & ~StateMask) + GenerationStep + Armed); // this wait's number (it wraps: see Fire)
        Interlocked.Exchange(ref _state, armed);
        bool closed = Volatile.Read(ref _closed);
        if (closed || Volatile.Read(ref _sequence) != seen)
        {
            if (Interlocked.CompareExchange(ref _state, armed - Armed + Idle, armed) == armed)
            {
                DropRegistration();
                _listener = null;
                return closed ? ArmResult.Closed : ArmResult.Ready;
            }
            return ArmResult.Waiting; // fired meanwhile: the listener is queued
        }
        if (cancellationToken.IsCancellationRequested)
        {
            // Cancelled before the arming, when the registration found the waiter idle. A no-op if an event or the
            // close won; and this wait only, whatever has happened since (see the remarks).
            Fire(armed, new OperationCanceledException(cancellationToken));
        }
        return ArmResult.Waiting;
    }

    /// <summary>Disposes the cancellation registration (waiting for a callback that lost the race to finish).</summary>
    private void DropRegistration()
    {
        _registration.Dispose();
        _registration = default;
    }

    /// <summary>The listener, on the pool: ends the wait. Returns why it ended early (cancelled, closed), or null for readiness.</summary>
    public Exception? EndWait()
    {
        DropRegistration();
        Exception? error = _error;
        _error = null;
        _listener = null;
        int fired = Volatile.Read(ref _state);
        Debug.Assert((fired & StateMask) == Fired, "Only the listener of a fired wait ends it.");
        Volatile.Write(ref _state, fired - Fired + Idle);
        return error;
    }

    /// <summary>A registration's callback: its token was cancelled while its wait may be armed.</summary>
    private void FireCancelled(CancellationToken token)
    {
        int word = Volatile.Read(ref _state);
        if ((word & StateMask) == Armed)
        {
            Fire(word, new OperationCanceledException(token));
        }
    }

    /// <summary>
    /// Ends the wait whose armed state word is <paramref name="armed"/>, if it is still armed: the compare-exchange is
    /// against the whole word, so a later wait (a higher number) is never ended by a party that saw this one. The
    /// numbers wrap after 2^30 armings; a party would have to stall across all of them to be fooled.
    /// </summary>
    private void Fire(int armed, Exception? error)
    {
        Debug.Assert((armed & StateMask) == Armed);
        if (Interlocked.CompareExchange(ref _state, armed - Armed + Firing, armed) != armed)
        {
            return;
        }
        _error = error;
        IReadinessListener listener = _listener!;
        Volatile.Write(ref _state, armed - Armed + Fired);
        _scheduler.EnqueueContinuation(new WorkItemEntry(s_ready, listener, null), preferLocal: false);
    }
}
