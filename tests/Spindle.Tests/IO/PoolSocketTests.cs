using System;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using System.Runtime.CompilerServices;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// <see cref="PoolSocket"/>: data through loopback connections, completions on the pool, peers that close or reset,
/// cancellation, disposal and pool shutdown during pending operations, and bad input. Every test runs twice: on the
/// pool's own driver (<see cref="PoolSocketDriverTests"/>) and on the runtime's socket engine, the path of platforms
/// without the driver (<see cref="PoolSocketRuntimeEngineTests"/>). Bounds are generous.
/// </summary>
public abstract class PoolSocketTests
{
    /// <summary>Whether this run's pools leave the driver aside.</summary>
    protected abstract bool RuntimeEngine { get; }

    protected WorkerPool NewPool()
    {
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = GetType().Name,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        pool.SocketsUseRuntimeEngine = RuntimeEngine;
        return pool;
    }

    [Fact]
    public void TheSocket_UsesTheDriverWhereItExists()
    {
        using WorkerPool pool = NewPool();
        using var socket = new PoolSocket(pool);
        Assert.Equal(!RuntimeEngine && Spindle.Polling.EpollDriver.IsSupported, socket.UsesPoolDriver);
        Assert.Same(pool, socket.Pool);
        Assert.False(socket.Socket.Blocking);
    }

