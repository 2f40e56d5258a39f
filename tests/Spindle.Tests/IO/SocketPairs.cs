using System;
using System.Net;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>Loopback connections of <see cref="PoolSocket"/>s for the socket tests, with generous bounds.</summary>
internal static class SocketPairs
{
    /// <summary>A socket listening on a free loopback port.</summary>
    public static PoolSocket Listen(WorkerPool pool)
    {
        var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        return listener;
    }

    /// <summary>A connected pair on <paramref name="pool"/>: the client side and the accepted side.</summary>
    public static async Task<(PoolSocket Client, PoolSocket Server)> ConnectAsync(WorkerPool pool)
    {
        using PoolSocket listener = Listen(pool);
        var client = new PoolSocket(pool);
        ValueTask<PoolSocket> accept = listener.AcceptAsync();
        await client.ConnectAsync(listener.Socket.LocalEndPoint!).AsTask().WaitAsync(Waits.MustHappen);
        PoolSocket server = await accept.AsTask().WaitAsync(Waits.MustHappen);
        return (client, server);
    }

    /// <summary>Receives until <paramref name="buffer"/> is full; fails if the connection ends first.</summary>
    public static async Task ReceiveExactlyAsync(PoolSocket socket, Memory<byte> buffer)
    {
        int total = 0;
        while (total < buffer.Length)
        {
            int received = await socket.ReceiveAsync(buffer[total..]).AsTask().WaitAsync(Waits.MustHappen);
            Assert.True(received > 0, $"the connection ended after {total} of {buffer.Length} bytes");
            total += received;
        }
    }
}
