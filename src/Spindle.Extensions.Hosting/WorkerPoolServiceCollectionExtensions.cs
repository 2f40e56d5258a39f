using System;
using System.Collections.Generic;
using System.Diagnostics.Metrics;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Options;
using Spindle;
using Spindle.Extensions.Hosting;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>Registers named Spindle <see cref="WorkerPool"/>s with a service collection and the host's lifetime.</summary>
/// <remarks>
/// <para>Each call registers one pool under its name:</para>
/// <list type="bullet">
/// <item>as a keyed singleton, resolved with <c>[FromKeyedServices("name")] WorkerPool</c> or
/// <c>GetRequiredKeyedService&lt;WorkerPool&gt;("name")</c>, and through <see cref="IWorkerPoolProvider"/>;</item>
/// <item>with named <see cref="WorkerPoolOptions"/> (the name is the options name), built from the defaults, then
/// <see cref="WorkerPoolOptions.Name"/> set to the pool's name, then the configuration section and the delegate, in
/// that order; further <c>services.Configure&lt;WorkerPoolOptions&gt;(name, ...)</c> calls apply too. The registration
/// name is the pool's name, everywhere: options that set <see cref="WorkerPoolOptions.Name"/> to anything else (compared
/// ordinally) are invalid, and fail the pool's creation with an <see cref="InvalidOperationException"/> that names
/// both;</item>
/// <item>with a hosted service that creates every registered pool before any hosted service starts (invalid options
/// fail the host's start with an <see cref="InvalidOperationException"/> naming the pool) and, once every hosted
/// service has stopped, shuts the pools down within the host's shutdown timeout: each pool drains until the timeout
/// fires, then cancels the items that have not started (running items finish on their own); the outcome and its
/// counts are logged.</item>
/// </list>
/// <para>Under <see cref="UnhandledExceptionPolicy.Report"/>, exceptions from a pool's items are logged as errors
/// with the pool's name (logger category <c>Spindle.Extensions.Hosting.WorkerPool</c>), and so, as warnings, are items
/// reported stuck (<see cref="WorkerPoolOptions.StuckItemThreshold"/>), whatever the policy.</para>
/// <para><c>AddWorkerPool</c> returns the pool's <see cref="IWorkerPoolBuilder"/>, on which lanes, a health check and
/// background services that run on the pool are registered (<see cref="WorkerPoolBuilderExtensions"/>).</para>
/// <para>The service provider owns the pools and disposes them with itself. Disposal drains, waiting for the items
/// still running, except in one case: a pool whose stop timed out at the host's shutdown. The host gave up waiting for
/// that pool's running items, so the disposal does not wait for them again; they finish on their own (on background
/// threads unless <see cref="WorkerPoolOptions.UseBackgroundThreads"/> is false, in which case they keep the process
/// alive), and the pool then stops. The disposal logs a warning for each such pool that still runs items, with the
/// count of its busy threads. <see cref="WorkerPool.ShutdownAsync(ShutdownMode, System.Threading.CancellationToken)"/>
/// still waits for such a pool to stop.</para>
/// </remarks>
public static class WorkerPoolServiceCollectionExtensions
{
    /// <summary>Registers a worker pool named <paramref name="name"/>, configured in code.</summary>
    /// <param name="services">The service collection.</param>
    /// <param name="name">The pool's name: its service key, its options name and its <see cref="WorkerPoolOptions.Name"/>.</param>
    /// <param name="configure">
    /// Sets the pool's options (applied after the defaults and the name), or <see langword="null"/>. Setting
    /// <see cref="WorkerPoolOptions.Name"/> to anything but <paramref name="name"/> fails the pool's creation.
    /// </param>
    /// <returns>The pool's builder (lanes, health check, background services), which is also <paramref name="services"/>' collection, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="services"/> or <paramref name="name"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="name"/> is empty or white space.</exception>
    /// <exception cref="InvalidOperationException">A pool (or another keyed <see cref="WorkerPool"/>) is already registered under <paramref name="name"/>.</exception>
    public static IWorkerPoolBuilder AddWorkerPool(this IServiceCollection services, string name, Action<WorkerPoolOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentException.ThrowIfNullOrWhiteSpace(name);
        return AddPool(services, name, configuration: null, configure);
    }

