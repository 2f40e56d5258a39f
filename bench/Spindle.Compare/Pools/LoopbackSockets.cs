using System;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;

namespace Spindle.Compare.Pools;

/// <summary>One end of a loopback TCP connection, as each pool's async code uses it.</summary>
internal interface IStreamEnd : IDisposable
{
    ValueTask<int> ReceiveAsync(Memory<byte> buffer);

    /// <summary>Sends the whole buffer.</summary>
    ValueTask<int> SendAsync(ReadOnlyMemory<byte> buffer);
}

/// <summary>
/// Loopback connections for the socket scenarios: made with plain blocking calls, then handed to the pool under test:
/// Spindle wraps each end in a <see cref="PoolSocket"/> (its own driver), the built-in pool uses the runtime's socket
/// async methods, whose completions run on the built-in pool.
/// </summary>
internal static class LoopbackSockets
{
    /// <summary>A connected pair: the client end and the server end.</summary>
    public static (Socket Client, Socket Server) ConnectPair()
    {
        using var listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen(1);
        var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        client.Connect(listener.LocalEndPoint!);
        Socket server = listener.Accept();
        server.NoDelay = true;
        return (client, server);
    }

    /// <summary>The server side of the socket scenarios: sends back whatever arrives until the peer closes, then disposes the end.</summary>
    public static async Task EchoAsync(IStreamEnd server, int bufferSize)
    {
        var buffer = new byte[bufferSize];
        using (server)
        {
            int received;
            while ((received = await server.ReceiveAsync(buffer)) > 0)
            {
                await server.SendAsync(buffer.AsMemory(0, received));
            }
        }
    }

    /// <summary>Spindle: an end on the pool's driver.</summary>
    public sealed class PoolEnd(WorkerPool pool, Socket socket) : IStreamEnd
    {
        private readonly PoolSocket _socket = new(pool, socket);

        public ValueTask<int> ReceiveAsync(Memory<byte> buffer) => _socket.ReceiveAsync(buffer);

        public ValueTask<int> SendAsync(ReadOnlyMemory<byte> buffer) => _socket.SendAsync(buffer);

        public void Dispose() => _socket.Dispose();
    }

    /// <summary>The built-in pool: the runtime's socket async methods.</summary>
    public sealed class RuntimeEnd(Socket socket) : IStreamEnd
    {
        public ValueTask<int> ReceiveAsync(Memory<byte> buffer) => socket.ReceiveAsync(buffer, SocketFlags.None);

        // A stream socket's SendAsync completes once the whole buffer is sent.
        public ValueTask<int> SendAsync(ReadOnlyMemory<byte> buffer) => socket.SendAsync(buffer, SocketFlags.None);

        public void Dispose() => socket.Dispose();
    }
}
