using System;
using System.Diagnostics;
using System.IO.Pipelines;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using System.Threading.Tasks.Sources;

namespace Spindle.AspNetCore.Transport;

/// <summary>
/// The application's end of a connection's input: the input pipe's reader, except that a read made off the pool's
/// workers completes on one of them. Kestrel starts each connection on the built-in thread pool, and a read that finds
/// data already received completes synchronously, on the caller's thread; without this hop, the first request of a
/// connection, and every later one whose bytes arrive before Kestrel reads again, would run there. A read made on a
/// worker of the pool (the steady state of a keep-alive connection) is the pipe's own, with no cost added.
/// </summary>
/// <remarks>
/// <para>Protocol. A pipe allows one read at a time, and so does this reader. A read off the pool bumps
/// <c>_version</c>, clears the completion, queues <see cref="Hop"/> to the pool (as a continuation: never refused, run
/// even while the pool stops) and returns a value task of this source. The hop makes the pipe's read on a worker and,
/// when it completes, publishes the outcome and swaps <see cref="s_completed"/> into <c>_continuation</c>; the awaiter's
/// <see cref="IValueTaskSource{TResult}.OnCompleted"/> swaps its continuation in. Whichever comes second runs the
/// continuation: the completion inline (it is on a worker), or the registration by queueing it to the pool, so the code
/// after the read runs on the pool either way (a completion source that finished first would queue it to the built-in
/// thread pool). For the same reason the source reports itself pending until the awaiter has registered: an awaiter
/// that found the read complete would go on synchronously, on its own thread.</para>
/// <para>The outcome's fields are written before the swap that publishes them, and read after a swap or a read that
/// saw <see cref="s_completed"/>, so the interlocked operations order them.</para>
/// </remarks>
internal sealed class PoolBoundPipeReader : PipeReader, IValueTaskSource<ReadResult>
{
    private static readonly Action<PoolBoundPipeReader> s_hop = static reader => reader.Hop();
    private static readonly Action<PoolBoundPipeReader> s_runContinuation = static reader => reader.RunContinuation();
    private static readonly Action<object?> s_completed = static _ => Debug.Fail("the completion marker is never run");

    private readonly PipeReader _inner;
    private readonly WorkerPool _pool;
    private Action<object?>? _continuation;
    private object? _continuationState;
    private ExecutionContext? _continuationContext;
    private CancellationToken _cancellationToken;
    private ValueTask<ReadResult> _innerRead;
    private ReadResult _result;
    private ExceptionDispatchInfo? _error;
    private Action? _completeHop; // CompleteHop as a delegate, made at the first hop that has to wait
    private short _version;
    private int _hopPending;
    private bool _registered; // whether the awaiter has registered its continuation for the current read

    public PoolBoundPipeReader(PipeReader inner, WorkerPool pool)
    {
        _inner = inner;
        _pool = pool;
    }

    /// <inheritdoc/>
    public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
    {
        if (ReferenceEquals(WorkerPool.Current, _pool))
        {
            return _inner.ReadAsync(cancellationToken);
        }
        if (Interlocked.Exchange(ref _hopPending, 1) != 0)
        {
            throw new InvalidOperationException("Reading is already in progress.");
        }
        _version++;
        _result = default;
        _error = null;
        _continuationState = null;
        _continuationContext = null;
        _registered = false;
        _cancellationToken = cancellationToken;
        Volatile.Write(ref _continuation, null);
        _pool.UnsafeQueueContinuation(s_hop, this, preferLocal: false);
        return new ValueTask<ReadResult>(this, _version);
    }

    /// <summary>
    /// The pipe's <see cref="PipeReader.TryRead"/> on a worker of the pool; elsewhere <see langword="false"/>, with
    /// nothing read, so that the caller (Kestrel tries a synchronous read before each request) reads asynchronously,
    /// which brings it to the pool.
    /// </summary>
    public override bool TryRead(out ReadResult result)
    {
        if (ReferenceEquals(WorkerPool.Current, _pool))
        {
            return _inner.TryRead(out result);
        }
        result = default;
        return false;
    }

    /// <inheritdoc/>
    public override void AdvanceTo(SequencePosition consumed) => _inner.AdvanceTo(consumed);

    /// <inheritdoc/>
    public override void AdvanceTo(SequencePosition consumed, SequencePosition examined) => _inner.AdvanceTo(consumed, examined);

    /// <inheritdoc/>
    public override void CancelPendingRead() => _inner.CancelPendingRead();

    /// <inheritdoc/>
    public override void Complete(Exception? exception = null) => _inner.Complete(exception);

    /// <inheritdoc/>
    public override ValueTask CompleteAsync(Exception? exception = null) => _inner.CompleteAsync(exception);

