using System;
using System.Net;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.DependencyInjection;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>Endpoints and groups on a pool or lane: where they run, and the 503 of a full bounded lane.</summary>
public sealed class EndpointTargetTests
{
    [Fact]
    public async Task RunOnLane_ForAGroup_RunsItsEndpointsOnTheLaneAndTheOthersNot()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder =>
            {
                builder.WebHost.UseSpindle();
                builder.Services.AddWorkerPool("handlers").AddLane("admin", static lane => lane.Priority = LanePriority.High);
            },
            static app =>
            {
                RouteGroupBuilder admin = app.MapGroup("/admin").RunOnLane("admin");
                admin.MapGet("/where", static async Task<string> () =>
                {
                    string before = WorkerPoolLane.Current?.Name ?? "none";
                    await Task.Yield(); // resumes through the lane's synchronization context
                    return $"{before}|{WorkerPoolLane.Current?.Name ?? "none"}|{WorkerPool.Current?.Name}";
                });
                app.MapGet("/where", static () => $"{WorkerPoolLane.Current?.Name ?? "none"}|{WorkerPool.Current?.Name}");
            });
        using HttpClient client = server.CreateClient();

        Assert.Equal("admin|admin|handlers", await client.GetStringAsync("/admin/where"));
        Assert.Equal($"none|{SpindleTransportOptions.DefaultPoolName}", await client.GetStringAsync("/where"));
    }

    [Fact]
    public async Task RunOnWorkerPool_OnKestrelsDefaultTransport_RunsTheEndpointOnThePool()
    {
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.Services.AddWorkerPool("handlers"),
            static app => app.MapGet("/", static () => WorkerPool.Current?.Name ?? "none").RunOnWorkerPool("handlers"));
        using HttpClient client = server.CreateClient();

        Assert.Equal("handlers", await client.GetStringAsync("/"));
    }

    [Fact]
    public async Task RunOnLane_WhenTheBoundedLaneIsFull_Answers503WithRetryAfterAndServesTheQueuedOnes()
    {
        using var release = new ManualResetEventSlim();
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using TestServer server = await TestServer.StartAsync(
            static builder =>
            {
                builder.WebHost.UseSpindle();
                builder.Services.AddWorkerPool("handlers").AddLane("reports", static lane =>
                {
                    lane.MaxConcurrency = 1;
                    lane.QueueLimit = 1;
                });
            },
            app => app.MapGet("/report", () =>
            {
                started.TrySetResult();
                release.Wait(TestServer.Generous); // holds the lane's one slot
                return "report";
            }).RunOnLane("reports", retryAfterSeconds: 7));
        WorkerPoolLane lane = server.App.Services.GetRequiredKeyedService<WorkerPoolLane>("reports");
        using HttpClient client = server.CreateClient();

        Task<string> running = client.GetStringAsync("/report");
        await started.Task.WaitAsync(TestServer.Generous);
        Task<string> queued = client.GetStringAsync("/report");
        Assert.True(SpinWait.SpinUntil(() => lane.PendingWorkItemCount == 1, TestServer.Generous), "the second request waits in the lane");

        using HttpResponseMessage refused = await client.GetAsync("/report");

        Assert.Equal(HttpStatusCode.ServiceUnavailable, refused.StatusCode);
        Assert.Equal(TimeSpan.FromSeconds(7), refused.Headers.RetryAfter?.Delta);
        release.Set();
        Assert.Equal("report", await running.WaitAsync(TestServer.Generous));
        Assert.Equal("report", await queued.WaitAsync(TestServer.Generous));
    }

    [Fact]
    public async Task RunOn_AnEndpointThatThrows_Answers500AndTheServerGoesOn()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "own" });
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            app =>
            {
                app.MapGet("/throw", static string () => throw new InvalidOperationException("handler failed")).RunOn(pool);
                app.MapGet("/", static () => WorkerPool.Current?.Name ?? "none").RunOn(pool);
            });
        using HttpClient client = server.CreateClient();

        using HttpResponseMessage failed = await client.GetAsync("/throw");

        Assert.Equal(HttpStatusCode.InternalServerError, failed.StatusCode);
        Assert.Equal("own", await client.GetStringAsync("/"));
    }

    [Fact]
    public void Conventions_WithBadArguments_ThrowAtTheCall()
    {
        WebApplication app = WebApplication.CreateSlimBuilder().Build();
        IEndpointConventionBuilder endpoint = app.MapGet("/", static () => "x");

        Assert.Throws<ArgumentException>(() => endpoint.RunOnWorkerPool(" "));
        Assert.Throws<ArgumentNullException>(() => endpoint.RunOnLane(null!));
        Assert.Throws<ArgumentOutOfRangeException>(() => endpoint.RunOnLane("lane", retryAfterSeconds: -1));
        Assert.Throws<ArgumentNullException>(() => endpoint.RunOn(null!));
    }

    [Fact]
    public async Task RunOnLane_ARequestWhoseItemTheLanesCancellingShutdownDrops_IsAnswered503WithRetryAfter()
    {
        using var release = new ManualResetEventSlim();
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using TestServer server = await TestServer.StartAsync(
            static builder =>
            {
                builder.WebHost.UseSpindle();
                builder.Services.AddWorkerPool("handlers").AddLane("reports", static lane =>
                {
                    lane.MaxConcurrency = 1;
                    lane.QueueLimit = 10;
                });
            },
            app => app.MapGet("/report", () =>
            {
                started.TrySetResult();
                release.Wait(TestServer.Generous); // holds the lane's one slot
                return "report";
            }).RunOnLane("reports", retryAfterSeconds: 3));
        WorkerPoolLane lane = server.App.Services.GetRequiredKeyedService<WorkerPoolLane>("reports");
        using HttpClient client = server.CreateClient();

        Task<HttpResponseMessage> running = client.GetAsync("/report");
        await started.Task.WaitAsync(TestServer.Generous);
        Task<HttpResponseMessage> queued = client.GetAsync("/report");
        Assert.True(SpinWait.SpinUntil(() => lane.PendingWorkItemCount == 1, TestServer.Generous), "the second request waits in the lane");

        Task<int> shutdown = lane.ShutdownAsync(ShutdownMode.CancelPending);
        // Answered while the first request still holds the slot: the dropped one does not wait for it.
        using (HttpResponseMessage answer = await queued.WaitAsync(TestServer.Generous))
        {
            Assert.Equal(HttpStatusCode.ServiceUnavailable, answer.StatusCode);
            Assert.Equal("3", Assert.Single(answer.Headers.GetValues("Retry-After")));
        }
        release.Set();
        using (HttpResponseMessage first = await running.WaitAsync(TestServer.Generous))
        {
            Assert.Equal(HttpStatusCode.OK, first.StatusCode);
        }
        Assert.Equal(1, await shutdown.WaitAsync(TestServer.Generous));
    }
}
