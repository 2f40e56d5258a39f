using System;
using System.Buffers;
using System.IO;
using System.IO.Pipelines;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Connections;

namespace Spindle.AspNetCore.Transport;

// The two loops between the socket and the pipes; the protocol is in SpindleConnection's remarks.
internal sealed partial class SpindleConnection
{
    private async Task ReceiveLoopAsync()
    {
        Exception? error = null;
        PipeWriter writer = _input.Writer;
        try
        {
            while (true)
            {
                Memory<byte> buffer = writer.GetMemory(_minimumAllocation);
                int received = await _socket.ReceiveAsync(buffer).ConfigureAwait(false);
                if (received == 0)
                {
                    break; // the peer's FIN
                }
                writer.Advance(received);
                FlushResult flush = await writer.FlushAsync().ConfigureAwait(false);
                if (flush.IsCompleted || flush.IsCanceled)
                {
                    break; // the application stopped reading, or the socket is closing
                }
            }
        }
        catch (Exception e)
        {
            error = Translate(e);
        }
        finally
        {
            writer.Complete(Volatile.Read(ref _shutdownReason) ?? error);
            FireConnectionClosed();
        }
    }

    /// <summary>The most one send of a sequence takes (a pool socket refuses a longer one).</summary>
    private const int MaxSendLength = int.MaxValue;

    private async Task SendLoopAsync()
    {
        Exception? error = null;
        PipeReader reader = _output.Reader;
        try
        {
            while (true)
            {
                ReadResult result = await reader.ReadAsync().ConfigureAwait(false);
                if (result.IsCanceled)
                {
                    break; // aborted
                }
                ReadOnlySequence<byte> buffer = result.Buffer;
                // Several of the pipe's segments leave in one gather send; a buffer longer than a send takes, in slices.
                for (ReadOnlySequence<byte> rest = buffer; !rest.IsEmpty;)
                {
                    ReadOnlySequence<byte> slice = rest.Length <= MaxSendLength ? rest : rest.Slice(0, MaxSendLength);
                    await _socket.SendAsync(slice).ConfigureAwait(false);
                    rest = rest.Slice(slice.End);
                }
                reader.AdvanceTo(buffer.End);
                if (result.IsCompleted)
                {
                    break; // the application completed its output
                }
            }
        }
        catch (Exception e)
        {
            error = Translate(e);
            if (error is ConnectionResetException reset)
            {
                Interlocked.CompareExchange(ref _shutdownReason, new ConnectionAbortedException(reset.Message, reset), null);
            }
        }
        finally
        {
            CloseSocket();
            // The application's next write fails with the reason; a normal end completes the reader without one.
            reader.Complete(Volatile.Read(ref _shutdownReason) ?? error);
        }
    }

    /// <summary>What the application sees for a loop's failure, in the types Kestrel's own transports use.</summary>
    private Exception Translate(Exception e) => e switch
    {
        SocketException s when IsReset(s.SocketErrorCode) => new ConnectionResetException(s.Message, s),
        ObjectDisposedException or OperationCanceledException => Volatile.Read(ref _shutdownReason) ?? new ConnectionAbortedException("The connection was closed.", e),
        SocketException s when s.SocketErrorCode is SocketError.OperationAborted or SocketError.Interrupted =>
            Volatile.Read(ref _shutdownReason) ?? new ConnectionAbortedException(s.Message, s),
        _ => new IOException(e.Message, e),
    };

    /// <summary>The peer reset the connection, or closed it under a send (<c>EPIPE</c> is <see cref="SocketError.Shutdown"/>).</summary>
    private static bool IsReset(SocketError error) =>
        error is SocketError.ConnectionReset or SocketError.ConnectionAborted or SocketError.Shutdown;
}
