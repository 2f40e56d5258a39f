using System;
using System.Diagnostics;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using System.Threading.Tasks.Sources;
using Spindle.Queues;
using Spindle.Scheduling;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle.IO;

/// <summary>A direction's "an operation is pending" flag, shared by the operations of that direction (receive and accept; send and connect).</summary>
internal sealed class DirectionGate
{
    private int _busy;

    public bool TryEnter() => Interlocked.Exchange(ref _busy, 1) == 0;

    public void Exit() => Volatile.Write(ref _busy, 0);
}

/// <summary>
/// One kind of socket operation on the driver, reused for every call of that kind on its socket: it is the operation's
/// loop (try the system call, arm the direction's <see cref="ReadinessWaiter"/> on <c>EAGAIN</c>, try again when the
/// pool calls it back) and the <see cref="IValueTaskSource{TResult}"/> the caller awaits, so a call allocates nothing.
/// </summary>
/// <remarks>
/// <para>Why not an async method: a completion that races the awaiter's registration (the awaiter found the operation
/// pending, then the pool completed it before <c>OnCompleted</c>) is queued by the runtime's sources to the built-in
/// thread pool, which a starved built-in pool would hold indefinitely. This source queues it to this socket's pool.</para>
/// <para>Lifetime: the direction's <see cref="DirectionGate"/> is entered by the public call and left by
/// <c>GetResult</c>, so the source is never reset while an awaiter may still read it; the version guards a
/// <c>ValueTask</c> awaited twice. The loop runs on the caller's thread until the first wait, then on pool workers (one
/// at a time: the waiter calls back once per arming).</para>
/// <para>Completion protocol: <c>_continuation</c> is the one word the completer and the awaiter race on. It reads null
/// (pending, nobody registered), the awaiter's continuation (pending, registered), or <c>s_completed</c> (the outcome is
/// published). The completer writes the outcome, then exchanges <c>s_completed</c> in, and touches the operation after
/// that only to run a continuation it took out; the awaiter's registration is a compare-exchange from null, and its
/// <c>GetResult</c> reads the outcome only after seeing <c>s_completed</c>, then stores null as its last write before it
/// leaves the gate. So an awaiter that finds the operation done and starts the next call at once can never meet a
/// late write of the previous completion.</para>
/// <para>Continuations run where the awaiter asked: on its captured <see cref="SynchronizationContext"/> or
/// <see cref="TaskScheduler"/> (posted), otherwise inline on the pool worker that completed the operation, or queued
/// to the pool when the operation had completed before the awaiter registered.</para>
/// <para>A call that cannot find anything skips its first attempt and waits at once: when the previous call of this
/// kind ended by an attempt that emptied the socket (<see cref="LastAttemptEmptied"/>, a receive that got fewer bytes
/// than it asked for), and the waiter's sequence still reads what it read before that attempt, no readiness event has
/// been reported since the socket was empty. Anything that arrived since raised an edge whose event the poller has not
/// reported yet, and will (the driver is edge-triggered, and an event arriving while the waiter is armed fires it;
/// one reported between the look and the arming makes <see cref="ReadinessWaiter.Arm"/> answer
/// <see cref="ArmResult.Ready"/>), so the wait cannot miss it. The one exception is the end of the stream or an
/// error: a receive that takes the last bytes takes the end of stream behind them too (Linux's TCP receive stops
/// there), and leaves the error pending, so the next receive reads 0 or fails at once although no event will come
/// again for it. An event that reported either before the look set <see cref="ReadinessWaiter.HasHungUp"/> before its
/// signal, so the call then makes its attempt; one reported after the look changed the sequence. This saves a
/// request-response connection the system call that would fail with <c>EAGAIN</c> after every message it receives.</para>
/// </remarks>
internal abstract class SocketOperation<T> : IValueTaskSource<T>, IValueTaskSource, IReadinessListener, IWorkItem, IShutdownAware
{
    private static readonly Action<object?> s_completed = static _ => Debug.Fail("the completion marker is never run");
    private static readonly SendOrPostCallback s_posted = static op => ((SocketOperation<T>)op!).RunQueuedContinuation();

    private readonly ReadinessWaiter _waiter;
    private readonly DirectionGate _gate;
    private readonly Scheduler _scheduler;
    private readonly WorkerPool _pool;
    private short _version;
    private T? _result;
    private ExceptionDispatchInfo? _error;
    private Action<object?>? _continuation; // null, the awaiter's continuation, or s_completed: see the remarks
    private Action<object?>? _queuedContinuation; // the continuation a queued or posted completion runs
    private object? _continuationState;
    private ExecutionContext? _executionContext;
    private object? _schedulingContext;
    private CancellationToken _token;
    private bool _emptied; // the last call ended by an attempt that emptied the socket, made after reading _emptiedAt
    private int _emptiedAt;

    /// <summary>Queued as an <see cref="IWorkItem"/> (a completion whose awaiter registered late).</summary>
    object? IShutdownAware.QueuedCallback => null;