    [Fact]
    public async Task AMegabyteEachWay_ArrivesIntact()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            byte[] sent = new byte[1 << 20];
            new Random(7).NextBytes(sent);
            byte[] received = new byte[sent.Length];
            // Both directions at once: sends larger than the socket buffers must wait for writability.
            Task toServer = client.SendAsync(sent).AsTask();
            Task toClient = server.SendAsync(sent).AsTask();
            await SocketPairs.ReceiveExactlyAsync(server, received);
            Assert.True(sent.AsSpan().SequenceEqual(received));
            await SocketPairs.ReceiveExactlyAsync(client, received);
            Assert.True(sent.AsSpan().SequenceEqual(received));
            await Task.WhenAll(toServer, toClient).WaitAsync(Waits.MustHappen);
        }
    }

    [Fact]
    public async Task AnOperationThatWaited_ResumesOnAWorkerOfThePool_NotOnTheBuiltInPool()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            var buffer = new byte[16];
            for (int round = 0; round < 20; round++)
            {
                ValueTask<int> receive = server.ReceiveAsync(buffer);
                Assert.False(receive.IsCompleted); // nothing sent yet: it waits for readiness
                WorkerPool? resumedOn = null;
                bool builtInThread = true;
                Task check = Continue(receive);
                await client.SendAsync(new byte[] { (byte)round }).AsTask().WaitAsync(Waits.MustHappen);
                await check.WaitAsync(Waits.MustHappen);
                Assert.Same(pool, resumedOn);
                Assert.False(builtInThread);
                Assert.Equal((byte)round, buffer[0]);

                async Task Continue(ValueTask<int> pending)
                {
                    Assert.Equal(1, await pending.ConfigureAwait(false));
                    resumedOn = WorkerPool.Current;
                    builtInThread = Thread.CurrentThread.IsThreadPoolThread;
                }
            }
        }
    }

    [Fact]
    public async Task ThePeersOrderlyClose_EndsTheStreamWithZero()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (server)
        {
            ValueTask<int> receive = server.ReceiveAsync(new byte[8]);
            client.Socket.Shutdown(SocketShutdown.Send);
            Assert.Equal(0, await receive.AsTask().WaitAsync(Waits.MustHappen));
            client.Dispose();
            Assert.Equal(0, await server.ReceiveAsync(new byte[8]).AsTask().WaitAsync(Waits.MustHappen));
        }
    }

    [Fact]
    public async Task AResetByThePeer_FailsThePendingReceive_WithConnectionReset()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (server)
        {
            ValueTask<int> receive = server.ReceiveAsync(new byte[8]);
            client.Socket.LingerState = new LingerOption(true, 0); // close with RST
            client.Dispose();
            SocketException error = await Assert.ThrowsAsync<SocketException>(() => receive.AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(SocketError.ConnectionReset, error.SocketErrorCode);
        }
    }

    [Fact]
    public async Task ConnectingToAClosedPort_IsRefused()
    {
        using WorkerPool pool = NewPool();
        int port;
        using (var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
        {
            probe.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            port = ((IPEndPoint)probe.LocalEndPoint!).Port; // bound, never listening: connecting is refused
            using var client = new PoolSocket(pool);
            SocketException error = await Assert.ThrowsAsync<SocketException>(
                () => client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, port)).AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(SocketError.ConnectionRefused, error.SocketErrorCode);
        }
    }

    [Fact]
    public async Task ConnectByHostName_Works()
    {
        using WorkerPool pool = NewPool();
        using PoolSocket listener = SocketPairs.Listen(pool);
        using var client = new PoolSocket(pool);
        ValueTask<PoolSocket> accept = listener.AcceptAsync();
        await client.ConnectAsync("localhost", ((IPEndPoint)listener.Socket.LocalEndPoint!).Port).AsTask().WaitAsync(Waits.MustHappen);
        using PoolSocket server = await accept.AsTask().WaitAsync(Waits.MustHappen);
        await client.SendAsync(new byte[] { 42 });
        var buffer = new byte[1];
        await SocketPairs.ReceiveExactlyAsync(server, buffer);
        Assert.Equal(42, buffer[0]);
    }

    [Fact]
    public async Task CancellingAPendingReceive_ThrowsOperationCanceled_AndTheSocketStaysUsable()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            using var cancel = new CancellationTokenSource();
            var buffer = new byte[4];
            ValueTask<int> receive = server.ReceiveAsync(buffer, cancel.Token);
            cancel.Cancel();
            OperationCanceledException error = await Assert.ThrowsAnyAsync<OperationCanceledException>(
                () => receive.AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(cancel.Token, error.CancellationToken);

            await client.SendAsync(new byte[] { 1, 2, 3, 4 });
            await SocketPairs.ReceiveExactlyAsync(server, buffer);
            Assert.Equal(new byte[] { 1, 2, 3, 4 }, buffer);
        }
    }

    [Fact]
    public async Task AnAlreadyCancelledToken_ThrowsAtTheCall()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            Assert.Throws<OperationCanceledException>(() => { _ = server.ReceiveAsync(new byte[1], new CancellationToken(true)); });
            Assert.Throws<OperationCanceledException>(() => { _ = server.SendAsync(new byte[1], new CancellationToken(true)); });
        }
    }

    [Fact]
    public async Task DisposingDuringAPendingReceive_CompletesItWithObjectDisposed()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        {
            ValueTask<int> receive = server.ReceiveAsync(new byte[8]);
            server.Dispose();
            await Assert.ThrowsAsync<ObjectDisposedException>(() => receive.AsTask().WaitAsync(Waits.MustHappen));
            Assert.Throws<ObjectDisposedException>(() => { _ = server.ReceiveAsync(new byte[8]); });
            server.Dispose(); // idempotent
        }
    }

    [Theory]
    [InlineData(ShutdownMode.Drain)]
    [InlineData(ShutdownMode.CancelPending)]
    public async Task PoolShutdown_CompletesPendingOperations_AndDisposeDoesNotHang(ShutdownMode mode)
    {
        WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            ValueTask<int> receive = server.ReceiveAsync(new byte[8]);
            // An async item awaiting a silent peer would hold the drain forever: shutdown fails its receive instead.
            using var receiving = new ManualResetEventSlim();
            Task<int> item = pool.Run(async () =>
            {
                ValueTask<int> pending = client.ReceiveAsync(new byte[8]);
                receiving.Set();
                return await pending;
            });
            // The item has started (CancelPending would cancel it while queued) and waits in its receive. With
            // CancelPending too, the failed operations' completions, queued by the shutdown itself, resume awaiters:
            // they run rather than being cancelled with the pending user work.
            Waits.For(receiving, "the item's receive");
            Assert.True(pool.ShutdownAsync(mode).Wait(Waits.MustHappen), "the pool did not stop");
            await Assert.ThrowsAsync<ObjectDisposedException>(() => receive.AsTask().WaitAsync(Waits.MustHappen));
            await Assert.ThrowsAsync<ObjectDisposedException>(() => item.WaitAsync(Waits.MustHappen));
            Assert.Throws<ObjectDisposedException>(() => { _ = client.SendAsync(new byte[1]); });
            Assert.Throws<ObjectDisposedException>(() => new PoolSocket(pool));
        }
        pool.Dispose();
    }

    [Fact]
    public async Task ASecondReceiveWhileOneIsPending_IsRefused_ButASendMayOverlapIt()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            ValueTask<int> receive = server.ReceiveAsync(new byte[8]);
            Assert.Throws<InvalidOperationException>(() => { _ = server.ReceiveAsync(new byte[8]); });
            Assert.Throws<InvalidOperationException>(() => { _ = server.AcceptAsync(); });
            await server.SendAsync(new byte[] { 9 }).AsTask().WaitAsync(Waits.MustHappen);
            var buffer = new byte[1];
            await SocketPairs.ReceiveExactlyAsync(client, buffer);
            await client.SendAsync(new byte[] { 7 });
            Assert.Equal(1, await receive.AsTask().WaitAsync(Waits.MustHappen));
        }
    }

    [Fact]
    public async Task TheStream_CarriesLinesBothWays()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        await using Stream clientStream = client.GetStream();
        await using Stream serverStream = server.GetStream();
        using var writer = new StreamWriter(clientStream, new UTF8Encoding(false)) { AutoFlush = true };
        using var reader = new StreamReader(serverStream, Encoding.UTF8);
        Assert.False(clientStream.CanSeek);
        Assert.Throws<NotSupportedException>(() => clientStream.Length);
        for (int i = 0; i < 100; i++)
        {
            await writer.WriteLineAsync($"line {i}");
            Assert.Equal($"line {i}", await reader.ReadLineAsync().WaitAsync(Waits.MustHappen));
        }
        serverStream.Write(new byte[] { 1, 2, 3 }); // the synchronous forms wait for the pool
        var buffer = new byte[3];
        Assert.Equal(3, clientStream.Read(buffer));
        Assert.Equal(new byte[] { 1, 2, 3 }, buffer);
    }

    [Fact]
    public async Task AnSslStreamOverThePoolsStreams_HandshakesAndCarriesDataBothWays()
    {
        using WorkerPool pool = NewPool();
        using X509Certificate2 certificate = TestCertificate.Create();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        await using var clientTls = new SslStream(client.GetStream(), leaveInnerStreamOpen: false,
            (_, presented, _, _) => presented is not null && presented.GetCertHashString() == certificate.GetCertHashString());
        await using var serverTls = new SslStream(server.GetStream(), leaveInnerStreamOpen: false);

        // Both ends run on the pool: the handshake's reads and writes are the pool's socket operations.
        Task serverSide = pool.Run(() => serverTls.AuthenticateAsServerAsync(new SslServerAuthenticationOptions { ServerCertificate = certificate }));
        Task clientSide = pool.Run(() => clientTls.AuthenticateAsClientAsync(new SslClientAuthenticationOptions { TargetHost = "localhost" }));
        await Task.WhenAll(serverSide, clientSide).WaitAsync(Waits.MustHappen);
        Assert.True(clientTls.IsAuthenticated && clientTls.IsEncrypted);
        Assert.True(serverTls.IsAuthenticated && serverTls.IsEncrypted);
        Assert.Equal(certificate.GetCertHashString(), serverTls.LocalCertificate!.GetCertHashString());

        byte[] request = RandomBytes(64 * 1024, seed: 1);
        byte[] response = RandomBytes(48 * 1024, seed: 2);
        Task<byte[]> served = pool.Run(async () =>
        {
            byte[] received = await ReadExactlyAsync(serverTls, request.Length);
            await serverTls.WriteAsync(response);
            return received;
        });
        Task<(byte[] Received, WorkerPool? ContinuedOn)> asked = pool.Run(async () =>
        {
            await clientTls.WriteAsync(request);
            byte[] received = await ReadExactlyAsync(clientTls, response.Length);
            return (received, WorkerPool.Current);
        });
        Assert.Equal(request, await served.WaitAsync(Waits.MustHappen));
        (byte[] answer, WorkerPool? continuedOn) = await asked.WaitAsync(Waits.MustHappen);
        Assert.Equal(response, answer);
        Assert.Same(pool, continuedOn);

        await clientTls.ShutdownAsync().WaitAsync(Waits.MustHappen); // close_notify: the server reads the end
        Assert.Equal(0, await pool.Run(async () => await serverTls.ReadAsync(new byte[1])).WaitAsync(Waits.MustHappen));
    }

    private static byte[] RandomBytes(int length, int seed)
    {
        var bytes = new byte[length];
        new Random(seed).NextBytes(bytes);
        return bytes;
    }

    private static async Task<byte[]> ReadExactlyAsync(Stream stream, int length)
    {
        var buffer = new byte[length];
        await stream.ReadExactlyAsync(buffer);
        return buffer;
    }

    [Fact]
    public async Task FiftyConnectionsEchoingAtOnce_EveryMessageComesBack()
    {
        using WorkerPool pool = NewPool();
        using PoolSocket listener = SocketPairs.Listen(pool);
        EndPoint endPoint = listener.Socket.LocalEndPoint!;
        const int connections = 50;
        const int rounds = 200;
        Task server = Task.Run(async () =>
        {
            var echoes = new Task[connections];
            for (int i = 0; i < connections; i++)
            {
                PoolSocket accepted = await listener.AcceptAsync();
                echoes[i] = pool.Run(async () =>
                {
                    using (accepted)
                    {
                        var buffer = new byte[64];
                        int received;
                        while ((received = await accepted.ReceiveAsync(buffer)) > 0)
                        {
                            await accepted.SendAsync(buffer.AsMemory(0, received));
                        }
                    }
                });
            }
            await Task.WhenAll(echoes);
        });
        var clients = new Task[connections];
        for (int c = 0; c < connections; c++)
        {
            int id = c;
            clients[c] = pool.Run(async () =>
            {
                using var client = new PoolSocket(pool);
                await client.ConnectAsync(endPoint);
                var message = new byte[8];
                var echo = new byte[8];
                for (int r = 0; r < rounds; r++)
                {
                    BitConverter.TryWriteBytes(message, id * 1_000_000L + r);
                    await client.SendAsync(message);
                    int total = 0;
                    while (total < echo.Length)
                    {
                        int received = await client.ReceiveAsync(echo.AsMemory(total));
                        Assert.True(received > 0);
                        total += received;
                    }
                    Assert.Equal(message, echo);
                }
                client.Socket.Shutdown(SocketShutdown.Send);
            });
        }
        await Task.WhenAll(clients).WaitAsync(Waits.MustHappen);
        await server.WaitAsync(Waits.MustHappen);
    }

    [Fact]
    public void BadInput_IsRejectedAtTheCall()
    {
        using WorkerPool pool = NewPool();
        Assert.Throws<ArgumentNullException>(() => new PoolSocket(null!));
        Assert.Throws<ArgumentNullException>(() => new PoolSocket(pool, (Socket)null!));
        Assert.Throws<ArgumentOutOfRangeException>(() => new PoolSocket(pool, AddressFamily.Unix));
        using (var udp = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp))
        {
            Assert.Throws<ArgumentException>(() => new PoolSocket(pool, udp));
        }
        var closed = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        closed.Dispose();
        Assert.Throws<ObjectDisposedException>(() => new PoolSocket(pool, closed));
        using var socket = new PoolSocket(pool);
        Assert.Throws<ArgumentNullException>(() => { _ = socket.ConnectAsync(null!); });
        Assert.Throws<ArgumentException>(() => { _ = socket.ConnectAsync(new UnixDomainSocketEndPoint("/tmp/x")); });
        Assert.Throws<ArgumentException>(() => { _ = socket.ConnectAsync("", 80); });
        Assert.Throws<ArgumentOutOfRangeException>(() => { _ = socket.ConnectAsync("localhost", 70_000); });
    }
}

