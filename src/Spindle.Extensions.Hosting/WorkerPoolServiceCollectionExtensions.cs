using System;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
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
/// that order; further <c>services.Configure&lt;WorkerPoolOptions&gt;(name, ...)</c> calls apply too;</item>
/// <item>with a hosted service that creates every registered pool before any hosted service starts (invalid options
/// fail the host's start with an <see cref="InvalidOperationException"/> naming the pool) and, once every hosted
/// service has stopped, shuts the pools down within the host's shutdown timeout: each pool drains until the timeout
/// fires, then cancels the items that have not started (running items finish on their own); the outcome and its
/// counts are logged.</item>
/// </list>
/// <para>Under <see cref="UnhandledExceptionPolicy.Report"/>, exceptions from a pool's items are logged as errors
/// with the pool's name (logger category <c>Spindle.Extensions.Hosting.WorkerPool</c>). The service provider owns the
/// pools and disposes them with itself; disposal waits for items that are still running.</para>
/// </remarks>
public static class WorkerPoolServiceCollectionExtensions
{
    /// <summary>Registers a worker pool named <paramref name="name"/>, configured in code.</summary>
    /// <param name="services">The service collection.</param>
    /// <param name="name">The pool's name: its service key, its options name and the default <see cref="WorkerPoolOptions.Name"/>.</param>
    /// <param name="configure">Sets the pool's options (applied after the defaults and the name), or <see langword="null"/>.</param>
    /// <returns><paramref name="services"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="services"/> or <paramref name="name"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="name"/> is empty or white space.</exception>
    /// <exception cref="InvalidOperationException">A pool (or another keyed <see cref="WorkerPool"/>) is already registered under <paramref name="name"/>.</exception>
    public static IServiceCollection AddWorkerPool(this IServiceCollection services, string name, Action<WorkerPoolOptions>? configure = null)
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
    /// <param name="name">The pool's name: its service key, its options name and the default <see cref="WorkerPoolOptions.Name"/>.</param>
    /// <param name="configuration">
    /// The section holding the pool's options: <c>Name</c>, <c>MinThreads</c>, <c>MaxThreads</c>, <c>IdleTimeout</c>,
    /// <c>FlowExecutionContext</c>, <c>ThreadNamePrefix</c>, <c>StackSize</c>, <c>UseBackgroundThreads</c>,
    /// <c>ExceptionPolicy</c>, <c>StuckItemThreshold</c>. It is read when the pool is created; a key that is none of
    /// these, or a value that does not convert, fails the pool's creation with an <see cref="InvalidOperationException"/>
    /// naming the pool.
    /// </param>
    /// <param name="configure">
    /// Sets what configuration cannot (the worker hooks, for instance), applied after the section; or <see langword="null"/>.
    /// </param>
    /// <returns><paramref name="services"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="services"/>, <paramref name="name"/> or <paramref name="configuration"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="name"/> is empty or white space.</exception>
    /// <exception cref="InvalidOperationException">A pool (or another keyed <see cref="WorkerPool"/>) is already registered under <paramref name="name"/>.</exception>
    public static IServiceCollection AddWorkerPool(this IServiceCollection services, string name, IConfiguration configuration,
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
    /// the pools "ingest" and "render". A section without children registers nothing.
    /// </summary>
    /// <param name="services">The service collection.</param>
    /// <param name="configuration">The section whose children are the pools.</param>
    /// <returns><paramref name="services"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="services"/> or <paramref name="configuration"/> is null.</exception>
    /// <exception cref="InvalidOperationException">
    /// A child is a plain value rather than a section, or a pool is already registered under a child's key.
    /// </exception>
    public static IServiceCollection AddWorkerPools(this IServiceCollection services, IConfiguration configuration)
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentNullException.ThrowIfNull(configuration);
        foreach (IConfigurationSection child in configuration.GetChildren())
        {
            if (child.Value is not null)
            {
                throw new InvalidOperationException(
                    $"The configuration value at '{child.Path}' is not a section: each child of a worker pools section " +
                    "must be a section of pool options, named by the pool.");
            }
            AddPool(services, child.Key, child, configure: null);
        }
        return services;
    }

    private static IServiceCollection AddPool(IServiceCollection services, string name, IConfiguration? configuration,
        Action<WorkerPoolOptions>? configure)
    {
        WorkerPoolRegistry registry = WorkerPoolRegistry.GetOrAdd(services);
        if (registry.Contains(name) || IsKeyedPoolRegistered(services, name))
        {
            throw new InvalidOperationException(
                $"A worker pool named '{name}' is already registered; each pool needs a name of its own.");
        }
        registry.Add(name);

        services.AddOptions();
        services.Configure<WorkerPoolOptions>(name, options => options.Name = name);
        if (configuration is not null)
        {
            // Intercepted by the configuration binding source generator: no reflection.
            services.Configure<WorkerPoolOptions>(name, options => configuration.Bind(options, static binder => binder.ErrorOnUnknownConfiguration = true));
        }
        if (configure is not null)
        {
            services.Configure(name, configure);
        }

        services.AddKeyedSingleton(name, static (provider, key) => WorkerPoolFactory.Create(provider, (string)key!));
        services.TryAddSingleton<IWorkerPoolProvider>(static provider =>
            new WorkerPoolProvider(provider, provider.GetRequiredService<WorkerPoolRegistry>()));
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IHostedService, WorkerPoolHostedService>(static provider =>
            new WorkerPoolHostedService(
                provider.GetRequiredService<IWorkerPoolProvider>(),
                (ILogger?)provider.GetService<ILoggerFactory>()?.CreateLogger<WorkerPoolHostedService>() ?? NullLogger.Instance)));
        return services;
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
