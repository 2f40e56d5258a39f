using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>Options from configuration and code, and invalid options failing the host's start with the pool's name.</summary>
public sealed class WorkerPoolConfigurationTests
{
    [Fact]
    public async Task PoolFromConfigurationSection_HasTheBoundOptions()
    {
        var configuration = new Dictionary<string, string?>
        {
            ["Spindle:Pools:ingest:Name"] = "ingest", // the registration name: allowed, and changes nothing
            ["Spindle:Pools:ingest:MinThreads"] = "1",
            ["Spindle:Pools:ingest:MaxThreads"] = "3",
            ["Spindle:Pools:ingest:IdleTimeout"] = "00:00:07",
            ["Spindle:Pools:ingest:FlowExecutionContext"] = "false",
            ["Spindle:Pools:ingest:ThreadNamePrefix"] = "ingest-worker",
            ["Spindle:Pools:ingest:StackSize"] = "262144",
            ["Spindle:Pools:ingest:UseBackgroundThreads"] = "true",
            ["Spindle:Pools:ingest:ExceptionPolicy"] = "Report",
            ["Spindle:Pools:ingest:StuckItemThreshold"] = "00:00:05",
        };
        HostApplicationBuilder builder = TestHosts.CreateBuilder(configuration: configuration);
        int hookCalls = 0;
        builder.Services.AddWorkerPool("ingest", builder.Configuration.GetSection("Spindle:Pools:ingest"),
            o => o.OnWorkerStarted = () => Interlocked.Increment(ref hookCalls));
        using IHost host = builder.Build();
        await host.StartAsync();

        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        Assert.Equal("ingest", pool.Name);
        Assert.Equal(1, pool.MinThreads);
        Assert.Equal(3, pool.MaxThreads);
        Assert.Equal(TimeSpan.FromSeconds(7), pool.IdleTimeout);
        Assert.False(pool.FlowsExecutionContext);
        Assert.Equal(UnhandledExceptionPolicy.Report, pool.ExceptionPolicy);
        Assert.Equal(TimeSpan.FromSeconds(5), pool.StuckItemThreshold);

        WorkerPoolOptions options = host.Services.GetRequiredService<IOptionsMonitor<WorkerPoolOptions>>().Get("ingest");
        Assert.Equal(262144, options.StackSize);
        Assert.True(options.UseBackgroundThreads);

        // The thread name prefix and the delegate given beside the section show on the pool's threads.
        string? threadName = await pool.Run(() => Thread.CurrentThread.Name).WaitAsync(TestHosts.Generous);
        Assert.StartsWith("ingest-worker", threadName, StringComparison.Ordinal);
        Assert.True(Volatile.Read(ref hookCalls) >= 1);

        await host.StopAsync();
    }

    [Fact]
    public async Task AddWorkerPools_RegistersOnePoolPerChildSection_NamedByItsKey()
    {
        var configuration = new Dictionary<string, string?>
        {
            ["Pools:ingest:MaxThreads"] = "4",
            ["Pools:render:MinThreads"] = "0",
            ["Pools:render:MaxThreads"] = "2",
            ["Pools:render:IdleTimeout"] = "00:01:00",
        };
        HostApplicationBuilder builder = TestHosts.CreateBuilder(configuration: configuration);
        builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools"));
        using IHost host = builder.Build();
        await host.StartAsync();

        IWorkerPoolProvider provider = host.Services.GetRequiredService<IWorkerPoolProvider>();
        Assert.Equal(["ingest", "render"], provider.Names);
        WorkerPool ingest = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        WorkerPool render = host.Services.GetRequiredKeyedService<WorkerPool>("render");
        Assert.Equal("ingest", ingest.Name);
        Assert.Equal(4, ingest.MaxThreads);
        Assert.Equal("render", render.Name);
        Assert.Equal(0, render.MinThreads);
        Assert.Equal(2, render.MaxThreads);
        Assert.Equal(TimeSpan.FromMinutes(1), render.IdleTimeout);

        await host.StopAsync();
    }

