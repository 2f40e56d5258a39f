using System.Buffers;
using System;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle.IO;

/// <summary>A socket on the runtime's engine (no driver here, or a test asks): its operations, resumed on the pool.</summary>
public sealed partial class PoolSocket
{
    /// <summary>Linux's <c>sockaddr_in</c> or <c>sockaddr_in6</c> for <paramref name="remote"/> (an IPv4 address on an IPv6 socket is mapped).</summary>
    private static byte[] SocketAddressFor(IPEndPoint remote, AddressFamily socketFamily)
    {
        IPAddress address = remote.Address;
        if (socketFamily == AddressFamily.InterNetworkV6 && address.AddressFamily == AddressFamily.InterNetwork)
        {
            address = address.MapToIPv6();
        }
        if (address.AddressFamily != socketFamily)
        {
            throw new ArgumentException($"An {address.AddressFamily} address cannot be reached from an {socketFamily} socket.", nameof(remote));
        }
        bool v6 = address.AddressFamily == AddressFamily.InterNetworkV6;
        var bytes = new byte[v6 ? 28 : 16];
        BitConverter.TryWriteBytes(bytes.AsSpan(0, 2), (ushort)(v6 ? 10 : 2)); // AF_INET6 / AF_INET, host order
        bytes[2] = (byte)(remote.Port >> 8);
        bytes[3] = (byte)remote.Port;
        if (v6)
        {
            address.TryWriteBytes(bytes.AsSpan(8, 16), out _);
            uint scope = (uint)address.ScopeId;
            BitConverter.TryWriteBytes(bytes.AsSpan(24, 4), scope);
        }
        else
        {
            address.TryWriteBytes(bytes.AsSpan(4, 4), out _);
        }
        return bytes;
    }

    // ---- elsewhere: the runtime's socket engine, then a hop to the pool ----

    private ValueTask<int> FallbackReceiveAsync(Memory<byte> buffer, CancellationToken cancellationToken) =>
        OnRuntimeEngineAsync(static (state, token) => state.Socket.ReceiveAsync(state.Buffer, SocketFlags.None, token),
            (Socket: _socket, Buffer: buffer), _readGate, cancellationToken);

    private ValueTask<int> FallbackSendAsync(ReadOnlySequence<byte> buffers, CancellationToken cancellationToken) =>
        OnRuntimeEngineAsync(static (state, token) => state.Buffers.IsSingleSegment
                ? SendAllAsync(state.Socket, state.Buffers.First, token)
                : SendSegmentsAsync(state.Socket, state.Buffers, token),
            (Socket: _socket, Buffers: buffers), _writeGate, cancellationToken);

    private ValueTask<PoolSocket> FallbackAcceptAsync(CancellationToken cancellationToken) =>
        OnRuntimeEngineAsync(static async (owner, token) =>
            new PoolSocket(owner._pool, await owner._socket.AcceptAsync(token).ConfigureAwait(false), ownsValidated: true),
            this, _readGate, cancellationToken);

    private async ValueTask FallbackConnectAsync(IPEndPoint remote, CancellationToken cancellationToken)
    {
        Enter(_writeGate, "send or connect");
        await OnRuntimeEngineAsync(static async (state, token) =>
        {
            await state.Socket.ConnectAsync(state.Remote, token).ConfigureAwait(false);
            return true;
        }, (Socket: _socket, Remote: remote), _writeGate, cancellationToken).ConfigureAwait(false);
    }

    private static async ValueTask<int> SendSegmentsAsync(Socket socket, ReadOnlySequence<byte> buffers, CancellationToken cancellationToken)
    {
        foreach (ReadOnlyMemory<byte> segment in buffers)
        {
            await SendAllAsync(socket, segment, cancellationToken).ConfigureAwait(false);
        }
        return (int)buffers.Length;
    }

    private static async ValueTask<int> SendAllAsync(Socket socket, ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken)
    {
        int sent = 0;
        while (sent < buffer.Length)
        {
            sent += await socket.SendAsync(buffer[sent..], SocketFlags.None, cancellationToken).ConfigureAwait(false);
        }
        return sent;
    }

    /// <summary>
    /// Without the driver: runs one of the runtime's socket operations (the caller has entered <paramref name="gate"/>;
    /// this leaves it), then resumes on the pool. The socket's disposal and the pool's shutdown cancel it and surface as
    /// <see cref="ObjectDisposedException"/>; the caller's token, as an <see cref="OperationCanceledException"/> of that token.
    /// </summary>
    private async ValueTask<T> OnRuntimeEngineAsync<T, TState>(Func<TState, CancellationToken, ValueTask<T>> operation, TState state,
        DirectionGate gate, CancellationToken cancellationToken)
    {
        CancellationToken callerToken = cancellationToken;
        CancellationTokenSource? linked = LinkClose(ref cancellationToken);
        try
        {
            T result = await operation(state, cancellationToken).ConfigureAwait(false);
            await new PoolHop(_pool, _scheduler);
            return result;
        }
        catch (OperationCanceledException) when (callerToken.IsCancellationRequested)
        {
            throw new OperationCanceledException(callerToken);
        }
        catch (Exception e) when (IsClosedUnder(e))
        {
            throw ClosedError();
        }
        finally
        {
            linked?.Dispose();
            gate.Exit();
        }
    }

    /// <summary>
    /// Without the driver: makes <paramref name="cancellationToken"/> also fire when the socket is disposed or the pool
    /// shuts down (a linked source, allocated only when the caller's token can fire too).
    /// </summary>
    private CancellationTokenSource? LinkClose(ref CancellationToken cancellationToken)
    {
        if (!cancellationToken.CanBeCanceled)
        {
            cancellationToken = _runtimeEngineClose!.Token;
            return null;
        }
        CancellationTokenSource linked = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken, _runtimeEngineClose!.Token);
        cancellationToken = linked.Token;
        return linked;
    }

    /// <summary>Whether <paramref name="failure"/> came from the socket's closing (dispose or shutdown), not from the caller's token or the network.</summary>
    private bool IsClosedUnder(Exception failure) =>
        _runtimeEngineClose!.IsCancellationRequested
        && failure is OperationCanceledException or ObjectDisposedException or SocketException { SocketErrorCode: SocketError.OperationAborted };

    /// <summary>Resumes the awaiting method on the pool, unless it already runs there.</summary>
    private readonly struct PoolHop(WorkerPool pool, Scheduler scheduler) : ICriticalNotifyCompletion
    {
        public PoolHop GetAwaiter() => this;

        public bool IsCompleted => WorkerPool.Current == pool;

        public void GetResult()
        {
        }

        public void OnCompleted(Action continuation) => UnsafeOnCompleted(continuation);

        public void UnsafeOnCompleted(Action continuation) =>
            scheduler.EnqueueContinuation(new WorkItemEntry(s_resume, continuation, null), preferLocal: false);
    }
}
