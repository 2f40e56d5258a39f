using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Net;
using System.Net.Http;
using System.Security.Cryptography;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Spindle.AspNetCore.Transport;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>Requests through Kestrel on the Spindle transport: answers, keep-alive, features, bodies larger than the buffers.</summary>
public sealed class TransportRequestTests
{
    [Fact]
    public async Task Request_OnTheTransport_IsAnsweredOnThePoolsWorkers()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static () => WorkerPool.Current?.Name ?? "not on a pool"));
        using HttpClient client = server.CreateClient();

        string answer = await client.GetStringAsync("/");

        Assert.Equal(SpindleTransportOptions.DefaultPoolName, answer);
    }

    [Fact]
    public async Task Connection_OfKestrelsPipeline_IsTheTransportsWithItsFeatures()
    {
        var seen = new ConcurrentQueue<string>();
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static (HttpContext context) =>
                $"{context.Connection.Id}|{context.Connection.LocalIpAddress}|{context.Connection.LocalPort}|{context.Connection.RemoteIpAddress}|{context.Connection.RemotePort}"),
            listen: options => options.Listen(IPAddress.Loopback, 0, listen => listen.Use(next => async connection =>
            {
                connection.Items["checked"] = true;
                seen.Enqueue($"{connection.GetType().Name}|{connection.Items["checked"]}|{connection.ConnectionClosed.CanBeCanceled}");
                await next(connection);
            })));
        using HttpClient client = server.CreateClient();

        string[] parts = (await client.GetStringAsync("/")).Split('|');

        Assert.Equal([$"{nameof(SpindleConnection)}|True|True"], seen);
        Assert.Equal(13, parts[0].Length);
        Assert.Equal("127.0.0.1", parts[1]);
        Assert.Equal(server.Address.Port.ToString(System.Globalization.CultureInfo.InvariantCulture), parts[2]);
        Assert.Equal("127.0.0.1", parts[3]);
        Assert.NotEqual("0", parts[4]);
    }

    [Fact]
    public async Task KeepAlive_ManyRequestsOfOneClient_ShareOneConnection()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static (HttpContext context) => context.Connection.Id));
        using HttpClient first = server.CreateClient(connections: 1);
        using HttpClient second = server.CreateClient(connections: 1);

        var ids = new HashSet<string>();
        for (int i = 0; i < 50; i++)
        {
            ids.Add(await first.GetStringAsync("/"));
        }
        string other = await second.GetStringAsync("/");

        Assert.Single(ids);
        Assert.DoesNotContain(other, ids);
    }

    [Fact]
    public async Task ConcurrentRequests_OfManyConnections_AreEachAnsweredOnce()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/{n:int}", static (int n) => n * 2));
        using HttpClient client = server.CreateClient(connections: 16);

        var requests = new Task<string>[400];
        for (int i = 0; i < requests.Length; i++)
        {
            requests[i] = client.GetStringAsync($"/{i}");
        }
        string[] answers = await Task.WhenAll(requests).WaitAsync(TestServer.Generous);

        for (int i = 0; i < answers.Length; i++)
        {
            Assert.Equal((i * 2).ToString(System.Globalization.CultureInfo.InvariantCulture), answers[i]);
        }
    }

    [Fact]
    public async Task LargeBody_ManyTimesTheBufferLimits_IsEchoedWhole()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(configure: static options =>
            {
                options.MaxReadBufferSize = 16 * 1024;
                options.MaxWriteBufferSize = 16 * 1024;
            }),
            static app => app.MapPost("/echo", static async (HttpContext context) =>
            {
                context.Response.ContentType = "application/octet-stream";
                await context.Request.Body.CopyToAsync(context.Response.Body);
            }));
        using HttpClient client = server.CreateClient();
        byte[] body = RandomNumberGenerator.GetBytes(4 * 1024 * 1024);

        using HttpResponseMessage response = await client.PostAsync("/echo", new ByteArrayContent(body));
        byte[] echoed = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(body.Length, echoed.Length);
        Assert.True(body.AsSpan().SequenceEqual(echoed), "the echo differs from the body");
    }

    [Fact]
    public async Task UseSpindle_WithANamedPool_RunsOnThatPool()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder =>
            {
                builder.WebHost.UseSpindle("web");
                builder.Services.AddWorkerPool("web", static options => options.MaxThreads = 4);
            },
            static app => app.MapGet("/", static () => WorkerPool.Current?.Name ?? "not on a pool"));
        using HttpClient client = server.CreateClient();

        Assert.Equal("web", await client.GetStringAsync("/"));
    }

    [Fact]
    public async Task UseSpindle_WithAPoolOfTheCaller_RunsOnItAndLeavesItRunning()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "mine" });
        TestServer server = await TestServer.StartAsync(
            builder => builder.WebHost.UseSpindle(pool),
            static app => app.MapGet("/", static () => WorkerPool.Current?.Name ?? "not on a pool"));
        using (HttpClient client = server.CreateClient())
        {
            Assert.Equal("mine", await client.GetStringAsync("/"));
        }

        await server.DisposeAsync();

        Assert.False(pool.IsShutdownStarted);
        Assert.Equal(42, await pool.Run(static () => 42));
    }
}
