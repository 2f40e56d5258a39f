using System;
using System.Buffers;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Connections;
using Microsoft.Extensions.Logging;
using Spindle.IO;

namespace Spindle.AspNetCore.Transport;

/// <summary>
/// One bound IP endpoint: accepts connections with the pool's <see cref="PoolSocket"/> and starts each as a
/// <see cref="SpindleConnection"/>. Unbinding or disposing closes the listening socket, which ends a pending
/// <see cref="AcceptAsync"/> with <see langword="null"/> (Kestrel's signal that the listener is done); connections
/// already accepted live on until Kestrel closes them.
/// </summary>
internal sealed partial class SpindleConnectionListener : IConnectionListener
{
    private readonly WorkerPool _pool;
    private readonly MemoryPool<byte> _memory;
    private readonly SpindleTransportOptions _options;
    private readonly ILogger _logger;
    // The connections' send loops resume on the worker that flushed, after its work item: see SpindleConnection.
    private readonly WorkerPoolPipeScheduler _sendScheduler;
    private PoolSocket? _socket;
    private EndPoint? _endPoint;
    private int _memoryDisposed;

    public SpindleConnectionListener(WorkerPool pool, MemoryPool<byte> memory, SpindleTransportOptions options, ILogger logger)
    {
        _pool = pool;
        _memory = memory;
        _options = options;
        _logger = logger;
        _sendScheduler = new WorkerPoolPipeScheduler(pool, preferLocal: true);
    }

    /// <inheritdoc/>
    public EndPoint EndPoint => _endPoint ?? throw new InvalidOperationException("The listener is not bound.");

    /// <summary>Binds and listens; Kestrel's address-in-use handling expects <see cref="AddressInUseException"/>.</summary>
    internal void Bind(IPEndPoint endpoint)
    {
        var socket = new PoolSocket(_pool, endpoint.AddressFamily);
        try
        {
            if (endpoint.Address.Equals(IPAddress.IPv6Any))
            {
                socket.Socket.DualMode = true; // [::] takes IPv4 connections too, as with Kestrel's own transport
            }
            socket.Bind(endpoint);
            socket.Listen(_options.Backlog);
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.AddressAlreadyInUse)
        {
            socket.Dispose();
            throw new AddressInUseException(e.Message, e);
        }
        catch
        {
            socket.Dispose();
            throw;
        }
        _endPoint = socket.Socket.LocalEndPoint;
        _socket = socket;
    }

    /// <inheritdoc/>
    public async ValueTask<ConnectionContext?> AcceptAsync(CancellationToken cancellationToken = default)
    {
        PoolSocket listening = _socket ?? throw new InvalidOperationException("The listener is not bound.");
        TimeSpan acceptRetry = s_firstAcceptRetry;
        while (true)
        {
            PoolSocket accepted;
            try
            {
                accepted = await listening.AcceptAsync(cancellationToken).ConfigureAwait(false);
            }
            catch (ObjectDisposedException)
            {
                return null; // unbound, disposed, or the pool is shutting down
            }
            catch (SocketException e) when (e.SocketErrorCode is SocketError.OperationAborted or SocketError.Interrupted)
            {
                return null;
            }
            catch (SocketException e) when (e.SocketErrorCode is SocketError.ConnectionReset or SocketError.ConnectionAborted)
            {
                // The peer gave up before the accept: nothing to serve; wait for the next one.
                Log.AcceptedConnectionReset(_logger, e.SocketErrorCode);
                continue;
            }
            catch (SocketException e)
            {
                // Any other failure (out of descriptors, of buffers) must not end Kestrel's accept loop, which an
                // exception from here does for good: the listener takes no connection again. Kestrel's own listener
                // retries too. The connection waits in the backlog, and the listening socket's readiness does not
                // signal again for it (edge-triggered), so the retry comes after a pause, a longer one each time while
                // the failure lasts (1 s at most), on the pool's own timers.
                Log.AcceptFailed(_logger, e, e.SocketErrorCode, acceptRetry);
                try
                {
                    await Task.Delay(acceptRetry, _pool.TimeProvider, cancellationToken).ConfigureAwait(false);
                }
                catch (ObjectDisposedException)
                {
                    return null; // the pool is shutting down
                }
                acceptRetry = TimeSpan.FromTicks(Math.Min(acceptRetry.Ticks * 2, s_maxAcceptRetry.Ticks));
                continue;
            }
            acceptRetry = s_firstAcceptRetry;
            try
            {
                if (_options.NoDelay)
                {
                    accepted.Socket.NoDelay = true;
                }
                var connection = new SpindleConnection(accepted, _memory, _sendScheduler, _options, _logger);
                connection.Start();
                return connection;
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException)
            {
                // Reset between the accept and the options: the connection is gone; so is its socket.
                accepted.Dispose();
                Log.AcceptedConnectionReset(_logger, e is SocketException s ? s.SocketErrorCode : SocketError.Shutdown);
            }
        }
    }

    /// <inheritdoc/>
    public ValueTask UnbindAsync(CancellationToken cancellationToken = default)
    {
        _socket?.Dispose();
        return ValueTask.CompletedTask;
    }

    /// <inheritdoc/>
    public ValueTask DisposeAsync()
    {
        _socket?.Dispose();
        // Kestrel disposes a listener once its connections are closed; the memory pool goes with it, once.
        if (Interlocked.Exchange(ref _memoryDisposed, 1) == 0 && !ReferenceEquals(_memory, MemoryPool<byte>.Shared))
        {
            _memory.Dispose();
        }
        return ValueTask.CompletedTask;
    }

    private static readonly TimeSpan s_firstAcceptRetry = TimeSpan.FromMilliseconds(10);
    private static readonly TimeSpan s_maxAcceptRetry = TimeSpan.FromSeconds(1);

    private static partial class Log
    {
        [LoggerMessage(3, LogLevel.Error, "Accepting a connection failed ({Error}); the listener tries again in {Retry}.")]
        public static partial void AcceptFailed(ILogger logger, Exception exception, SocketError error, TimeSpan retry);

        [LoggerMessage(1, LogLevel.Debug, "A connection was reset before it was accepted ({Error}).")]
        public static partial void AcceptedConnectionReset(ILogger logger, SocketError error);
    }
}
