using System;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>
/// The hosting package at its edges: a lane's disposal after a stop that timed out, a background service type
/// registered on two targets, the health of a pool that has stopped.
/// </summary>
public sealed class WorkerPoolEdgeTests
{
    private sealed class Waiting : WorkerPoolBackgroundService
    {
        protected override async Task ExecuteOnTargetAsync(CancellationToken stoppingToken)
        {
            try
            {
                await Task.Delay(Timeout.Infinite, stoppingToken);
            }
            catch (OperationCanceledException)
            {
            }
        }
    }

    [Fact]
    public async Task DisposingTheHost_AfterAStopThatTimedOut_DoesNotWaitForAnItemStuckInALane()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = TimeSpan.FromMilliseconds(200));
        builder.Services.AddWorkerPool("stuck", o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        }).AddLane("stuck-lane");
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("stuck");
        WorkerPoolLane lane = host.Services.GetRequiredKeyedService<WorkerPoolLane>("stuck-lane");
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        lane.QueueUserWorkItem(_ =>
        {
            started.TrySetResult();
            gate.Task.Wait();
        }, null);
        try
        {
            await started.Task.WaitAsync(TestHosts.Generous);
            await host.StopAsync().WaitAsync(TestHosts.Generous); // gives up on the pool at its timeout

            // The container's disposal must not wait for the stuck item again, in the pool's queue or in a lane's.
            Task dispose = ((IAsyncDisposable)host).DisposeAsync().AsTask();
            Task first = await Task.WhenAny(dispose, Task.Delay(TestHosts.Generous));
            Assert.True(ReferenceEquals(first, dispose), "disposing the host waited for the item stuck in the lane");
            Assert.False(started.Task.IsFaulted);
            Assert.False(gate.Task.IsCompleted); // the item still runs: nothing waited for it
        }
        finally
        {
            gate.TrySetResult();
        }
        await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(TestHosts.Generous);
        Assert.True(lane.IsShutdownStarted);
    }

    [Fact]
    public void ABackgroundServiceType_RegisteredOnASecondTarget_IsRefusedAtTheCall()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("a").AddBackgroundService<Waiting>();
        InvalidOperationException refused = Assert.Throws<InvalidOperationException>(
            () => builder.Services.AddWorkerPool("b").AddBackgroundService<Waiting>());
        Assert.Contains("pool 'a'", refused.Message, StringComparison.Ordinal);
        Assert.Contains("pool 'b'", refused.Message, StringComparison.Ordinal);
        Assert.Throws<InvalidOperationException>(() => builder.Services.AddWorkerPool("c").AddLane("lane").AddBackgroundService<Waiting>("lane"));
    }

    [Fact]
    public async Task TheHealthCheckOfAPoolThatHasStopped_IsNotHealthy()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("gone").AddHealthCheck();
        using IHost host = builder.Build();
        await host.StartAsync();
        HealthCheckService health = host.Services.GetRequiredService<HealthCheckService>();
        Assert.Equal(HealthStatus.Healthy, (await health.CheckHealthAsync()).Status);

        await host.StopAsync().WaitAsync(TestHosts.Generous);
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("gone");
        Assert.Throws<ObjectDisposedException>(() => pool.QueueUserWorkItem(_ => { }, null));
        // It refuses every item now: a probe that read it healthy would keep sending work to it.
        HealthReportEntry entry = (await health.CheckHealthAsync()).Entries["worker-pool:gone"];
        Assert.Equal(HealthStatus.Unhealthy, entry.Status);
        Assert.Contains("takes no new work", entry.Description, StringComparison.Ordinal);
    }
}