    /// <summary>
    /// Registers a worker pool named <paramref name="name"/> whose options are bound from a configuration section, for
    /// example <c>{ "MinThreads": 2, "MaxThreads": 8, "IdleTimeout": "00:00:30", "ExceptionPolicy": "Report" }</c>.
    /// </summary>
    /// <param name="services">The service collection.</param>
    /// <param name="name">The pool's name: its service key, its options name and its <see cref="WorkerPoolOptions.Name"/>.</param>
    /// <param name="configuration">
    /// The section holding the pool's options: <c>MinThreads</c>, <c>MaxThreads</c>, <c>IdleTimeout</c>,
    /// <c>FlowExecutionContext</c>, <c>ThreadNamePrefix</c>, <c>StackSize</c>, <c>UseBackgroundThreads</c>,
    /// <c>ExceptionPolicy</c>, <c>StuckItemThreshold</c>, and <c>Name</c>, which may only repeat
    /// <paramref name="name"/>; and <c>Lanes</c>, one child per lane of the pool, named by its key, holding the lane's
    /// <see cref="LaneOptions"/> (see <see cref="WorkerPoolBuilderExtensions.AddLane"/>). It is read when the pool is
    /// created; a key that is none of these, a value that does not convert, or another <c>Name</c> fails the pool's
    /// creation with an <see cref="InvalidOperationException"/> naming the pool. When the configuration reloads, new
    /// <c>MinThreads</c> and <c>MaxThreads</c> are applied to the running pool
    /// (<see cref="WorkerPool.SetThreadLimits(int, int)"/>, logged); the other options keep the values the pool was
    /// created with. A reload whose options do not build (a value that does not convert, an unknown key, another
    /// <c>Name</c>) is logged as an error (<c>OptionsReloadFailed</c>) and changes nothing: the pool, and the options
    /// <see cref="IOptionsMonitor{TOptions}"/> gives, keep what they had; it throws nothing to the code that reloaded
    /// the configuration.
    /// </param>
    /// <param name="configure">
    /// Sets what configuration cannot (the worker hooks, for instance), applied after the section; or <see langword="null"/>.
    /// Setting <see cref="WorkerPoolOptions.Name"/> to anything but <paramref name="name"/> fails the pool's creation.
    /// </param>
    /// <returns>The pool's builder (lanes, health check, background services), which is also <paramref name="services"/>' collection, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="services"/>, <paramref name="name"/> or <paramref name="configuration"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="name"/> is empty or white space.</exception>
    /// <exception cref="InvalidOperationException">A pool (or another keyed <see cref="WorkerPool"/>) is already registered
    /// under <paramref name="name"/>, or a lane of its <c>Lanes</c> section under that lane's name.</exception>
    public static IWorkerPoolBuilder AddWorkerPool(this IServiceCollection services, string name, IConfiguration configuration,
        Action<WorkerPoolOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentException.ThrowIfNullOrWhiteSpace(name);
        ArgumentNullException.ThrowIfNull(configuration);
        return AddPool(services, name, configuration, configure);
    }

    /// <summary>
    /// Registers one worker pool for each child of <paramref name="configuration"/>, named by the child's key and bound
    /// from the child as <see cref="AddWorkerPool(IServiceCollection, string, IConfiguration, Action{WorkerPoolOptions}?)"/>
    /// does. For a section <c>"Pools": { "ingest": { "MaxThreads": 4 }, "render": { "MinThreads": 1 } }</c> it registers
    /// the pools "ingest" and "render". A section without children registers nothing. Every child is checked before
    /// any is registered: when the call throws, the collection is as it was.
    /// </summary>
    /// <param name="services">The service collection.</param>
    /// <param name="configuration">The section whose children are the pools.</param>
    /// <returns><paramref name="services"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="services"/> or <paramref name="configuration"/> is null.</exception>
    /// <exception cref="InvalidOperationException">
    /// A child is a plain value rather than a section, a child's key is empty or white space, two children have the same
    /// key, a pool (or another keyed <see cref="WorkerPool"/>) is already registered under a child's key, or a lane of a
    /// child's <c>Lanes</c> section cannot be registered (see <see cref="WorkerPoolBuilderExtensions.AddLane"/>).
    /// </exception>
    public static IServiceCollection AddWorkerPools(this IServiceCollection services, IConfiguration configuration)
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentNullException.ThrowIfNull(configuration);

