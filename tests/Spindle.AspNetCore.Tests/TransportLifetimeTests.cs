using System;
using System.Net;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
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
