using System;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using System.Threading.Tasks.Sources;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.IO;

/// <summary>
/// One direction (read or write) of a socket registered with the pool's I/O driver: counts the readiness events the
/// poller reports, and lets one operation at a time wait for the next one without allocating (it is the operation's
/// reusable <see cref="IValueTaskSource"/>, and the work item that resumes it on the pool).
/// </summary>
/// <remarks>
/// <para>Protocol. <see cref="_sequence"/> is written by the poller only (<see cref="Signal"/>: an interlocked increment,
/// then a look at <see cref="_state"/>). An operation reads the sequence before its system call; on <c>EAGAIN</c> it
/// calls <see cref="WaitAsync"/> with what it read, which arms the waiter (an interlocked exchange) and then looks at
/// the sequence again. Both sides write with a full fence before they read the other's field, so at least one sees the
/// other: a readiness event that raced the failed call either makes the arming side return at once (the sequence has
/// moved) or finds the waiter armed and fires it. The driver is edge-triggered, so an event is never repeated: this
/// is what keeps it from being lost.</para>
/// <para>States: Idle (no wait), Armed (waiting), Firing (one party won the race to complete it and is writing the
/// outcome), Fired (the outcome is readable). The poller, a cancellation callback and <see cref="Close"/> compete to
/// fire with a compare-exchange from Armed; exactly one wins. The operation owns the waiter between arming and
/// <c>GetResult</c>, which returns it to Idle and bumps the version, so a stale awaiter is refused.</para>
/// <para>The continuation is the awaiting async method's; it is queued to the pool (never run on the poller thread),
/// through the scheduler's continuation path, which also covers a pool that is draining or has stopped.</para>
/// </remarks>
internal sealed class ReadinessWaiter : IValueTaskSource, IWorkItem
{
    private const int Idle = 0;
    private const int Armed = 1;
    private const int Firing = 2;
    private const int Fired = 3;

    private static readonly Action<object?> s_completedSentinel = static _ => { };
    private static readonly Action<object?> s_cancel = static waiter => ((ReadinessWaiter)waiter!).FireCancelled();

    private readonly Scheduler _scheduler;
    private readonly Func<Exception> _closedError;
    private int _sequence;
    private int _state;
    private short _version;
    private bool _closed;
    private Exception? _error;
    private Action<object?>? _continuation;
    private object? _continuationState;
    private Action<object?>? _toRun;
    private CancellationToken _token;
    private CancellationTokenRegistration _registration;

    public ReadinessWaiter(Scheduler scheduler, Func<Exception> closedError)
    {
        _scheduler = scheduler;
        _closedError = closedError;
    }

    /// <summary>Readiness events seen so far (read before an attempt, passed to <see cref="WaitAsync"/> after it fails).</summary>
    public int Sequence => Volatile.Read(ref _sequence);

    /// <summary>Whether <see cref="Close"/> has run: every wait from now on fails at once.</summary>
    public bool IsClosed => Volatile.Read(ref _closed);

    /// <summary>Poller: a readiness event for this direction.</summary>
    public void Signal()
    {
        Interlocked.Increment(ref _sequence);
        if (Volatile.Read(ref _state) == Armed)
        {
            Fire(null);
        }
    }

    /// <summary>
    /// Fails the pending wait, if any, and every later one, with <c>closedError()</c> (an <see cref="ObjectDisposedException"/>:
    /// the socket was disposed, or the pool is shutting down). Idempotent.
    /// </summary>
    public void Close()
    {
        Volatile.Write(ref _closed, true);
        Interlocked.MemoryBarrier();
        if (Volatile.Read(ref _state) == Armed)
        {
            Fire(_closedError());
        }
    }

    /// <summary>
    /// The operation (one at a time per direction): waits for a readiness event after the <paramref name="seen"/>-th.
    /// Completes at once if one has come since; fails with <see cref="OperationCanceledException"/> when the token fires,
    /// with <see cref="ObjectDisposedException"/> when the waiter is closed. The caller calls <see cref="EndWait"/>
    /// after awaiting it, whatever the outcome.
    /// </summary>
    public ValueTask WaitAsync(int seen, CancellationToken cancellationToken)
    {
        _error = null;
        _continuation = null;
        _continuationState = null;
        Interlocked.Exchange(ref _state, Armed);
        bool closed = Volatile.Read(ref _closed);
        if (closed || Volatile.Read(ref _sequence) != seen)
        {
            if (Interlocked.CompareExchange(ref _state, Idle, Armed) == Armed)
            {
                return closed ? ValueTask.FromException(_closedError()) : default;
            }
            // Fired meanwhile (by the poller or Close): the outcome is the source's.
        }
        else if (cancellationToken.CanBeCanceled)
        {
            _token = cancellationToken;
            _registration = cancellationToken.UnsafeRegister(s_cancel, this);
        }
        return new ValueTask(this, _version);
    }

    /// <summary>The operation, after its await: drops the cancellation registration.</summary>
    public void EndWait()
    {
        _registration.Dispose();
        _registration = default;
        _token = default;
    }

    private void FireCancelled() => Fire(new OperationCanceledException(_token));

    private void Fire(Exception? error)
    {
        if (Interlocked.CompareExchange(ref _state, Firing, Armed) != Armed)
        {
            return;
        }
        _error = error;
        Volatile.Write(ref _state, Fired);
        Action<object?>? continuation = Interlocked.Exchange(ref _continuation, s_completedSentinel);
        if (continuation is not null)
        {
            Dispatch(continuation);
        }
    }

    private void Dispatch(Action<object?> continuation)
    {
        _toRun = continuation;
        _scheduler.EnqueueContinuation(new WorkItemEntry(this, WorkItemEntry.WorkItemMarker, null), preferLocal: false);
    }

    /// <summary>On a worker: resumes the awaiting operation.</summary>
    void IWorkItem.Execute()
    {
        Action<object?> continuation = _toRun!;
        _toRun = null;
        continuation(_continuationState);
    }

    ValueTaskSourceStatus IValueTaskSource.GetStatus(short token)
    {
        ValidateToken(token);
        if (Volatile.Read(ref _state) != Fired)
        {
            return ValueTaskSourceStatus.Pending;
        }
        return _error switch
        {
            null => ValueTaskSourceStatus.Succeeded,
            OperationCanceledException => ValueTaskSourceStatus.Canceled,
            _ => ValueTaskSourceStatus.Faulted,
        };
    }

    void IValueTaskSource.OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
    {
        // The flags are ignored: the only awaiters are this library's own async operations, whose builders restore the
        // ExecutionContext themselves, and whose continuations belong on the pool whatever context they started in.
        ValidateToken(token);
        _continuationState = state;
        if (Interlocked.CompareExchange(ref _continuation, continuation, null) is not null)
        {
            Dispatch(continuation); // fired between the awaiter's look and this call
        }
    }

    void IValueTaskSource.GetResult(short token)
    {
        ValidateToken(token);
        Exception? error = _error;
        _error = null;
        _continuation = null;
        _continuationState = null;
        _version++;
        Volatile.Write(ref _state, Idle);
        if (error is not null)
        {
            ExceptionDispatchInfo.Throw(error);
        }
    }

    private void ValidateToken(short token)
    {
        if (token != _version)
        {
            throw new InvalidOperationException("The wait has already been consumed; a ValueTask of a socket operation may be awaited only once.");
        }
    }
}
