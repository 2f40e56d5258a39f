using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle.IO;

/// <summary>
/// A <see cref="Stream"/> over a <see cref="PoolSocket"/>, so that <c>SslStream</c>, <c>System.IO.Pipelines</c>,
/// stream readers and writers and <c>SocketsHttpHandler.ConnectCallback</c> run their I/O on the pool. Reads are
/// receives (0 at the end of the stream), writes are sends of the whole buffer; not seekable.
/// </summary>
/// <remarks>
/// The synchronous <see cref="Read(Span{byte})"/> and <see cref="Write(ReadOnlySpan{byte})"/> wait for the
/// asynchronous operation; on a worker of the pool they wait inside a blocking region, so the pool adds a thread for
/// the continuation they wait for instead of starving. Prefer the asynchronous forms.
/// </remarks>
public sealed class PoolSocketStream : Stream
{
    private readonly PoolSocket _socket;
    private readonly bool _ownsSocket;
    private int _disposed;

    internal PoolSocketStream(PoolSocket socket, bool ownsSocket)
    {
        _socket = socket;
        _ownsSocket = ownsSocket;
    }

    /// <summary>The socket this stream reads and writes.</summary>
    public PoolSocket Socket => _socket;

    /// <inheritdoc/>
    public override bool CanRead => Volatile.Read(ref _disposed) == 0;

    /// <inheritdoc/>
    public override bool CanWrite => Volatile.Read(ref _disposed) == 0;

    /// <inheritdoc/>
    public override bool CanSeek => false;

    /// <inheritdoc/>
    public override long Length => throw new NotSupportedException("A socket stream has no length.");

    /// <inheritdoc/>
    public override long Position
    {
        get => throw new NotSupportedException("A socket stream has no position.");
        set => throw new NotSupportedException("A socket stream has no position.");
    }

    /// <inheritdoc/>
    public override ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        return _socket.ReceiveAsync(buffer, cancellationToken);
    }

    /// <inheritdoc/>
    public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
    {
        ValidateBufferArguments(buffer, offset, count);
        return ReadAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();
    }

    /// <inheritdoc/>
    public override async ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        await _socket.SendAsync(buffer, cancellationToken).ConfigureAwait(false);
    }

    /// <inheritdoc/>
    public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
    {
        ValidateBufferArguments(buffer, offset, count);
        return WriteAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();
    }

    /// <inheritdoc/>
    public override int Read(byte[] buffer, int offset, int count)
    {
        ValidateBufferArguments(buffer, offset, count);
        return Read(buffer.AsSpan(offset, count));
    }

    /// <inheritdoc/>
    public override int Read(Span<byte> buffer)
    {
        ThrowIfDisposed();
        byte[] rented = System.Buffers.ArrayPool<byte>.Shared.Rent(Math.Max(1, buffer.Length));
        try
        {
            int read = Wait(_socket.ReceiveAsync(rented.AsMemory(0, buffer.Length)));
            rented.AsSpan(0, read).CopyTo(buffer);
            return read;
        }
        finally
        {
            System.Buffers.ArrayPool<byte>.Shared.Return(rented);
        }
    }

    /// <inheritdoc/>
    public override void Write(byte[] buffer, int offset, int count)
    {
        ValidateBufferArguments(buffer, offset, count);
        Wait(_socket.SendAsync(buffer.AsMemory(offset, count)));
    }

    /// <inheritdoc/>
    public override void Write(ReadOnlySpan<byte> buffer)
    {
        ThrowIfDisposed();
        byte[] rented = System.Buffers.ArrayPool<byte>.Shared.Rent(Math.Max(1, buffer.Length));
        try
        {
            buffer.CopyTo(rented);
            Wait(_socket.SendAsync(rented.AsMemory(0, buffer.Length)));
        }
        finally
        {
            System.Buffers.ArrayPool<byte>.Shared.Return(rented);
        }
    }

    /// <summary>Nothing to flush: every write has been handed to the kernel when it returns.</summary>
    public override void Flush()
    {
    }

    /// <inheritdoc/>
    public override Task FlushAsync(CancellationToken cancellationToken) =>
        cancellationToken.IsCancellationRequested ? Task.FromCanceled(cancellationToken) : Task.CompletedTask;

    /// <summary>Not supported: a socket stream cannot seek.</summary>
    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException("A socket stream cannot seek.");

    /// <summary>Not supported: a socket stream has no length.</summary>
    public override void SetLength(long value) => throw new NotSupportedException("A socket stream has no length.");

    /// <inheritdoc/>
    protected override void Dispose(bool disposing)
    {
        if (disposing && Interlocked.Exchange(ref _disposed, 1) == 0 && _ownsSocket)
        {
            _socket.Dispose();
        }
        base.Dispose(disposing);
    }

    private void ThrowIfDisposed() => ObjectDisposedException.ThrowIf(Volatile.Read(ref _disposed) != 0, this);

    private static int Wait(ValueTask<int> operation)
    {
        if (operation.IsCompleted)
        {
            return operation.GetAwaiter().GetResult();
        }
        using (BlockingRegion.Enter())
        {
            return operation.AsTask().GetAwaiter().GetResult();
        }
    }
}
