using System;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>Aborts from either side, and the host's shutdown with requests in flight.</summary>
public sealed class TransportLifetimeTests
{
    [Fact]
    public async Task ClientAbort_DuringARequest_FiresRequestAborted()
    {
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            app => app.MapGet("/wait", async (HttpContext context) =>
            {
                started.SetResult();
                try
                {
                    await Task.Delay(Timeout.Infinite, context.RequestAborted);
                }
                catch (OperationCanceledException)
                {
                    aborted.SetResult();
                }
            }));
        using HttpClient client = server.CreateClient();
        using var cancel = new CancellationTokenSource();

        Task<HttpResponseMessage> request = client.GetAsync("/wait", cancel.Token);
        await started.Task.WaitAsync(TestServer.Generous);
        cancel.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => request);
        await aborted.Task.WaitAsync(TestServer.Generous);
    }

    [Fact]
    public async Task ServerAbort_OfOneConnection_FailsItsRequestAndLeavesTheServerServing()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app =>
            {
                app.MapGet("/abort", static (HttpContext context) => context.Abort());
                app.MapGet("/", static () => "still here");
            });
        using HttpClient client = server.CreateClient();

        await Assert.ThrowsAsync<HttpRequestException>(() => client.GetStringAsync("/abort"));

        Assert.Equal("still here", await client.GetStringAsync("/"));
    }

    [Theory]
    [InlineData(13)]
    [InlineData(4 * 1024 * 1024)]
    public async Task ConnectionClose_OnAOneWorkerPool_SendsTheWholeResponseBeforeTheSocketCloses(int bodyLength)
    {
        // One worker: the flush that queues the send loop to the worker's local queue and the connection's disposal that
        // follows it (the response asked for the close) run on the same worker, and no idle worker can take the send
        // loop in between; the disposal must let it send what the application wrote.
        byte[] body = new byte[bodyLength];
        Random.Shared.NextBytes(body);
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(static pool =>
            {
                pool.MinThreads = 1;
                pool.MaxThreads = 1;
            }),
            app => app.MapGet("/body", (HttpContext context) => context.Response.Body.WriteAsync(body).AsTask()));
        using var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        await client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, server.Address.Port)).WaitAsync(TestServer.Generous);
        await client.SendAsync("GET /body HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"u8.ToArray());

        byte[] received = await ReadToEndAsync(client).WaitAsync(TestServer.Generous);

        int headerEnd = received.AsSpan().IndexOf("\r\n\r\n"u8);
        Assert.True(headerEnd > 0, "the response has a header");
        string head = Encoding.ASCII.GetString(received, 0, headerEnd);
        Assert.StartsWith("HTTP/1.1 200", head, StringComparison.Ordinal);
        Assert.Contains("Connection: close", head, StringComparison.OrdinalIgnoreCase);
        byte[] content = Dechunk(received.AsSpan(headerEnd + 4));
        Assert.Equal(body.Length, content.Length);
        Assert.True(body.AsSpan().SequenceEqual(content), "the body arrived intact");
    }

    [Fact]
    public async Task Shutdown_WithAResponseThatAPeerNeverReads_EndsWhenTheShutdownTimeoutAbortsTheConnection()
    {
        // No write limit: the handler completes at once with the whole body still in the connection's output, so the
        // connection is being disposed, its send loop held by a peer that reads nothing, when the host stops.
        byte[] body = new byte[32 * 1024 * 1024];
        var handled = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        TestServer server = await TestServer.StartAsync(
            static builder =>
            {
                builder.WebHost.UseSpindle(configure: static transport => transport.MaxWriteBufferSize = null);
                builder.Services.Configure<HostOptions>(static host => host.ShutdownTimeout = TimeSpan.FromSeconds(1));
            },
            app => app.MapGet("/body", async (HttpContext context) =>
            {
                await context.Response.Body.WriteAsync(body);
                handled.SetResult();
            }));
        try
        {
            using var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { ReceiveBufferSize = 4096 };
            await client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, server.Address.Port)).WaitAsync(TestServer.Generous);
            await client.SendAsync("GET /body HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"u8.ToArray());
            await handled.Task.WaitAsync(TestServer.Generous);

            await server.App.StopAsync().WaitAsync(TestServer.Generous);

            // The abort closed the connection: reading it now ends, at the end of what was sent or with a reset.
            int received = 0;
            try
            {
                received = (await ReadToEndAsync(client).WaitAsync(TestServer.Generous)).Length;
            }
            catch (SocketException e) when (e.SocketErrorCode == SocketError.ConnectionReset)
            {
            }
            Assert.True(received < body.Length, "the aborted connection did not send the whole body");
        }
        finally
        {
            await server.DisposeAsync();
        }
    }

    private static async Task<byte[]> ReadToEndAsync(Socket socket)
    {
        using var all = new System.IO.MemoryStream();
        byte[] buffer = new byte[64 * 1024];
        int read;
        while ((read = await socket.ReceiveAsync(buffer)) > 0)
        {
            all.Write(buffer, 0, read);
        }
        return all.ToArray();
    }

    /// <summary>A chunked body without trailers, as Kestrel sends a response that has no Content-Length.</summary>
    private static byte[] Dechunk(ReadOnlySpan<byte> chunked)
    {
        using var content = new System.IO.MemoryStream();
        while (true)
        {
            int lineEnd = chunked.IndexOf("\r\n"u8);
            Assert.True(lineEnd > 0, "a chunk size line");
            int size = int.Parse(Encoding.ASCII.GetString(chunked[..lineEnd]), System.Globalization.NumberStyles.HexNumber, System.Globalization.CultureInfo.InvariantCulture);
            chunked = chunked[(lineEnd + 2)..];
            if (size == 0)
            {
                Assert.True(chunked.SequenceEqual("\r\n"u8), "the last chunk ends the body");
                return content.ToArray();
            }
            Assert.True(chunked.Length >= size + 2, "the chunk arrived whole");
            content.Write(chunked[..size]);
            chunked = chunked[(size + 2)..];
        }
    }

    [Fact]
    public async Task Shutdown_WithARequestInFlight_LetsItFinishThenStops()
    {
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            app => app.MapGet("/slow", async () =>
            {
                started.SetResult();
                await release.Task;
                return "finished";
            }));
        try
        {
            using HttpClient client = server.CreateClient();
            Task<HttpResponseMessage> request = client.GetAsync("/slow");
            await started.Task.WaitAsync(TestServer.Generous);

            Task stop = server.App.StopAsync();
            IHostApplicationLifetime lifetime = server.App.Lifetime;
            await Task.Delay(Timeout.Infinite, lifetime.ApplicationStopping).ContinueWith(static _ => { }, TaskScheduler.Default)
                .WaitAsync(TestServer.Generous);
            Assert.False(stop.IsCompleted, "the host waits for the request in flight");
            release.SetResult();

            using HttpResponseMessage response = await request.WaitAsync(TestServer.Generous);
            Assert.Equal(HttpStatusCode.OK, response.StatusCode);
            Assert.Equal("finished", await response.Content.ReadAsStringAsync());
            await stop.WaitAsync(TestServer.Generous);
        }
        finally
        {
            release.TrySetResult();
            await server.DisposeAsync();
        }
    }

    [Fact]
    public async Task Shutdown_WithAnIdleKeepAliveConnection_Stops()
    {
        TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static () => "hello"));
        using HttpClient client = server.CreateClient();
        Assert.Equal("hello", await client.GetStringAsync("/"));

        await server.DisposeAsync(); // within TestServer.Generous, or it throws

        await Assert.ThrowsAsync<HttpRequestException>(() => client.GetStringAsync("/"));
    }
}