        // Every child is checked before the first is registered, so that a bad child leaves the collection as it was.
        IConfigurationSection[] children = [.. configuration.GetChildren()];
        var names = new HashSet<string>(children.Length, StringComparer.Ordinal);
        var lanes = new HashSet<string>(StringComparer.Ordinal);
        foreach (IConfigurationSection child in children)
        {
            if (child.Value is not null)
            {
                throw new InvalidOperationException(
                    $"The configuration value at '{child.Path}' is not a section: each child of a worker pools section " +
                    "must be a section of pool options, named by the pool.");
            }
            if (string.IsNullOrWhiteSpace(child.Key))
            {
                throw new InvalidOperationException(
                    $"The configuration section at '{child.Path}' has a blank key: each child of a worker pools section is " +
                    "named by its pool, and a pool's name cannot be empty or white space.");
            }
            if (!names.Add(child.Key))
            {
                throw new InvalidOperationException(
                    $"Two children of the worker pools section are named '{child.Key}' (the second at '{child.Path}'); " +
                    "each pool needs a name of its own.");
            }
            ThrowIfNameTaken(services, child.Key);
            ThrowIfLanesTaken(services, child, lanes);
        }
        foreach (IConfigurationSection child in children)
        {
            Register(services, child.Key, child, configure: null);
        }
        return services;
    }

    private static WorkerPoolBuilder AddPool(IServiceCollection services, string name, IConfiguration? configuration,
        Action<WorkerPoolOptions>? configure)
    {
        ThrowIfNameTaken(services, name);
        if (configuration is not null)
        {
            ThrowIfLanesTaken(services, configuration, new HashSet<string>(StringComparer.Ordinal));
        }
        Register(services, name, configuration, configure);
        return new WorkerPoolBuilder(services, name);
    }

    /// <summary>The section's <c>Lanes</c> children, checked as <see cref="ThrowIfLaneTaken"/> checks one, and against <paramref name="seen"/>.</summary>
    private static void ThrowIfLanesTaken(IServiceCollection services, IConfiguration section, HashSet<string> seen)
    {
        foreach (IConfigurationSection lane in section.GetSection(LanesKey).GetChildren())
        {
            if (lane.Value is not null || string.IsNullOrWhiteSpace(lane.Key))
            {
                throw new InvalidOperationException(
                    $"The configuration value at '{lane.Path}' is not a lane: each child of a pool's Lanes section must be a " +
                    "section of lane options, named by the lane.");
            }
            if (!seen.Add(lane.Key))
            {
                throw new InvalidOperationException($"Two lanes are named '{lane.Key}' (the second at '{lane.Path}'); each lane needs a name of its own.");
            }
            ThrowIfLaneTaken(services, lane.Key);
        }
    }

    /// <summary>Throws when a lane named <paramref name="laneName"/> cannot be registered; changes nothing either way.</summary>
    internal static void ThrowIfLaneTaken(IServiceCollection services, string laneName)
    {
        bool keyed = false;
        foreach (ServiceDescriptor descriptor in services)
        {
            keyed |= descriptor.IsKeyedService && descriptor.ServiceType == typeof(WorkerPoolLane)
                && descriptor.ServiceKey is string key && string.Equals(key, laneName, StringComparison.Ordinal);
        }
        if (keyed || (WorkerPoolRegistry.Find(services)?.ContainsLane(laneName) ?? false))
        {
            throw new InvalidOperationException(
                $"A lane named '{laneName}' is already registered; lanes are keyed by name, so each needs a name of its own.");
        }
    }

    /// <summary>Registers a lane whose name <see cref="ThrowIfLaneTaken"/> has accepted; throws nothing.</summary>
    internal static void RegisterLane(IServiceCollection services, string poolName, string laneName, IConfiguration? configuration,
        Action<LaneOptions>? configure)
    {
        WorkerPoolRegistry.GetOrAdd(services).AddLane(laneName, poolName);
        services.Configure<LaneOptions>(laneName, options => options.Name = laneName);
        if (configuration is not null)
        {
            services.Configure<LaneOptions>(laneName, options => configuration.Bind(options, static binder => binder.ErrorOnUnknownConfiguration = true));
        }
        if (configure is not null)
        {
            services.Configure(laneName, configure);
        }
        services.AddKeyedSingleton(laneName, static (provider, key) => WorkerPoolFactory.CreateLane(provider, (string)key!));
    }

    /// <summary>The child of a pool's section that holds its lanes.</summary>
    private const string LanesKey = "Lanes";

    /// <summary>Throws when <paramref name="name"/> cannot be registered; changes nothing either way.</summary>
    private static void ThrowIfNameTaken(IServiceCollection services, string name)
    {
        if ((WorkerPoolRegistry.Find(services)?.Contains(name) ?? false) || IsKeyedPoolRegistered(services, name))
        {
            throw new InvalidOperationException(
                $"A worker pool named '{name}' is already registered; each pool needs a name of its own.");
        }
    }

    /// <summary>Registers a pool whose name <see cref="ThrowIfNameTaken"/> has accepted; throws nothing.</summary>
    private static void Register(IServiceCollection services, string name, IConfiguration? configuration,
        Action<WorkerPoolOptions>? configure)
    {
        WorkerPoolRegistry registry = WorkerPoolRegistry.GetOrAdd(services);
        registry.Add(name);

        services.AddOptions();
        // The name first, as the default; WorkerPoolNameValidation rejects a section or a delegate that changes it.
        services.Configure<WorkerPoolOptions>(name, options => options.Name = name);
        if (configuration is not null)
        {
            // Intercepted by the configuration binding source generator: no reflection. The pool's options less its lanes.
            var poolSection = new SectionWithoutChild(configuration, LanesKey);
            services.Configure<WorkerPoolOptions>(name, options => poolSection.Bind(options, static binder => binder.ErrorOnUnknownConfiguration = true));
            // A reload whose options build rebinds them and tells the monitor's listeners (the hosted service applies
            // thread limits); one whose options do not build is logged and changes nothing.
            services.AddSingleton<IOptionsChangeTokenSource<WorkerPoolOptions>>(provider => new PoolOptionsReloadSource(name, configuration, provider));
        }
        if (configure is not null)
        {
            services.Configure(name, configure);
        }
        // The pool's meter from the container's factory (registered by the host, or by AddMetrics), unless the
        // options name one: the container then owns the meter, and tests can read one container's measurements alone.
        services.AddOptions<WorkerPoolOptions>(name).PostConfigure<IServiceProvider>(
            static (options, provider) => options.MeterFactory ??= provider.GetService<IMeterFactory>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IValidateOptions<WorkerPoolOptions>>(new WorkerPoolNameValidation(registry)));

        services.AddKeyedSingleton(name, static (provider, key) => WorkerPoolFactory.Create(provider, (string)key!));
        services.AddKeyedSingleton(name, static (_, _) => new PoolHealthState());
        services.TryAddSingleton<IWorkerPoolProvider>(static provider =>
            new WorkerPoolProvider(provider, provider.GetRequiredService<WorkerPoolRegistry>()));
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IHostedService, WorkerPoolHostedService>(static provider =>
            new WorkerPoolHostedService(
                provider,
                provider.GetRequiredService<IWorkerPoolProvider>(),
                provider.GetRequiredService<WorkerPoolRegistry>(),
                (ILogger?)provider.GetService<ILoggerFactory>()?.CreateLogger<WorkerPoolHostedService>() ?? NullLogger.Instance)));
        if (configuration is not null)
        {
            foreach (IConfigurationSection lane in configuration.GetSection(LanesKey).GetChildren())
            {
                RegisterLane(services, name, lane.Key, lane, configure: null);
            }
        }
    }

    private static bool IsKeyedPoolRegistered(IServiceCollection services, string name)
    {
        foreach (ServiceDescriptor descriptor in services)
        {
            if (descriptor.IsKeyedService && descriptor.ServiceType == typeof(WorkerPool)
                && descriptor.ServiceKey is string key && string.Equals(key, name, StringComparison.Ordinal))
            {
                return true;
            }
        }
        return false;
    }
}
