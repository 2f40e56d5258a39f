using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Primitives;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>Registration: keyed resolution, the provider, and the argument and duplicate checks made at the call.</summary>
public sealed class WorkerPoolRegistrationTests
{
    private sealed class NeedsIngestPool([FromKeyedServices("ingest")] WorkerPool pool)
    {
        public WorkerPool Pool { get; } = pool;
    }

    [Fact]
    public async Task KeyedResolution_AndProvider_GiveTheSameSingletonPerName()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("ingest", o => o.MaxThreads = 2);
        builder.Services.AddWorkerPool("render");
        builder.Services.AddSingleton<NeedsIngestPool>();
        using IHost host = builder.Build();
        await host.StartAsync();

        WorkerPool ingest = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
        WorkerPool render = host.Services.GetRequiredKeyedService<WorkerPool>("render");
        IWorkerPoolProvider provider = host.Services.GetRequiredService<IWorkerPoolProvider>();

        Assert.NotSame(ingest, render);
        Assert.Equal("ingest", ingest.Name);
        Assert.Equal("render", render.Name);
        Assert.Equal(2, ingest.MaxThreads);
        Assert.Same(ingest, host.Services.GetRequiredKeyedService<WorkerPool>("ingest"));
        Assert.Same(ingest, host.Services.GetRequiredService<NeedsIngestPool>().Pool);
        Assert.Same(ingest, provider.GetPool("ingest"));
        Assert.Same(render, provider.GetPool("render"));
        Assert.True(provider.TryGetPool("render", out WorkerPool? found));
        Assert.Same(render, found);
        Assert.Equal(["ingest", "render"], provider.Names);
        Assert.Equal(2, provider.Pools.Count);
        Assert.Same(ingest, provider.Pools["ingest"]);
        Assert.Same(render, provider.Pools["render"]);

