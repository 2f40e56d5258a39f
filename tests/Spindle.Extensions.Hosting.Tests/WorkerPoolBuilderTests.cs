using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>
/// What hangs off <c>AddWorkerPool</c>'s builder, in real hosts: lanes from appsettings.json and code, resolved by key;
/// thread limits that follow a configuration reload; stuck items logged; the health check; background services on a
/// pool or lane.
/// </summary>
public sealed class WorkerPoolBuilderTests : IDisposable
{
    private readonly string _directory = Directory.CreateTempSubdirectory("spindle-hosting-").FullName;

    public void Dispose() => Directory.Delete(_directory, recursive: true);

    /// <summary>Writes appsettings.json and returns a builder reading it (reloaded only when a test says so).</summary>
    private HostApplicationBuilder FromJson(string json, CapturingLoggerProvider? logs = null)
    {
        File.WriteAllText(Path.Combine(_directory, "appsettings.json"), json);
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Configuration.AddJsonFile(new Microsoft.Extensions.FileProviders.PhysicalFileProvider(_directory), "appsettings.json",
            optional: false, reloadOnChange: false);
        return builder;
    }

    [Fact]
    public async Task ALaneConfiguredInAppSettings_IsResolvableByKey_WithItsOptions()
    {
        HostApplicationBuilder builder = FromJson("""
            { "Spindle": { "Pools": { "ingest": { "MinThreads": 1, "MaxThreads": 2,
                "Lanes": { "interactive": { "Priority": "High", "MaxConcurrency": 1 }, "batch": { "Priority": "Low", "Share": 3 } } } } } }
            """);
        builder.Services.AddWorkerPools(builder.Configuration.GetSection("Spindle:Pools"));
        using IHost host = builder.Build();
        await host.StartAsync();

        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        WorkerPoolLane interactive = host.Services.GetRequiredKeyedService<WorkerPoolLane>("interactive");
        WorkerPoolLane batch = host.Services.GetRequiredKeyedService<WorkerPoolLane>("batch");
        Assert.Same(pool, interactive.Pool);
        Assert.Equal("interactive", interactive.Name);
        Assert.Equal(LanePriority.High, interactive.Priority);
        Assert.Equal(1, interactive.MaxConcurrency);
        Assert.Equal(LanePriority.Low, batch.Priority);
        Assert.Equal(3, batch.Share);
        // Created when the host started, so the pool lists them already.
        Assert.Equal(2, pool.Lanes.Count);
        Assert.Same(interactive, await interactive.Run(() => WorkerPoolLane.Current).WaitAsync(TestHosts.Generous));

        await host.StopAsync();
    }

    [Fact]
    public async Task LanesInCode_HangOffTheBuilder_AndTheBuilderStillChainsAsACollection()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        IServiceCollection chained = builder.Services
            .AddWorkerPool("a", o => o.MaxThreads = 2)
            .AddLane("a-lane", o => o.Priority = LanePriority.High)
            .AddWorkerPool("b"); // what callers of the IServiceCollection-returning version wrote
        Assert.IsAssignableFrom<IWorkerPoolBuilder>(chained);
        Assert.Equal("b", ((IWorkerPoolBuilder)chained).Name);
        Assert.Throws<InvalidOperationException>(() => builder.Services.AddWorkerPool("c").AddLane("a-lane"));
        using IHost host = builder.Build();
        await host.StartAsync();

