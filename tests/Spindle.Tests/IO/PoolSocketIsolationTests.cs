using System;
using System.Net;
using System.Net.Http;
using System.Net.Security;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// Socket work on the pool goes on while the built-in thread pool is starved. Runs alone (the process-wide collection):
/// starving the built-in pool would stall other tests.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class PoolSocketIsolationTests
{
    [Fact]
    public void AnHttpClientRequestThroughThePoolsStream_CompletesWhileTheBuiltInPoolIsStarved()
    {
        if (!Spindle.Polling.EpollDriver.IsSupported)
        {
            return; // elsewhere the runtime's socket engine, and so the built-in pool, completes the operations
        }
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketIsolationTests) });
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        int port = ((IPEndPoint)listener.Socket.LocalEndPoint!).Port;
        _ = pool.Run(() => ServeHttp(pool, listener));
        using var http = new HttpClient(new SocketsHttpHandler
        {
            ConnectCallback = async (context, cancellationToken) =>
            {
                var socket = new PoolSocket(pool);
                try
                {
                    await socket.ConnectAsync(context.DnsEndPoint, cancellationToken);
                    return socket.GetStream();
                }
                catch
                {
                    socket.Dispose();
                    throw;
                }
            },
        });
        string url = $"http://127.0.0.1:{port}/";

        // HttpClient creates a connection through the built-in pool (its own Task.Yield), so the first request, made
        // while that pool is healthy, leaves a pooled connection that the starved request reuses.
        Assert.True(pool.Run(() => http.GetStringAsync(url)).Wait(Waits.MustHappen), "the first request");

        var starvation = new BuiltInPoolStarvation();
        try
        {
            Task<string> request = pool.Run(() => http.GetStringAsync(url));
            Assert.True(request.Wait(Waits.MustHappen), "the request while the built-in pool is starved");
            Assert.Equal("hello", request.Result);
            // The built-in pool was starved all along: an item queued behind the blocked ones has not run.
            Assert.False(starvation.ProbeRan);
        }
        finally
        {
            starvation.Release();
        }
    }

    [Fact]
    public void ATlsHandshakeAndExchangeOverThePoolsStreams_CompleteWhileTheBuiltInPoolIsStarved()
    {
        if (!Spindle.Polling.EpollDriver.IsSupported)
        {
            return; // elsewhere the runtime's socket engine, and so the built-in pool, completes the operations
        }
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketIsolationTests) });
        using X509Certificate2 certificate = TestCertificate.Create();
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        using var client = new PoolSocket(pool);
        Task<PoolSocket> accepted = pool.Run(async () => await listener.AcceptAsync());
        Assert.True(pool.Run(async () => await client.ConnectAsync(listener.Socket.LocalEndPoint!)).Wait(Waits.MustHappen), "the connection");
        Assert.True(accepted.Wait(Waits.MustHappen), "the accept");
        using PoolSocket server = accepted.Result;
        using var clientTls = new SslStream(client.GetStream(ownsSocket: false), leaveInnerStreamOpen: false,
            (_, presented, _, _) => presented is not null && presented.GetCertHashString() == certificate.GetCertHashString());
        using var serverTls = new SslStream(server.GetStream(ownsSocket: false), leaveInnerStreamOpen: false);

        var starvation = new BuiltInPoolStarvation();
        try
        {
            Task serverSide = pool.Run(async () =>
            {
                await serverTls.AuthenticateAsServerAsync(new SslServerAuthenticationOptions { ServerCertificate = certificate });
                var request = new byte[5];
                await serverTls.ReadExactlyAsync(request);
                Array.Reverse(request);
                await serverTls.WriteAsync(request);
            });
            Task<string> clientSide = pool.Run(async () =>
            {
                await clientTls.AuthenticateAsClientAsync(new SslClientAuthenticationOptions { TargetHost = "localhost" });
                await clientTls.WriteAsync(Encoding.ASCII.GetBytes("hello"));
                var response = new byte[5];
                await clientTls.ReadExactlyAsync(response);
                return Encoding.ASCII.GetString(response);
            });
            Assert.True(Task.WhenAll(serverSide, clientSide).Wait(Waits.MustHappen), "the handshake and the exchange while the built-in pool is starved");
            Assert.Equal("olleh", clientSide.Result);
            // The built-in pool was starved all along: an item queued behind the blocked ones has not run.
            Assert.False(starvation.ProbeRan);
        }
        finally
        {
            starvation.Release();
        }
    }

    /// <summary>
    /// Starves the built-in pool: 200 items block on a gate, and a probe queued behind them shows whether anything got
    /// through. Released by <see cref="Release"/>.
    /// </summary>
    private sealed class BuiltInPoolStarvation
    {
        // Never disposed: the blocked items that have not started yet still wait on it after the test returns.
        private readonly ManualResetEventSlim _gate = new();
        private int _probeRan;

        public BuiltInPoolStarvation()
        {
            // More blocked items than the built-in pool has threads (other tests of the process may have grown it) and
            // than it adds in a test's time (about two a second while starved), so that the probe behind them cannot run.
            int blocked = Math.Max(200, ThreadPool.ThreadCount + 64);
            for (int i = 0; i < blocked; i++)
            {
                ThreadPool.UnsafeQueueUserWorkItem(static gate => ((ManualResetEventSlim)gate!).Wait(), _gate);
            }
            ThreadPool.UnsafeQueueUserWorkItem(static self => Volatile.Write(ref ((BuiltInPoolStarvation)self!)._probeRan, 1), this);
        }

        public bool ProbeRan => Volatile.Read(ref _probeRan) != 0;

        public void Release() => _gate.Set();
    }

    /// <summary>A minimal HTTP/1.1 server on the pool: answers every request head with "hello", keeping the connection.</summary>
    private static async Task ServeHttp(WorkerPool pool, PoolSocket listener)
    {
        while (true)
        {
            PoolSocket connection;
            try
            {
                connection = await listener.AcceptAsync();
            }
            catch (ObjectDisposedException)
            {
                return;
            }
            _ = pool.Run(async () =>
            {
                using (connection)
                {
                    var buffer = new byte[4096];
                    var head = new StringBuilder();
                    byte[] response = Encoding.ASCII.GetBytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello");
                    try
                    {
                        int received;
                        while ((received = await connection.ReceiveAsync(buffer)) > 0)
                        {
                            head.Append(Encoding.ASCII.GetString(buffer, 0, received));
                            if (head.ToString().Contains("\r\n\r\n", StringComparison.Ordinal))
                            {
                                head.Clear();
                                await connection.SendAsync(response);
                            }
                        }
                    }
                    catch (ObjectDisposedException)
                    {
                    }
                }
            });
        }
    }
}