    ReadResult IValueTaskSource<ReadResult>.GetResult(short token)
    {
        ValidateToken(token);
        if (!ReferenceEquals(Volatile.Read(ref _continuation), s_completed))
        {
            throw new InvalidOperationException("The read has not completed.");
        }
        _error?.Throw();
        return _result;
    }

    ValueTaskSourceStatus IValueTaskSource<ReadResult>.GetStatus(short token)
    {
        ValidateToken(token);
        // Pending until the awaiter has registered, even when the hop has already finished: an awaiter that saw the
        // read complete would go on synchronously, on its own thread, off the pool.
        if (!Volatile.Read(ref _registered) || !ReferenceEquals(Volatile.Read(ref _continuation), s_completed))
        {
            return ValueTaskSourceStatus.Pending;
        }
        return _error is null ? ValueTaskSourceStatus.Succeeded
            : _error.SourceException is OperationCanceledException ? ValueTaskSourceStatus.Canceled
            : ValueTaskSourceStatus.Faulted;
    }

    void IValueTaskSource<ReadResult>.OnCompleted(Action<object?> continuation, object? state, short token,
        ValueTaskSourceOnCompletedFlags flags)
    {
        ArgumentNullException.ThrowIfNull(continuation);
        ValidateToken(token);
        // Where the continuation runs is the point of this reader: on the pool, whatever the awaiter's context.
        _continuationState = state;
        _continuationContext = (flags & ValueTaskSourceOnCompletedFlags.FlowExecutionContext) != 0 ? ExecutionContext.Capture() : null;
        Volatile.Write(ref _registered, true);
        Action<object?>? previous = Interlocked.CompareExchange(ref _continuation, continuation, null);
        if (ReferenceEquals(previous, s_completed))
        {
            _continuation = continuation; // completed first: this registration runs it, from a work item of the pool
            _pool.UnsafeQueueContinuation(s_runContinuation, this, preferLocal: false);
        }
        else if (previous is not null)
        {
            throw new InvalidOperationException("A read's value task may be awaited only once.");
        }
    }

    private void ValidateToken(short token)
    {
        if (token != _version)
        {
            throw new InvalidOperationException("The value task of this read was already consumed.");
        }
    }

    /// <summary>On a worker of the pool: the pipe's read, whose outcome completes the caller's.</summary>
    private void Hop()
    {
        Debug.Assert(Volatile.Read(ref _hopPending) == 1, "a hop is pending");
        try
        {
            // Kept to be consumed exactly once, by CompleteHop (now, or when it completes).
#pragma warning disable CA2012
            _innerRead = _inner.ReadAsync(_cancellationToken);
#pragma warning restore CA2012
        }
        catch (Exception e)
        {
            Finish(default, e);
            return;
        }
        if (_innerRead.IsCompleted)
        {
            CompleteHop();
        }
        else
        {
            // The pipe's reader scheduler is the pool's, so this resumes on a worker too.
            _innerRead.ConfigureAwait(false).GetAwaiter().UnsafeOnCompleted(_completeHop ??= CompleteHop);
        }
    }

    private void CompleteHop()
    {
        ReadResult result;
        try
        {
            result = _innerRead.GetAwaiter().GetResult();
        }
        catch (Exception e)
        {
            _innerRead = default;
            Finish(default, e);
            return;
        }
        _innerRead = default;
        Finish(result, null);
    }

    private void Finish(ReadResult result, Exception? error)
    {
        _result = result;
        _error = error is null ? null : ExceptionDispatchInfo.Capture(error);
        Volatile.Write(ref _hopPending, 0); // before the completion: its continuation may read again at once
        Action<object?>? continuation = Interlocked.Exchange(ref _continuation, s_completed);
        if (continuation is not null)
        {
            Debug.Assert(!ReferenceEquals(continuation, s_completed), "a read completes once");
            _continuation = s_completed;
            Invoke(continuation);
        }
    }

    /// <summary>The registration came second: run the continuation it stored (and restore the completion marker).</summary>
    private void RunContinuation()
    {
        Action<object?> continuation = Interlocked.Exchange(ref _continuation, s_completed)!;
        Debug.Assert(!ReferenceEquals(continuation, s_completed), "the registration stored its continuation");
        Invoke(continuation);
    }

    private void Invoke(Action<object?> continuation)
    {
        object? state = _continuationState;
        ExecutionContext? context = _continuationContext;
        if (context is null)
        {
            continuation(state);
        }
        else
        {
            ExecutionContext.Run(context, static s => ((PendingContinuation)s!).Run(), new PendingContinuation(continuation, state));
        }
    }

    /// <summary>A continuation and its state, to run in a captured execution context (the awaiter asked for its flow).</summary>
    private sealed class PendingContinuation(Action<object?> continuation, object? state)
    {
        public void Run() => continuation(state);
    }
}
