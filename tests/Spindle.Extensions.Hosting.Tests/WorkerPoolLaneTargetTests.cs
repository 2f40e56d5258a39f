using System;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>
/// Which lanes a pool's background service may run on, and when a wrong one is reported: a lane of another pool at the
/// registration call when that lane is registered already, else when the host starts, before any service runs; and a
/// lane created after its pool has stopped, which reports the stop.
/// </summary>
public sealed class WorkerPoolLaneTargetTests
{
    private sealed class OnALane : WorkerPoolBackgroundService
    {
        public TaskCompletionSource<WorkerPoolLane?> Seen { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        protected override Task ExecuteOnTargetAsync(CancellationToken stoppingToken)
        {
            Seen.TrySetResult(WorkerPoolLane.Current);
            return Task.CompletedTask;
        }
    }

    [Fact]
    public void ABackgroundServiceOnALaneOfAnotherPool_IsRefusedAtTheCall_NamingBothPools()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("owner").AddLane("owned");
        IWorkerPoolBuilder other = services.AddWorkerPool("other");

        var failure = Assert.Throws<ArgumentException>("laneName", () => other.AddBackgroundService<OnALane>("owned"));

        Assert.Contains("'owned'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'owner'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'other'", failure.Message, StringComparison.Ordinal);
        Assert.DoesNotContain(services, d => d.ServiceType == typeof(OnALane));
    }

    [Fact]
    public async Task ABackgroundServiceOnALaneNoPoolHas_FailsTheHostStart_NamingTheServiceTheLaneAndThePool()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("pool").AddLane("real").AddBackgroundService<OnALane>("missing");
        using IHost host = builder.Build();

        var failure = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync()).WaitAsync(TestHosts.Generous);

        Assert.Contains(nameof(OnALane), failure.Message, StringComparison.Ordinal);
        Assert.Contains("'missing'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'pool'", failure.Message, StringComparison.Ordinal);
        Assert.False(host.Services.GetRequiredService<OnALane>().Seen.Task.IsCompleted, "the service ran");
    }

    [Fact]
    public async Task ABackgroundServiceOnALaneRegisteredLaterForAnotherPool_FailsTheHostStart_NamingBothPools()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("first").AddBackgroundService<OnALane>("later");
        builder.Services.AddWorkerPool("second").AddLane("later");
        using IHost host = builder.Build();

        var failure = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync()).WaitAsync(TestHosts.Generous);

        Assert.Contains("'later'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'first'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'second'", failure.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task ABackgroundServiceOnALaneOfItsPoolRegisteredAfterIt_RunsOnThatLane()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("pool").AddBackgroundService<OnALane>("afterwards").AddLane("afterwards");
        using IHost host = builder.Build();
        await host.StartAsync().WaitAsync(TestHosts.Generous);

        WorkerPoolLane? seen = await host.Services.GetRequiredService<OnALane>().Seen.Task.WaitAsync(TestHosts.Generous);

        Assert.Same(host.Services.GetRequiredKeyedService<WorkerPoolLane>("afterwards"), seen);
        await host.StopAsync().WaitAsync(TestHosts.Generous);
    }

    [Fact]
    public void ALaneCreatedAfterItsPoolStopped_ReportsThePoolsStop_NotItsOptions()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("stopped").AddLane("late");
        using ServiceProvider provider = services.BuildServiceProvider();
        WorkerPool pool = provider.GetRequiredKeyedService<WorkerPool>("stopped");
        pool.Shutdown(ShutdownMode.Drain);

        var failure = Assert.Throws<ObjectDisposedException>(() => provider.GetRequiredKeyedService<WorkerPoolLane>("late"));

        Assert.Contains("'stopped'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'late'", failure.Message, StringComparison.Ordinal);
        Assert.DoesNotContain("options", failure.Message, StringComparison.Ordinal);
    }
}