    [Fact]
    public void AddWorkerPools_ChildThatIsAPlainValue_ThrowsAtTheCall_NamingItsPath()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder(configuration: new Dictionary<string, string?> { ["Pools:ingest"] = "4" });

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(
            () => builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools")));
        Assert.Contains("Pools:ingest", error.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("IngestWorkers")]
    [InlineData("Ingest")] // names compare ordinally, as service keys do
    public async Task ConfiguredNameOtherThanTheRegistrationName_FailsTheHostStart_NamingBoth(string configuredName)
    {
        var configuration = new Dictionary<string, string?> { ["Pools:ingest:Name"] = configuredName };
        HostApplicationBuilder builder = TestHosts.CreateBuilder(configuration: configuration);
        builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools"));
        using IHost host = builder.Build();

        InvalidOperationException error = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync());
        Assert.Contains("Worker pool 'ingest'", error.Message, StringComparison.Ordinal);
        Assert.Contains($"'{configuredName}'", error.Message, StringComparison.Ordinal);
        Assert.IsType<OptionsValidationException>(error.InnerException);

        // The options themselves are invalid, whoever reads them.
        Assert.Throws<OptionsValidationException>(() => host.Services.GetRequiredService<IOptionsMonitor<WorkerPoolOptions>>().Get("ingest"));
    }

    [Fact]
    public void NameSetInCodeOtherThanTheRegistrationName_FailsThePoolsCreation_NamingBoth()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("cpu", o => o.Name = "compute");
        using ServiceProvider provider = services.BuildServiceProvider();

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(() => provider.GetRequiredKeyedService<WorkerPool>("cpu"));
        Assert.Contains("Worker pool 'cpu'", error.Message, StringComparison.Ordinal);
        Assert.Contains("'compute'", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void NameOfOptionsThatAreNotARegisteredPool_IsLeftAlone()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("cpu");
        services.Configure<WorkerPoolOptions>("template", o => o.Name = "something-else");
        using ServiceProvider provider = services.BuildServiceProvider();

        Assert.Equal("something-else", provider.GetRequiredService<IOptionsMonitor<WorkerPoolOptions>>().Get("template").Name);
    }

    [Fact]
    public async Task ConfigureCallsForThePoolsOptionsName_ApplyToThePool()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("ingest", o => o.MaxThreads = 2);
        builder.Services.Configure<WorkerPoolOptions>("ingest", o => o.MinThreads = 1);
        using IHost host = builder.Build();
        await host.StartAsync();

        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        Assert.Equal(1, pool.MinThreads);
        Assert.Equal(2, pool.MaxThreads);

        await host.StopAsync();
    }

    public static TheoryData<string, string, string> InvalidConfiguration => new()
    {
        // key, value, what the message must also say
        { "MinThreads", "8", "MinThreads" },          // above MaxThreads (2): the pool rejects it
        { "StackSize", "1024", "StackSize" },         // below 64 KiB: the pool rejects it
        { "StuckItemThreshold", "00:00:00", "StuckItemThreshold" }, // zero: the pool rejects it
        { "Name", "", "Name is ''" },                 // empty: not the registration name
        { "MaxThreads", "lots", "Pools:bad:MaxThreads" }, // not an integer: the binder rejects it
        { "ExceptionPolicy", "Ignore", "Pools:bad:ExceptionPolicy" }, // not a policy: the binder rejects it
        { "MaxThread", "4", "'MaxThread'" },          // not an option: the binder rejects it
    };

    [Theory]
    [MemberData(nameof(InvalidConfiguration))]
    public async Task InvalidOptionsFromConfiguration_FailTheHostStart_NamingThePool(string key, string value, string detail)
    {
        var configuration = new Dictionary<string, string?>
        {
            ["Pools:bad:MaxThreads"] = "2",
            ["Pools:good:MaxThreads"] = "2",
            [$"Pools:bad:{key}"] = value,
        };
        HostApplicationBuilder builder = TestHosts.CreateBuilder(configuration: configuration);
        builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools"));
        using IHost host = builder.Build();

        InvalidOperationException error = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync());
        Assert.Contains("Worker pool 'bad'", error.Message, StringComparison.Ordinal);
        Assert.Contains(detail, error.Message, StringComparison.OrdinalIgnoreCase);
        Assert.NotNull(error.InnerException);
    }

    [Fact]
    public async Task InvalidOptionsFromCode_FailTheHostStart_WithThePoolsValidationError()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("bad", o => o.IdleTimeout = TimeSpan.Zero);
        using IHost host = builder.Build();

        InvalidOperationException error = await Assert.ThrowsAsync<InvalidOperationException>(() => host.StartAsync());
        Assert.Contains("Worker pool 'bad'", error.Message, StringComparison.Ordinal);
        ArgumentOutOfRangeException inner = Assert.IsType<ArgumentOutOfRangeException>(error.InnerException);
        Assert.Equal(nameof(WorkerPoolOptions.IdleTimeout), inner.ParamName);

        // Resolving the pool outside the host's start reports the same error.
        InvalidOperationException resolved = Assert.Throws<InvalidOperationException>(
            () => host.Services.GetRequiredKeyedService<WorkerPool>("bad"));
        Assert.Contains("Worker pool 'bad'", resolved.Message, StringComparison.Ordinal);
    }
}