        WorkerPoolLane lane = host.Services.GetRequiredKeyedService<WorkerPoolLane>("a-lane");
        Assert.Same(host.Services.GetRequiredKeyedService<WorkerPool>("a"), lane.Pool);
        Assert.Equal(LanePriority.High, lane.Priority);
        await host.StopAsync();
    }

    [Fact]
    public async Task InvalidLaneOptions_FailTheStart_NamingTheLane()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("p").AddLane("broken", o => o.Share = 0);
        using IHost host = builder.Build();

        var failure = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync());
        Assert.Contains("'broken'", failure.Message, StringComparison.Ordinal);
        Assert.Contains("'p'", failure.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task AReloadOfTheConfiguration_ChangesTheThreadLimits()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = FromJson("""{ "Pools": { "ingest": { "MinThreads": 1, "MaxThreads": 2 } } }""", logs);
        builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools"));
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        Assert.Equal((1, 2), (pool.MinThreads, pool.MaxThreads));

        File.WriteAllText(Path.Combine(_directory, "appsettings.json"), """{ "Pools": { "ingest": { "MinThreads": 2, "MaxThreads": 5 } } }""");
        ((IConfigurationRoot)builder.Configuration).Reload();

        Assert.Equal((2, 5), (pool.MinThreads, pool.MaxThreads));
        LogEntry reloaded = logs.WaitForEvent("ThreadLimitsReloaded", TestHosts.Generous);
        Assert.Equal("ingest", reloaded.Values["PoolName"]);

        // Limits the pool refuses are logged and change nothing.
        File.WriteAllText(Path.Combine(_directory, "appsettings.json"), """{ "Pools": { "ingest": { "MinThreads": 9, "MaxThreads": 5 } } }""");
        ((IConfigurationRoot)builder.Configuration).Reload();
        Assert.Equal((2, 5), (pool.MinThreads, pool.MaxThreads));
        Assert.IsType<ArgumentOutOfRangeException>(logs.WaitForEvent("ThreadLimitsReloadFailed", TestHosts.Generous).Exception);

        await host.StopAsync();
    }

    [Theory]
    [InlineData("\"MaxThreads\": \"many\"", typeof(InvalidOperationException))]
    [InlineData("\"MaxThreads\": 5, \"NoSuchOption\": 1", typeof(InvalidOperationException))]
    [InlineData("\"MaxThreads\": 5, \"Name\": \"elsewhere\"", typeof(OptionsValidationException))]
    public async Task AReloadWithOptionsThatDoNotBuild_IsLogged_AndThePoolAndTheMonitorKeepTheOptionsTheyHad(string reloaded, Type error)
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = FromJson("""{ "Pools": { "ingest": { "MinThreads": 1, "MaxThreads": 2 } } }""", logs);
        builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools"));
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        IOptionsMonitor<WorkerPoolOptions> monitor = host.Services.GetRequiredService<IOptionsMonitor<WorkerPoolOptions>>();

        File.WriteAllText(Path.Combine(_directory, "appsettings.json"), "{ \"Pools\": { \"ingest\": { \"MinThreads\": 1, " + reloaded + " } } }");
        ((IConfigurationRoot)builder.Configuration).Reload(); // throws nothing

        LogEntry failed = logs.WaitForEvent("OptionsReloadFailed", TestHosts.Generous);
        Assert.Equal(LogLevel.Error, failed.Level);
        Assert.Equal("ingest", failed.Values["PoolName"]);
        Assert.IsType(error, failed.Exception);
        Assert.Equal((1, 2), (pool.MinThreads, pool.MaxThreads));
        Assert.Equal(2, monitor.Get("ingest").MaxThreads);
        Assert.Empty(logs.WithEvent("ThreadLimitsReloaded"));

        // The next reload that builds is applied as usual.
        File.WriteAllText(Path.Combine(_directory, "appsettings.json"), """{ "Pools": { "ingest": { "MinThreads": 2, "MaxThreads": 5 } } }""");
        ((IConfigurationRoot)builder.Configuration).Reload();
        Assert.Equal((2, 5), (pool.MinThreads, pool.MaxThreads));
        Assert.Equal(5, monitor.Get("ingest").MaxThreads);

        await host.StopAsync();
    }

    [Fact]
    public async Task AStuckItem_IsLogged_AndTheHealthCheckReportsUnhealthyThenHealthy()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.AddWorkerPool("slow", o =>
            {
                o.MinThreads = 1;
                o.MaxThreads = 2;
                o.StuckItemThreshold = TimeSpan.FromMilliseconds(100);
            })
            // Long enough that the check right after the log still falls inside it, even on a loaded machine.
            .AddHealthCheck(h => h.StuckItemWindow = TimeSpan.FromSeconds(3), "spindle");
        using IHost host = builder.Build();
        await host.StartAsync();
        HealthCheckService health = host.Services.GetRequiredService<HealthCheckService>();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("slow");
        Assert.Equal(HealthStatus.Healthy, (await health.CheckHealthAsync()).Status);

        using var release = new ManualResetEventSlim();
        Task stuck = pool.Run(() => release.Wait(TestHosts.Generous));
        try
        {
            LogEntry logged = logs.WaitForEvent("WorkItemStuck", TestHosts.Generous);
            Assert.Equal(LogLevel.Warning, logged.Level);
            Assert.Equal("slow", logged.Values["PoolName"]);
            HealthReport report = await health.CheckHealthAsync();
            HealthReportEntry entry = report.Entries["worker-pool:slow"];
            Assert.Equal(HealthStatus.Unhealthy, entry.Status);
            Assert.Equal(1L, entry.Data["stuck_items"]);
            Assert.Contains("spindle", entry.Tags);
        }
        finally
        {
            release.Set();
        }
        await stuck.WaitAsync(TestHosts.Generous);

        // Once the window has passed without another stuck item.
        DateTime deadline = DateTime.UtcNow + TestHosts.Generous;
        HealthStatus status;
        while ((status = (await health.CheckHealthAsync()).Status) != HealthStatus.Healthy && DateTime.UtcNow < deadline)
        {
            await Task.Delay(50);
        }
        Assert.Equal(HealthStatus.Healthy, status);
        await host.StopAsync();
    }

    [Fact]
    public async Task ALongQueue_IsDegraded()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("busy", o => { o.MinThreads = 1; o.MaxThreads = 1; })
            .AddHealthCheck(h => h.QueueLengthThreshold = 5);
        using IHost host = builder.Build();
        await host.StartAsync();
        HealthCheckService health = host.Services.GetRequiredService<HealthCheckService>();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("busy");

        using var release = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => { started.Set(); release.Wait(TestHosts.Generous); });
        try
        {
            Assert.True(started.Wait(TestHosts.Generous));
            for (int i = 0; i < 10; i++)
            {
                pool.QueueUserWorkItem(_ => { });
            }
            HealthReport report = await health.CheckHealthAsync();
            Assert.Equal(HealthStatus.Degraded, report.Status);
            Assert.Equal(10L, report.Entries["worker-pool:busy"].Data["pending"]);
        }
        finally
        {
            release.Set();
        }
        DateTime deadline = DateTime.UtcNow + TestHosts.Generous;
        while (pool.PendingWorkItemCount > 0 && DateTime.UtcNow < deadline)
        {
            await Task.Delay(10);
        }
        Assert.Equal(HealthStatus.Healthy, (await health.CheckHealthAsync()).Status);
        await host.StopAsync();
    }

    private sealed class Unregistered : WorkerPoolBackgroundService
    {
        protected override Task ExecuteOnTargetAsync(CancellationToken stoppingToken) => Task.CompletedTask;
    }

    [Fact]
    public void ABackgroundServiceRegisteredWithoutAPool_SaysHowToRegisterIt()
    {
        using var service = new Unregistered();
        var failure = Assert.Throws<InvalidOperationException>(() => service.Target);
        Assert.Contains("AddBackgroundService<Unregistered>", failure.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void BadHealthCheckThresholds_AreRejectedAtTheCall()
    {
        IWorkerPoolBuilder pool = new ServiceCollection().AddWorkerPool("p");
        Assert.Throws<ArgumentOutOfRangeException>("configure", () => pool.AddHealthCheck(h => h.StuckItemWindow = TimeSpan.Zero));
        Assert.Throws<ArgumentOutOfRangeException>("configure", () => pool.AddHealthCheck(h => h.StarvationWindow = TimeSpan.FromSeconds(-1)));
        Assert.Throws<ArgumentOutOfRangeException>("configure", () => pool.AddHealthCheck(h => h.QueueLengthThreshold = 0));
        Assert.Throws<ArgumentException>("configure", () => pool.AddHealthCheck(h => h.Name = " "));
        Assert.Throws<ArgumentException>("laneName", () => pool.AddLane(" "));
    }

    /// <summary>Records where its ExecuteAsync ran, before and after an await.</summary>
    private sealed class WhereAmI : WorkerPoolBackgroundService
    {
        public TaskCompletionSource<(WorkerPool? Before, WorkerPoolLane? LaneBefore, WorkerPool? After, WorkerPoolLane? LaneAfter)> Seen { get; } =
            new(TaskCreationOptions.RunContinuationsAsynchronously);

        protected override async Task ExecuteOnTargetAsync(CancellationToken stoppingToken)
        {
            WorkerPool? before = WorkerPool.Current;
            WorkerPoolLane? laneBefore = WorkerPoolLane.Current;
            await Task.Delay(10, stoppingToken);
            Seen.TrySetResult((before, laneBefore, WorkerPool.Current, WorkerPoolLane.Current));
            await Task.Delay(Timeout.Infinite, stoppingToken).ContinueWith(static _ => { }, TaskScheduler.Default);
        }
    }

    private sealed class WhereAmIOnALane : WorkerPoolBackgroundService
    {
        public TaskCompletionSource<WorkerPoolLane?> Seen { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        protected override async Task ExecuteOnTargetAsync(CancellationToken stoppingToken)
        {
            await Task.Yield();
            Seen.TrySetResult(WorkerPoolLane.Current);
        }
    }

    [Fact]
    public async Task ABackgroundService_RunsOnThePool_AndOnALane()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("services", o => o.MaxThreads = 2)
            .AddLane("service-lane")
            .AddBackgroundService<WhereAmI>()
            .AddBackgroundService<WhereAmIOnALane>("service-lane");
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("services");

        var seen = await host.Services.GetRequiredService<WhereAmI>().Seen.Task.WaitAsync(TestHosts.Generous);
        Assert.Same(pool, seen.Before);
        Assert.Same(pool, seen.After);
        Assert.Null(seen.LaneBefore);
        WorkerPoolLane? lane = await host.Services.GetRequiredService<WhereAmIOnALane>().Seen.Task.WaitAsync(TestHosts.Generous);
        Assert.Same(host.Services.GetRequiredKeyedService<WorkerPoolLane>("service-lane"), lane);
        Assert.Same(pool, host.Services.GetRequiredService<WhereAmI>().Target);

        await host.StopAsync();
    }
}