        await host.StopAsync();
    }

    [Fact]
    public async Task Provider_UnknownName_ThrowsKeyNotFound_NamingTheRegisteredPools()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool("ingest").AddWorkerPool("render");
        using IHost host = builder.Build();
        await host.StartAsync();
        IWorkerPoolProvider provider = host.Services.GetRequiredService<IWorkerPoolProvider>();

        KeyNotFoundException error = Assert.Throws<KeyNotFoundException>(() => provider.GetPool("Ingest"));
        Assert.Contains("'Ingest'", error.Message, StringComparison.Ordinal);
        Assert.Contains("ingest, render", error.Message, StringComparison.Ordinal);
        Assert.False(provider.TryGetPool("missing", out WorkerPool? none));
        Assert.Null(none);
        Assert.Throws<ArgumentNullException>(() => provider.GetPool(null!));
        Assert.Null(host.Services.GetKeyedService<WorkerPool>("missing"));

        await host.StopAsync();
    }

    [Fact]
    public void AddWorkerPool_SameNameTwice_ThrowsAtTheCall_NamingThePool()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("ingest");

        InvalidOperationException fromCode = Assert.Throws<InvalidOperationException>(() => services.AddWorkerPool("ingest", o => o.MinThreads = 1));
        Assert.Contains("'ingest'", fromCode.Message, StringComparison.Ordinal);

        IConfiguration configuration = new ConfigurationBuilder()
            .AddInMemoryCollection(new Dictionary<string, string?> { ["Pools:ingest:MinThreads"] = "1" })
            .Build();
        Assert.Throws<InvalidOperationException>(() => services.AddWorkerPool("ingest", configuration.GetSection("Pools:ingest")));
        Assert.Throws<InvalidOperationException>(() => services.AddWorkerPools(configuration.GetSection("Pools")));

        // Names are service keys: compared ordinally, so another casing is another pool.
        services.AddWorkerPool("Ingest");
    }

    [Fact]
    public void AddWorkerPool_NameOfAKeyedPoolRegisteredByHand_IsRejected()
    {
        var services = new ServiceCollection();
        services.AddKeyedSingleton("manual", (_, _) => new WorkerPool());

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(() => services.AddWorkerPool("manual"));
        Assert.Contains("'manual'", error.Message, StringComparison.Ordinal);
        Assert.Single(services); // nothing was added before the check failed
    }

    private static IConfiguration Configuration(params (string Key, string Value)[] values) =>
        new ConfigurationBuilder()
            .AddInMemoryCollection(values.Select(v => new KeyValuePair<string, string?>(v.Key, v.Value)))
            .Build();

    [Fact]
    public void AddWorkerPools_ALaterChildThatIsAPlainValue_ThrowsBeforeRegisteringAnyPool()
    {
        // Children come in key order: "a" and "b" are valid sections, "c" is not.
        IConfiguration configuration = Configuration(("Pools:a:MaxThreads", "2"), ("Pools:b:MaxThreads", "2"), ("Pools:c", "4"));
        var services = new ServiceCollection();

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(() => services.AddWorkerPools(configuration.GetSection("Pools")));
        Assert.Contains("Pools:c", error.Message, StringComparison.Ordinal);
        Assert.Empty(services);

        // Nothing is half-registered: the valid children can still be registered.
        services.AddWorkerPool("a").AddWorkerPool("b");
    }

    [Fact]
    public void AddWorkerPools_ALaterChildNamingARegisteredPool_ThrowsBeforeRegisteringAnyPool()
    {
        IConfiguration configuration = Configuration(("Pools:ingest:MaxThreads", "2"), ("Pools:render:MaxThreads", "2"));
        var services = new ServiceCollection();
        services.AddWorkerPool("render");
        ServiceDescriptor[] before = [.. services];

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(() => services.AddWorkerPools(configuration.GetSection("Pools")));
        Assert.Contains("'render'", error.Message, StringComparison.Ordinal);
        Assert.Equal(before, services);

        using ServiceProvider provider = services.BuildServiceProvider();
        Assert.Equal(["render"], provider.GetRequiredService<IWorkerPoolProvider>().Names);
        Assert.Null(provider.GetKeyedService<WorkerPool>("ingest"));
    }

    /// <summary>A configuration whose children are given sections, even two with the same key (no provider merges them).</summary>
    private sealed class FixedChildren(params IConfigurationSection[] children) : IConfiguration
    {
        public string? this[string key] { get => null; set => throw new NotSupportedException(); }

        public IEnumerable<IConfigurationSection> GetChildren() => children;

        public IChangeToken GetReloadToken() => new CancellationChangeToken(CancellationToken.None);

        public IConfigurationSection GetSection(string key) => throw new NotSupportedException();
    }

    [Fact]
    public void AddWorkerPools_TwoChildrenWithTheSameKey_ThrowBeforeRegisteringAnyPool()
    {
        IConfiguration source = Configuration(("One:ingest:MaxThreads", "2"), ("Two:ingest:MaxThreads", "3"));
        var services = new ServiceCollection();

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(() => services.AddWorkerPools(
            new FixedChildren(source.GetSection("One:ingest"), source.GetSection("Two:ingest"))));
        Assert.Contains("'ingest'", error.Message, StringComparison.Ordinal);
        Assert.Contains("Two:ingest", error.Message, StringComparison.Ordinal);
        Assert.Empty(services);
    }

    [Fact]
    public void AddWorkerPools_AChildWithABlankKey_ThrowsBeforeRegisteringAnyPool()
    {
        IConfiguration configuration = Configuration(("Pools:a:MaxThreads", "2"), ("Pools: :MaxThreads", "2"));
        var services = new ServiceCollection();

        InvalidOperationException error = Assert.Throws<InvalidOperationException>(() => services.AddWorkerPools(configuration.GetSection("Pools")));
        Assert.Contains("Pools: ", error.Message, StringComparison.Ordinal);
        Assert.Empty(services);
    }

    [Fact]
    public void AddWorkerPool_BadArguments_ThrowAtTheCall()
    {
        var services = new ServiceCollection();
        IConfiguration empty = new ConfigurationBuilder().Build();

        Assert.Throws<ArgumentNullException>(() => WorkerPoolServiceCollectionExtensions.AddWorkerPool(null!, "pool"));
        Assert.Throws<ArgumentNullException>(() => services.AddWorkerPool(null!));
        Assert.Throws<ArgumentException>(() => services.AddWorkerPool(""));
        Assert.Throws<ArgumentException>(() => services.AddWorkerPool("  "));
        Assert.Throws<ArgumentNullException>(() => services.AddWorkerPool("pool", (IConfiguration)null!));
        Assert.Throws<ArgumentNullException>(() => WorkerPoolServiceCollectionExtensions.AddWorkerPools(null!, empty));
        Assert.Throws<ArgumentNullException>(() => services.AddWorkerPools(null!));
        Assert.Empty(services);
    }

    [Fact]
    public void AddWorkerPool_RegistersOneHostedServiceAndOneProvider_HoweverManyPools()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("a").AddWorkerPool("b").AddWorkerPool("c");

        Assert.Single(services, d => d.ServiceType == typeof(IHostedService));
        Assert.Single(services, d => d.ServiceType == typeof(IWorkerPoolProvider));
        Assert.Equal(3, services.Count(d => d.ServiceType == typeof(WorkerPool) && d.IsKeyedService));
    }
}