/// <summary>The socket tests on the pool's own driver (on platforms without it, on the runtime's engine like the other run).</summary>
public sealed class PoolSocketDriverTests : PoolSocketTests
{
    protected override bool RuntimeEngine => false;

    [Fact]
    public async Task ThePollerThread_IsNamedWithThePoolsThreadNamePrefix()
    {
        if (!Spindle.Polling.EpollDriver.IsSupported)
        {
            return; // no driver on this platform: no poller thread
        }
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = "A pool name the poller must not take",
            ThreadNamePrefix = "PollName",
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            // What top -H, ps -L and perf show: the kernel's copy of the name.
            string[] names = Directory.GetDirectories("/proc/self/task")
                .Select(static task =>
                {
                    try
                    {
                        return File.ReadAllText(Path.Combine(task, "comm")).TrimEnd('\n');
                    }
                    catch (IOException)
                    {
                        return ""; // the thread exited meanwhile
                    }
                })
                .ToArray();
            Assert.Contains("PollName io", names);
            Assert.DoesNotContain(names, static name => name.StartsWith("A pool name", StringComparison.Ordinal));
        }
    }

    [Fact]
    public async Task DisposingAPoolSocketWhoseSocketWasClosedDirectly_LeavesTheRegistrationOfItsReusedDescriptorAlone()
    {
        if (!Spindle.Polling.EpollDriver.IsSupported)
        {
            return; // no driver on this platform: nothing is registered by descriptor number
        }
        using WorkerPool pool = NewPool();
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        // Closing the Socket behind its PoolSocket's back frees its descriptor number; the next socket the process
        // creates usually gets that number (the lowest free one). Tests running beside this one may take it first, so
        // the setup is tried until it happens.
        for (int attempt = 0; ; attempt++)
        {
            var stray = new PoolSocket(pool);
            nint number = stray.Socket.SafeHandle.DangerousGetHandle();
            stray.Socket.Dispose();
            var client = new PoolSocket(pool);
            if (client.Socket.SafeHandle.DangerousGetHandle() != number)
            {
                stray.Dispose();
                client.Dispose();
                Assert.True(attempt < 100, "a new socket got the freed descriptor number");
                continue;
            }
            using (client)
            {
                ValueTask<PoolSocket> accept = listener.AcceptAsync();
                await client.ConnectAsync(listener.Socket.LocalEndPoint!).AsTask().WaitAsync(Waits.MustHappen);
                using PoolSocket server = await accept.AsTask().WaitAsync(Waits.MustHappen);

                stray.Dispose(); // must not remove the client's registration, which has the same number
                ValueTask<int> receive = client.ReceiveAsync(new byte[4]);
                await server.SendAsync(new byte[] { 1, 2, 3, 4 }).AsTask().WaitAsync(Waits.MustHappen);
                Assert.True(await receive.AsTask().WaitAsync(Waits.MustHappen) > 0);
            }
            return;
        }
    }

    [Fact]
    public async Task AContinuationRegisteredAfterTheOperationCompleted_RunsOnThePool()
    {
        // Only the driver promises this (on the runtime's engine the runtime's sources decide). The race every awaiter
        // can lose: it finds the operation pending, the pool completes it, then the awaiter registers. The runtime's
        // own sources queue such a continuation to the built-in pool; this one must not.
        if (!Spindle.Polling.EpollDriver.IsSupported)
        {
            return; // no driver on this platform: the runtime's engine completes these operations
        }
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            var buffer = new byte[1];
            for (int round = 0; round < 20; round++)
            {
                ValueTask<int> receive = server.ReceiveAsync(buffer);
                Assert.False(receive.IsCompleted);
                await client.SendAsync(new byte[] { 5 }).AsTask().WaitAsync(Waits.MustHappen);
                Waits.Until(() => receive.IsCompleted, "the receive to complete");
                using var ran = new ManualResetEventSlim();
                WorkerPool? on = null;
                bool builtIn = true;
                int received = 0;
#pragma warning disable xUnit1030 // the test is about a continuation that asked for no context
                ConfiguredValueTaskAwaitable<int>.ConfiguredValueTaskAwaiter awaiter = receive.ConfigureAwait(false).GetAwaiter();
#pragma warning restore xUnit1030
                awaiter.UnsafeOnCompleted(() =>
                {
                    on = WorkerPool.Current;
                    builtIn = Thread.CurrentThread.IsThreadPoolThread;
                    received = awaiter.GetResult();
                    ran.Set();
                });
                Waits.For(ran, "the continuation");
                Assert.Same(pool, on);
                Assert.False(builtIn);
                Assert.Equal(1, received);
            }
        }
    }
}

/// <summary>The socket tests on the runtime's socket engine, resuming on the pool.</summary>
public sealed class PoolSocketRuntimeEngineTests : PoolSocketTests
{
    protected override bool RuntimeEngine => true;
}
