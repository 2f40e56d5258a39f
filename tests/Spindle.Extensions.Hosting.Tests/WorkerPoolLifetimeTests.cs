using System;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>The pools follow the host: they drain when the host stops, and cancel what is pending once its shutdown timeout fires.</summary>
public sealed class WorkerPoolLifetimeTests
{
    [Fact]
    public async Task StopAsync_PastTheShutdownTimeout_CancelsPendingItems_AndLogsTheCounts()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = TimeSpan.FromSeconds(1));
        builder.Services.AddWorkerPool("slow", o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        });
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("slow");

        using var gate = new ManualResetEventSlim();
        using var blockerStarted = new ManualResetEventSlim();
        int ran = 0;
        try
        {
            // One item holds the pool's only thread far longer than the timeout; thirty more wait behind it.
            pool.QueueUserWorkItem(_ =>
            {
                blockerStarted.Set();
                gate.Wait();
                Interlocked.Increment(ref ran);
            }, null);
            Assert.True(blockerStarted.Wait(TestHosts.Generous));
            for (int i = 0; i < 30; i++)
            {
                pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), null);
            }

            // The gate stays closed until the end, so a stop that returns at all gave up at its timeout instead of
            // waiting for the blocked item: nothing has run yet, not even the blocker.
            await host.StopAsync().WaitAsync(TestHosts.Generous);
            Assert.Equal(30, pool.CancelledWorkItemCount);
            Assert.Equal(0, Volatile.Read(ref ran));

            LogEntry entry = Assert.Single(logs.WithEvent("PoolShutdownTimedOut"));
            Assert.Equal(LogLevel.Warning, entry.Level);
            Assert.Equal("slow", entry.Values["PoolName"]);
            Assert.Equal(30L, entry.Values["CancelledCount"]);
            Assert.Equal(1, entry.Values["RunningThreadCount"]);
            Assert.Equal(0L, entry.Values["PendingCount"]);
            Assert.Contains("30 work items that had not started were cancelled", entry.Message, StringComparison.Ordinal);
            Assert.Empty(logs.WithEvent("PoolStopped"));
        }
        finally
        {
            gate.Set();
        }

        // The blocked item finishes on its own once released; none of the cancelled ones ever runs.
        await pool.DisposeAsync().AsTask().WaitAsync(TestHosts.Generous);
        Assert.Equal(1, Volatile.Read(ref ran));
    }

    [Fact]
    public async Task StopAsync_WithinTheShutdownTimeout_DrainsEveryAcceptedItem()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = TestHosts.Generous);
        builder.Services.AddWorkerPool("steady", o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        });
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("steady");

        using var gate = new ManualResetEventSlim();
        using var blockerStarted = new ManualResetEventSlim();
        int ran = 0;
        pool.QueueUserWorkItem(_ =>
        {
            blockerStarted.Set();
            gate.Wait();
            Interlocked.Increment(ref ran);
        }, null);
        Assert.True(blockerStarted.Wait(TestHosts.Generous));
        for (int i = 0; i < 30; i++)
        {
            pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), null);
        }

        // The stop begins with every item still waiting, and must run all of them.
        Task stop = host.StopAsync();
        gate.Set();
        await stop.WaitAsync(TestHosts.Generous);

        Assert.Equal(31, Volatile.Read(ref ran));
        Assert.Equal(0, pool.CancelledWorkItemCount);
        Assert.True(pool.IsShutdownStarted);
        Assert.Throws<ObjectDisposedException>(() => pool.QueueUserWorkItem(_ => { }, null));
        LogEntry entry = Assert.Single(logs.WithEvent("PoolStopped"));
        Assert.Equal(LogLevel.Information, entry.Level);
        Assert.Equal("steady", entry.Values["PoolName"]);
        Assert.Equal(0L, entry.Values["CancelledCount"]);
        Assert.Equal(31L, entry.Values["CompletedCount"]);
        Assert.Empty(logs.WithEvent("PoolShutdownTimedOut"));
    }

    /// <summary>A hosted service registered before the pools, so the host stops it after theirs would have stopped.</summary>
    private sealed class UsesPoolWhileStopping(IServiceProvider services) : IHostedService
    {
        public int ResultFromStop { get; private set; }

        public Task StartAsync(CancellationToken cancellationToken) => Task.CompletedTask;

        public async Task StopAsync(CancellationToken cancellationToken)
        {
            WorkerPool pool = services.GetRequiredKeyedService<WorkerPool>("shared");
            ResultFromStop = await pool.Run(() => 42, cancellationToken);
        }
    }

    [Fact]
    public async Task HostedServices_CanStillUseThePools_WhileTheyStop()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddSingleton<UsesPoolWhileStopping>();
        builder.Services.AddHostedService(sp => sp.GetRequiredService<UsesPoolWhileStopping>());
        builder.Services.AddWorkerPool("shared");
        using IHost host = builder.Build();
        await host.StartAsync();

        await host.StopAsync().WaitAsync(TestHosts.Generous);

        Assert.Equal(42, host.Services.GetRequiredService<UsesPoolWhileStopping>().ResultFromStop);
        Assert.True(host.Services.GetRequiredKeyedService<WorkerPool>("shared").IsShutdownStarted);
    }

    [Fact]
    public async Task StartAsync_CreatesEveryRegisteredPool_AndStopAsyncStopsThemAll()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.AddWorkerPool("a").AddWorkerPool("b");
        using IHost host = builder.Build();

        await host.StartAsync();
        Assert.Equal(2, logs.WithEvent("PoolStarted").Count);

        await host.StopAsync().WaitAsync(TestHosts.Generous);
        Assert.Equal(2, logs.WithEvent("PoolStopped").Count);
        Assert.True(host.Services.GetRequiredKeyedService<WorkerPool>("a").IsShutdownStarted);
        Assert.True(host.Services.GetRequiredKeyedService<WorkerPool>("b").IsShutdownStarted);
    }
}
