using System;
using System.Buffers;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO.Pipelines;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Logging;
using Spindle.IO;

namespace Spindle.AspNetCore.Transport;

/// <summary>
/// One accepted connection: a <see cref="PoolSocket"/> between two pipes, and the connection features Kestrel and
/// middleware read (id, transport, items, lifetime, endpoints, memory pool, socket).
/// </summary>
/// <remarks>
/// <para>Who owns what. The receive loop alone writes the input pipe and receives from the socket; the send loop alone
/// reads the output pipe and sends to the socket; Kestrel (or the connection middleware) owns the other ends, exposed
/// as <see cref="Transport"/>. So the socket never has more than one receive and one send pending, as
/// <see cref="PoolSocket"/> requires.</para>
/// <para>Where code resumes. Code after the application's awaits on the pipes resumes on the pool (its
/// <see cref="WorkerPool.PipeScheduler"/>). The receive loop resumes inline: after a receive on the worker that completed
/// it, after a flush held by back-pressure on the thread that read. The send loop resumes, when the application flushes
/// output, through the listener's local-queue scheduler (<see cref="WorkerPoolPipeScheduler"/> with <c>preferLocal</c>):
/// on the worker that flushed, once the handler's work item returns. By then Kestrel has written the whole response
/// (a chunked body and its last chunk are two flushes), so it leaves in one send; an inline send loop sent each flush
/// by itself, and a shared-queue one woke another worker for the first. A flush from outside the pool's workers goes to
/// the shared queue; a worker that stays busy after its flush loses the send loop to an idle worker, which the local
/// push wakes.</para>
/// <para>Closing. <see cref="CloseSocket"/> shuts the socket down and disposes it exactly once (a CAS on
/// <c>_socketClosed</c>), from whichever comes first: the end of the send loop (the application completed its output,
/// or a send failed) or <see cref="Abort(ConnectionAbortedException)"/>; <see cref="DisposeAsync"/> completes the
/// output and lets the send loop finish first, so that nothing the application wrote is lost. It also cancels
/// the input pipe's pending flush, and abort cancels the output pipe's pending read, so that every point where a loop
/// can wait (a socket operation, a flush held by back-pressure, a read of the output) ends: each loop then completes
/// its pipe end, with the first abort reason if there is one (<c>_shutdownReason</c>, set once by CAS). The end of the
/// receive loop (the peer's FIN, a reset, or the close) fires <see cref="ConnectionClosed"/> once, from a work item
/// of the pool, so that the token's callbacks do not run inside the loop. <see cref="DisposeAsync"/> completes the
/// application's ends and waits for both loops (the send loop's end closes the socket), then for that firing, as
/// Kestrel's sockets transport does: Kestrel keeps the connection in its connection manager, and its stop waits, until
/// the disposal returns, so no callback may still run (or not have run yet) by then.</para>
/// <para>The firing is a continuation of the pool (<see cref="WorkTarget.UnsafeQueueContinuation{TState}"/>): never
/// refused and never cancelled, in either shutdown mode, and run on the built-in pool once the pool has stopped, so it
/// always happens and always completes <c>_closedCallbacksDone</c> (a plain work item that a cancelling shutdown drops
/// would have to complete it from <see cref="ICancellableWorkItem.OnCancelled"/>). A disposal on the thread that fires
/// the token, from inside one of its callbacks, does not wait for the firing: that would wait for itself.</para>
/// </remarks>
internal sealed partial class SpindleConnection : ConnectionContext, IConnectionIdFeature, IConnectionTransportFeature,
    IConnectionItemsFeature, IConnectionLifetimeFeature, IConnectionEndPointFeature, IMemoryPoolFeature, IConnectionSocketFeature
{
    /// <summary>The smallest block a receive asks the memory pool for, as Kestrel's own transports.</summary>
    private const int MaxSegmentSize = 4096;

    private static readonly Action<SpindleConnection> s_fireClosed = static connection => connection.CancelClosedToken();

    private readonly PoolSocket _socket;
    private readonly ILogger _logger;
    private readonly WorkerPool _pool;
    private readonly MemoryPool<byte> _memory;
    private readonly Pipe _input;  // the receive loop writes, the application reads
    private readonly Pipe _output; // the application writes, the send loop reads
    private readonly DuplexPipe _application;
    private readonly int _minimumAllocation;
    private readonly FeatureCollection _features = new();
    // Never disposed: it has no timer, and nothing reads its wait handle, so there is nothing to release; disposing it
    // could race the work item that cancels it.
    private readonly CancellationTokenSource _closed = new();
    // Completed, on the thread that fired the token, once its callbacks have returned. Not RunContinuationsAsynchronously:
    // the disposal's continuation (and Kestrel's after it) runs at the end of the firing's work item, on the pool,
    // rather than on the built-in pool, where an asynchronous completion would queue it.
    private readonly TaskCompletionSource _closedCallbacksDone = new();
    private IDuplexPipe _transport;
    private IDictionary<object, object?>? _items;
    private string? _connectionId;
    private EndPoint? _localEndPoint;
    private EndPoint? _remoteEndPoint;
    private CancellationToken _closedToken;
    private ConnectionAbortedException? _shutdownReason;
    private int _socketClosed;
    private int _closedFired;
    private int _firingThread; // the managed thread id of the thread running the token's callbacks, 0 when none
    private int _disposed;
    private Task _receiving = Task.CompletedTask;
    private Task _sending = Task.CompletedTask;

    public SpindleConnection(PoolSocket socket, MemoryPool<byte> memory, PipeScheduler sendScheduler, SpindleTransportOptions options,
        ILogger logger)
    {
        _logger = logger;
        _socket = socket;
        _pool = socket.Pool;
        _memory = memory;
        int segment = memory.MaxBufferSize is > 0 and < MaxSegmentSize ? memory.MaxBufferSize : MaxSegmentSize;
        _minimumAllocation = segment / 2;
        PipeScheduler application = _pool.PipeScheduler;
        long maxRead = options.MaxReadBufferSize ?? 0;
        long maxWrite = options.MaxWriteBufferSize ?? 0;
        _input = new Pipe(new PipeOptions(memory, readerScheduler: application, writerScheduler: PipeScheduler.Inline,
            pauseWriterThreshold: maxRead, resumeWriterThreshold: maxRead / 2, minimumSegmentSize: segment, useSynchronizationContext: false));
        _output = new Pipe(new PipeOptions(memory, readerScheduler: sendScheduler, writerScheduler: application,
            pauseWriterThreshold: maxWrite, resumeWriterThreshold: maxWrite / 2, minimumSegmentSize: segment, useSynchronizationContext: false));
        _application = new DuplexPipe(new PoolBoundPipeReader(_input.Reader, _pool), _output.Writer);
        _transport = _application;
        _closedToken = _closed.Token;
        _localEndPoint = socket.Socket.LocalEndPoint;
        _remoteEndPoint = socket.Socket.RemoteEndPoint;

        _features.Set<IConnectionIdFeature>(this);
        _features.Set<IConnectionTransportFeature>(this);
        _features.Set<IConnectionItemsFeature>(this);
        _features.Set<IConnectionLifetimeFeature>(this);
        _features.Set<IConnectionEndPointFeature>(this);
        _features.Set<IMemoryPoolFeature>(this);
        _features.Set<IConnectionSocketFeature>(this);
    }

    /// <inheritdoc/>
    public override string ConnectionId
    {
        get => _connectionId ??= ConnectionIds.Next();
        set => _connectionId = value;
    }

    /// <inheritdoc/>
    public override IFeatureCollection Features => _features;

    /// <inheritdoc/>
    public override IDictionary<object, object?> Items
    {
        get => _items ??= new Dictionary<object, object?>();
        set => _items = value;
    }

    /// <inheritdoc/>
    public override IDuplexPipe Transport
    {
        get => _transport;
        set => _transport = value;
    }

    /// <inheritdoc/>
    public override CancellationToken ConnectionClosed
    {
        get => _closedToken;
        set => _closedToken = value;
    }

    /// <inheritdoc/>
    public override EndPoint? LocalEndPoint
    {
        get => _localEndPoint;
        set => _localEndPoint = value;
    }

    /// <inheritdoc/>
    public override EndPoint? RemoteEndPoint
    {
        get => _remoteEndPoint;
        set => _remoteEndPoint = value;
    }

    /// <inheritdoc/>
    public MemoryPool<byte> MemoryPool => _memory;

    /// <inheritdoc/>
    public Socket Socket => _socket.Socket;

    /// <summary>Starts the receive and send loops (once, right after the accept).</summary>
    public void Start()
    {
        Debug.Assert(_receiving.IsCompleted && _sending.IsCompleted, "started once");
        _receiving = ReceiveLoopAsync();
        _sending = SendLoopAsync();
    }

    /// <inheritdoc/>
    public override void Abort(ConnectionAbortedException abortReason)
    {
        Interlocked.CompareExchange(ref _shutdownReason, abortReason ?? new ConnectionAbortedException(), null);
        CloseSocket();
        // After the close, so that the send loop's catch sees the abort's reason rather than a bare cancellation.
        _output.Reader.CancelPendingRead();
    }

    /// <inheritdoc/>
    public override async ValueTask DisposeAsync()
    {
        // Read before the first await, on the caller's thread: a callback of the token disposing its own connection.
        bool insideClosedCallbacks = Volatile.Read(ref _firingThread) == Environment.CurrentManagedThreadId;
        if (Interlocked.Exchange(ref _disposed, 1) == 0)
        {
            // The application's ends: Kestrel is done with them (connection middleware may have replaced Transport).
            // Once; a later call waits, as the first does, for what follows.
            _application.Input.Complete();
            _application.Output.Complete();
        }
        // The send loop sends what the application wrote before it completed its output, then closes the socket,
        // which ends the receive loop. It may not have started on the last flush yet (it resumes on the worker that
        // flushed, after the work item that is disposing now), and it may be held by a peer that reads slowly: closing
        // the socket here would cut the response off. A peer that reads nothing holds the loop as it holds the sockets
        // transport's, which waits for its send loop the same way; Kestrel keeps the connection in its connection
        // manager until this returns, so the end of the host's shutdown timeout aborts it, and Abort closes the
        // socket, which ends the loop's send.
        await _sending.ConfigureAwait(false);
        await _receiving.ConfigureAwait(false);
        Debug.Assert(Volatile.Read(ref _socketClosed) == 1, "both loops ended, so the socket is closed");
        // The receive loop's end queued the firing (a connection that was never started has none); its callbacks are
        // the application's and Kestrel's, and none may run after this returns.
        if (Volatile.Read(ref _closedFired) != 0 && !insideClosedCallbacks)
        {
            await _closedCallbacksDone.Task.ConfigureAwait(false);
        }
        await base.DisposeAsync().ConfigureAwait(false);
    }

    /// <summary>Shuts the socket down and disposes it, once; see the remarks.</summary>
    private void CloseSocket()
    {
        if (Interlocked.Exchange(ref _socketClosed, 1) != 0)
        {
            return;
        }
        try
        {
            _socket.Socket.Shutdown(SocketShutdown.Both); // a FIN to the peer rather than a reset, where the kernel can
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            // Already reset or closed by the peer: the disposal below is all that is left.
        }
        _socket.Dispose();
        _input.Writer.CancelPendingFlush();
    }

    /// <summary>
    /// Fires <see cref="ConnectionClosed"/> once, from a continuation of the pool (never refused or cancelled, even while
    /// it stops; see the remarks).
    /// </summary>
    private void FireConnectionClosed()
    {
        if (Interlocked.Exchange(ref _closedFired, 1) == 0)
        {
            _pool.UnsafeQueueContinuation(s_fireClosed, this, preferLocal: false);
        }
    }

    /// <summary>
    /// Fires the token. Its callbacks are the application's (middleware, Kestrel's own): one that throws is logged, as
    /// Kestrel's sockets transport logs it, never left to escape the pool's work item, where the pool's exception policy
    /// would end the process by default.
    /// </summary>
    private void CancelClosedToken()
    {
        Volatile.Write(ref _firingThread, Environment.CurrentManagedThreadId);
        try
        {
            _closed.Cancel();
        }
        catch (Exception e)
        {
            Log.ConnectionClosedCallbackFailed(_logger, e, ConnectionId);
        }
        finally
        {
            Volatile.Write(ref _firingThread, 0);
            _closedCallbacksDone.SetResult(); // once: the firing is queued once
        }
    }

    private sealed class DuplexPipe(PipeReader input, PipeWriter output) : IDuplexPipe
    {
        public PipeReader Input { get; } = input;

        public PipeWriter Output { get; } = output;
    }

    private static partial class Log
    {
        [LoggerMessage(2, LogLevel.Error, "A callback of connection {ConnectionId}'s ConnectionClosed token threw.")]
        public static partial void ConnectionClosedCallbackFailed(ILogger logger, Exception exception, string connectionId);
    }
}
