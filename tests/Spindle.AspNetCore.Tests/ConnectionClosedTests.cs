using System;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.Extensions.DependencyInjection;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>
/// A connection's <see cref="ConnectionContext.ConnectionClosed"/> token and its disposal: the disposal completes only
/// once the token's callbacks have run, as on Kestrel's sockets transport (Kestrel keeps a connection in its connection
/// manager, and the server's stop waits for it, until the disposal returns); a disposal from inside a callback does not
/// wait for that callback.
/// </summary>
public sealed class ConnectionClosedTests
{
    [Fact]
    public async Task TheDisposal_CompletesOnlyAfterTheConnectionClosedCallbacksHaveRun()
    {
        var entered = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var release = new ManualResetEventSlim();
        TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static () => "hello"),
            listen: options => options.Listen(IPAddress.Loopback, 0, listen => listen.Use(next => async connection =>
            {
                connection.ConnectionClosed.Register(() =>
                {
                    entered.TrySetResult();
                    release.Wait(TestServer.Generous);
                });
                await next(connection);
            })));
        try
        {
            using (var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
            {
                await client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, server.Address.Port)).WaitAsync(TestServer.Generous);
                await client.SendAsync("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"u8.ToArray());
                byte[] buffer = new byte[4096];
                Assert.True(await client.ReceiveAsync(buffer, SocketFlags.None).WaitAsync(TestServer.Generous) > 0, "no answer");
                // The peer's FIN ends the receive loop, which fires ConnectionClosed; Kestrel's request processing sees
                // the end of its input too, returns, and disposes the connection.
                client.Shutdown(SocketShutdown.Send);
                await entered.Task.WaitAsync(TestServer.Generous);
            }

            // The callback holds the firing: the connection's disposal must not complete, so Kestrel's stop, which
            // waits for every connection it has not yet seen disposed, must not either. (The host's stop would wait for
            // the callback anyway: it drains the transport's pool, on which the callback runs.)
            Task stop = server.App.Services.GetRequiredService<IServer>().StopAsync(CancellationToken.None);
            await Task.WhenAny(stop, Task.Delay(TimeSpan.FromMilliseconds(500)));
            Assert.False(stop.IsCompleted, "Kestrel stopped (the connection's disposal completed) while a ConnectionClosed callback still ran");

            release.Set();
            await stop.WaitAsync(TestServer.Generous);
        }
        finally
        {
            release.Set();
            await server.DisposeAsync();
        }
    }

    [Fact]
    public async Task ADisposalFromInsideAConnectionClosedCallback_CompletesWithoutWaitingForThatCallback()
    {
        // The middleware takes the connection over (no HTTP): the callback is the only code that touches the pipes when
        // it disposes the connection, and it blocks on the disposal, which must not wait for the callback itself.
        var registered = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var disposedInside = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static () => "hello"),
            listen: options => options.Listen(IPAddress.Loopback, 0, listen => listen.Use(_ => connection =>
            {
                connection.ConnectionClosed.Register(() =>
                    disposedInside.TrySetResult(connection.DisposeAsync().AsTask().Wait(TestServer.Generous)));
                registered.TrySetResult();
                return disposedInside.Task;
            })));
        using var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        await client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, server.Address.Port)).WaitAsync(TestServer.Generous);
        // After the registration: a token already cancelled would run the callback inside Register, not in the firing.
        await registered.Task.WaitAsync(TestServer.Generous);
        client.Shutdown(SocketShutdown.Send);

        Assert.True(await disposedInside.Task.WaitAsync(TestServer.Generous * 2), "the disposal inside the callback did not complete");
        // The disposal closed the connection: the client reads its end.
        Assert.Equal(0, await client.ReceiveAsync(new byte[16], SocketFlags.None).WaitAsync(TestServer.Generous));
    }

    [Fact]
    public async Task AConnectionClosedWhileItsPoolShutsDownCancellingItsQueue_StillFiresTheToken_AndIsDisposed()
    {
        // One worker, held by an item while the peer closes and the pool's shutdown cancels what waits in its queues:
        // the receive loop's end and the token's firing are continuations of the pool, which the shutdown runs rather
        // than drops, so the callbacks run and the disposal, which waits for them, completes.
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "closing", MinThreads = 1, MaxThreads = 1 });
        var registered = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var fired = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using TestServer server = await TestServer.StartAsync(
            builder => builder.WebHost.UseSpindle(pool),
            static app => app.MapGet("/", static () => "hello"),
            listen: options => options.Listen(IPAddress.Loopback, 0, listen => listen.Use(_ => connection =>
            {
                connection.ConnectionClosed.Register(() => fired.TrySetResult());
                registered.TrySetResult();
                return fired.Task;
            })));
        using var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        await client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, server.Address.Port)).WaitAsync(TestServer.Generous);
        await registered.Task.WaitAsync(TestServer.Generous);

        using var started = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            started.Set();
            release.Wait(TestServer.Generous);
        }, null);
        Assert.True(started.Wait(TestServer.Generous), "the holding item did not start");
        client.Shutdown(SocketShutdown.Send);
        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.CancelPending); // waits for the holding item
        release.Set();

        await fired.Task.WaitAsync(TestServer.Generous);
        await shutdown.WaitAsync(TestServer.Generous);
        // Kestrel's stop waits for every connection's disposal.
        await server.App.Services.GetRequiredService<IServer>().StopAsync(CancellationToken.None).WaitAsync(TestServer.Generous);
        Assert.Equal(0, await client.ReceiveAsync(new byte[16], SocketFlags.None).WaitAsync(TestServer.Generous));
    }
}