    /// <summary>A queued completion resumes an awaiter: shutdown runs it in both modes, never drops it.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

    protected SocketOperation(PoolSocket socket, ReadinessWaiter waiter, DirectionGate gate, WorkerPool pool)
    {
        Socket = socket;
        _waiter = waiter;
        _gate = gate;
        _pool = pool;
        _scheduler = pool.SchedulerCore;
    }

    protected PoolSocket Socket { get; }

    /// <summary>
    /// One attempt: true with the result when the operation is done; false with <paramref name="errno"/> otherwise
    /// (<c>EAGAIN</c>: wait for readiness; <c>EINTR</c>: try again; anything else fails the operation).
    /// </summary>
    protected abstract bool TryOnce(out T result, out int errno);

    /// <summary>
    /// The operation has ended, whichever way (done, failed, cancelled, closed): forgets its inputs and its progress,
    /// so that the next call of this kind starts from nothing and no caller's memory stays reachable from the socket.
    /// Called before the outcome is published, on the thread that completes the operation (the only one running its
    /// loop then).
    /// </summary>
    protected abstract void Forget();

    /// <summary>
    /// Whether the attempt that just succeeded left the socket with nothing more for this kind of operation (a receive
    /// that got fewer bytes than its buffer holds). Read right after <see cref="TryOnce"/> returned true. The next
    /// call then waits for readiness without an attempt, unless an event was reported since (see the remarks).
    /// </summary>
    protected virtual bool LastAttemptEmptied => false;

    /// <summary>Caller, having entered the gate and set the operation's inputs: runs it until it completes or waits.</summary>
    public ValueTask<T> Start(CancellationToken cancellationToken)
    {
        _token = cancellationToken;
        short version = _version;
        Step(mayWaitFirst: true);
        return new ValueTask<T>(this, version);
    }

    /// <summary><see cref="Start"/> for operations whose caller wants no result.</summary>
    public ValueTask StartWithoutResult(CancellationToken cancellationToken)
    {
        _token = cancellationToken;
        short version = _version;
        Step(mayWaitFirst: true);
        return new ValueTask(this, version);
    }

    /// <summary>
    /// The operation's loop. <paramref name="mayWaitFirst"/>: a new call, which waits without an attempt when the
    /// previous call emptied the socket and no event was reported since (see the remarks); false after a wait ended.
    /// </summary>
    private void Step(bool mayWaitFirst)
    {
        bool emptied = _emptied;
        _emptied = false;
        while (true)
        {
            int seen = _waiter.Sequence;
            T result;
            int errno;
            bool done;
            if (mayWaitFirst && emptied && seen == _emptiedAt && !_waiter.HasHungUp)
            {
                result = default!;
                errno = LinuxIo.EAgain;
                done = false;
            }
            else
            {
                try
                {
                    done = TryOnce(out result, out errno);
                }
                catch (Exception e)
                {
                    Complete(default, e);
                    return;
                }
            }
            mayWaitFirst = false;
            if (done)
            {
                _emptied = LastAttemptEmptied;
                _emptiedAt = seen;
                Complete(result, null);
                return;
            }
            if (errno == LinuxIo.EIntr)
            {
                continue;
            }
            if (errno != LinuxIo.EAgain)
            {
                Complete(default, Socket.ErrorFor(errno));
                return;
            }
            switch (_waiter.Arm(this, seen, _token))
            {
                case ArmResult.Waiting:
                    return;
                case ArmResult.Closed:
                    Complete(default, Socket.ClosedError());
                    return;
            }
        }
    }

    /// <summary>On a worker: the wait ended.</summary>
    void IReadinessListener.OnReady()
    {
        Exception? ended = _waiter.EndWait();
        if (ended is null)
        {
            Step(mayWaitFirst: false);
        }
        else
        {
            Complete(default, ended);
        }
    }

    private void Complete(T? result, Exception? error)
    {
        Forget();
        _result = result;
        _error = error is null ? null : ExceptionDispatchInfo.Capture(error);
        // The exchange publishes the outcome. Nothing of this operation is touched after it unless an awaiter had
        // registered: without one, the awaiter may read the result and start the next call at once.
        Action<object?>? continuation = Interlocked.Exchange(ref _continuation, s_completed);
        Debug.Assert(!ReferenceEquals(continuation, s_completed), "an operation completes once");
        if (continuation is not null)
        {
            // On a worker of the pool (the loop only runs elsewhere before the awaiter has registered).
            RunContinuation(continuation, inline: true);
        }
    }

    private void RunContinuation(Action<object?> continuation, bool inline)
    {
        object? scheduling = _schedulingContext;
        if (scheduling is not null)
        {
            _schedulingContext = null;
            if (inline && ReferenceEquals(scheduling, _pool.SynchronizationContext) && WorkerPool.Current == _pool)
            {
                // The awaiter is code of this pool (inside Run, say) and this is one of its workers: a post would only
                // queue the continuation to run here later. Run it now, with the pool's context installed, so that
                // its own awaits come back to the pool too.
                SynchronizationContext? previous = SynchronizationContext.Current;
                SynchronizationContext.SetSynchronizationContext((SynchronizationContext)scheduling);
                try
                {
                    RunContinuation(continuation, inline: true);
                }
                finally
                {
                    SynchronizationContext.SetSynchronizationContext(previous);
                }
            }
            else if (scheduling is SynchronizationContext context)
            {
                _queuedContinuation = continuation;
                context.Post(s_posted, this);
            }
            else
            {
                _queuedContinuation = continuation;
                Task.Factory.StartNew(static op => ((SocketOperation<T>)op!).RunQueuedContinuation(), this,
                    CancellationToken.None, TaskCreationOptions.DenyChildAttach, (TaskScheduler)scheduling);
            }
            return;
        }
        if (!inline)
        {
            _queuedContinuation = continuation;
            _scheduler.EnqueueContinuation(new WorkItemEntry(this, WorkItemEntry.WorkItemMarker, null), preferLocal: false);
            return;
        }
        object? state = _continuationState;
        ExecutionContext? executionContext = _executionContext;
        if (executionContext is null)
        {
            continuation(state);
        }
        else
        {
            ExecutionContext.Run(executionContext, static s =>
            {
                var (c, st) = ((Action<object?>, object?))s!;
                c(st);
            }, (continuation, state));
        }
    }

    /// <summary>On a worker: the continuation of an operation that had completed before its awaiter registered.</summary>
    void IWorkItem.Execute() => RunQueuedContinuation();

    /// <summary>A queued or posted continuation, where the awaiter asked for it to run.</summary>
    private void RunQueuedContinuation()
    {
        Action<object?>? continuation = _queuedContinuation;
        Debug.Assert(continuation is not null, "a continuation is queued only with its delegate");
        _queuedContinuation = null;
        RunContinuation(continuation, inline: true);
    }

    ValueTaskSourceStatus IValueTaskSource<T>.GetStatus(short token)
    {
        ValidateToken(token);
        if (!ReferenceEquals(Volatile.Read(ref _continuation), s_completed))
        {
            return ValueTaskSourceStatus.Pending;
        }
        return _error is null ? ValueTaskSourceStatus.Succeeded
            : _error.SourceException is OperationCanceledException ? ValueTaskSourceStatus.Canceled
            : ValueTaskSourceStatus.Faulted;
    }

    void IValueTaskSource<T>.OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
    {
        ValidateToken(token);
        Action<object?>? registered = Volatile.Read(ref _continuation);
        if (registered is not null && !ReferenceEquals(registered, s_completed))
        {
            throw AwaitedTwice();
        }
        if ((flags & ValueTaskSourceOnCompletedFlags.FlowExecutionContext) != 0)
        {
            _executionContext = ExecutionContext.Capture();
        }
        if ((flags & ValueTaskSourceOnCompletedFlags.UseSchedulingContext) != 0)
        {
            SynchronizationContext? context = SynchronizationContext.Current;
            if (context is not null && context.GetType() != typeof(SynchronizationContext))
            {
                _schedulingContext = context;
            }
            else if (TaskScheduler.Current != TaskScheduler.Default)
            {
                _schedulingContext = TaskScheduler.Current;
            }
        }
        _continuationState = state;
        Action<object?>? previous = Interlocked.CompareExchange(ref _continuation, continuation, null);
        if (previous is not null)
        {
            if (!ReferenceEquals(previous, s_completed))
            {
                throw AwaitedTwice();
            }
            // Completed between the awaiter's look and this call: never inline here (the awaiter's caller is still on
            // the stack); queue it to the pool, or post it to the awaiter's context.
            RunContinuation(continuation, inline: false);
        }
    }

    T IValueTaskSource<T>.GetResult(short token)
    {
        ValidateToken(token);
        if (!ReferenceEquals(Volatile.Read(ref _continuation), s_completed))
        {
            throw new InvalidOperationException("The socket operation has not completed; await its ValueTask instead of reading it.");
        }
        T? result = _result;
        ExceptionDispatchInfo? error = _error;
        _result = default;
        _error = null;
        _continuationState = null;
        _executionContext = null;
        _schedulingContext = null;
        _token = default;
        _version++;
        Volatile.Write(ref _continuation, null);
        _gate.Exit();
        error?.Throw();
        return result!;
    }

    ValueTaskSourceStatus IValueTaskSource.GetStatus(short token) => ((IValueTaskSource<T>)this).GetStatus(token);

    void IValueTaskSource.OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        ((IValueTaskSource<T>)this).OnCompleted(continuation, state, token, flags);

    void IValueTaskSource.GetResult(short token) => ((IValueTaskSource<T>)this).GetResult(token);

    private void ValidateToken(short token)
    {
        if (token != _version)
        {
            throw AwaitedTwice();
        }
    }

    private static InvalidOperationException AwaitedTwice() =>
        new("The ValueTask of a socket operation may be awaited only once.");
}
