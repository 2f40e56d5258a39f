using System;
using System.Diagnostics.CodeAnalysis;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Options;
using Spindle;
using Spindle.Extensions.Hosting;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>What hangs off a registered pool (<see cref="IWorkerPoolBuilder"/>): lanes, a health check, background services.</summary>
public static class WorkerPoolBuilderExtensions
{
    /// <summary>
    /// Registers a lane of the pool named <paramref name="laneName"/>: a keyed <see cref="WorkerPoolLane"/> singleton
    /// (<c>[FromKeyedServices("name")] WorkerPoolLane</c>), created with the pool when the host starts (invalid options
    /// fail the start with an exception naming the lane) and stopped with it. Its options are the named
    /// <see cref="LaneOptions"/> <paramref name="laneName"/>: the defaults, then <see cref="LaneOptions.Name"/> set to the
    /// lane's name, then <paramref name="configure"/>. Lanes also come from configuration: the <c>Lanes</c> section of a
    /// pool's section, one child per lane, named by its key (<c>"Lanes": { "interactive": { "Priority": "High" } }</c>).
    /// A lane first resolved after its pool's shutdown has begun (for instance, a pool resolved and stopped before
    /// the host started) throws an <see cref="ObjectDisposedException"/> naming the lane and the pool.
    /// </summary>
    /// <param name="builder">The pool's builder.</param>
    /// <param name="laneName">The lane's name and service key; unique among the lanes of every pool of the collection.</param>
    /// <param name="configure">Sets the lane's options, or <see langword="null"/>.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> or <paramref name="laneName"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="laneName"/> is empty or white space.</exception>
    /// <exception cref="InvalidOperationException">A lane (or another keyed <see cref="WorkerPoolLane"/>) is already registered under <paramref name="laneName"/>.</exception>
    public static IWorkerPoolBuilder AddLane(this IWorkerPoolBuilder builder, string laneName, Action<LaneOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentException.ThrowIfNullOrWhiteSpace(laneName);
        WorkerPoolServiceCollectionExtensions.ThrowIfLaneTaken(builder.Services, laneName);
        WorkerPoolServiceCollectionExtensions.RegisterLane(builder.Services, builder.Name, laneName, configuration: null, configure);
        return builder;
    }

    /// <summary>
    /// Registers a health check of the pool (Microsoft.Extensions.Diagnostics.HealthChecks): Unhealthy (or the
    /// registration's failure status) while an item was reported stuck within
    /// <see cref="WorkerPoolHealthCheckOptions.StuckItemWindow"/>; Degraded while the pool added threads for starvation
    /// within <see cref="WorkerPoolHealthCheckOptions.StarvationWindow"/> or more than
    /// <see cref="WorkerPoolHealthCheckOptions.QueueLengthThreshold"/> items wait; else Healthy. The report's data holds
    /// the thread count, the items waiting, the stuck items and the threads added for starvation. Stuck items are only
    /// reported while <see cref="WorkerPoolOptions.StuckItemThreshold"/> is finite (30 s unless set).
    /// </summary>
    /// <param name="builder">The pool's builder.</param>
    /// <param name="configure">Sets the thresholds, or <see langword="null"/> for the defaults; read at this call.</param>
    /// <param name="tags">Tags of the check (to filter health endpoints), or <see langword="null"/>.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException">A window is not positive, or the queue threshold is below 1.</exception>
    /// <exception cref="ArgumentException">The check's name is empty or white space.</exception>
    public static IWorkerPoolBuilder AddHealthCheck(this IWorkerPoolBuilder builder, Action<WorkerPoolHealthCheckOptions>? configure = null,
        params string[]? tags)
    {
        ArgumentNullException.ThrowIfNull(builder);
        var options = new WorkerPoolHealthCheckOptions();
        configure?.Invoke(options);
        WorkerPoolHealthCheckOptions validated = options.Validate(builder.Name, nameof(configure));
        string poolName = builder.Name;
        builder.Services.AddHealthChecks().Add(new HealthCheckRegistration(validated.Name!,
            provider => new WorkerPoolHealthCheck(provider.GetRequiredKeyedService<WorkerPool>(poolName),
                provider.GetRequiredKeyedService<PoolHealthState>(poolName), validated),
            failureStatus: null, tags));
        return builder;
    }

    /// <summary>
    /// Registers <typeparamref name="TService"/> as a singleton and as a hosted service whose work
    /// (<see cref="WorkerPoolBackgroundService.ExecuteOnTargetAsync"/>) runs on the pool, or on its lane
    /// <paramref name="laneName"/>, resolved when the service starts.
    /// </summary>
    /// <remarks>
    /// The lane may be registered after this call, on this pool's builder or in its section's <c>Lanes</c>. A lane that is
    /// already registered for another pool is refused here; one that no pool has, or that is registered for another
    /// pool later, fails the host's start (when the host resolves its hosted services, before any of them starts) with
    /// an <see cref="InvalidOperationException"/> naming the service, the lane and the pools.
    /// </remarks>
    /// <typeparam name="TService">The service; resolved from the container (with its dependencies).</typeparam>
    /// <param name="builder">The pool's builder.</param>
    /// <param name="laneName">A lane registered for this pool (<see cref="AddLane"/> or configuration), or <see langword="null"/> for the pool itself.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="laneName"/> is empty or white space, or names a lane
    /// registered for another pool.</exception>
    /// <exception cref="InvalidOperationException"><typeparamref name="TService"/> is registered as a background service
    /// already, on this pool or another (one instance serves a type, so it runs on one target).</exception>
    public static IWorkerPoolBuilder AddBackgroundService<[DynamicallyAccessedMembers(DynamicallyAccessedMemberTypes.PublicConstructors)] TService>(
        this IWorkerPoolBuilder builder, string? laneName = null)
        where TService : WorkerPoolBackgroundService
    {
        ArgumentNullException.ThrowIfNull(builder);
        string poolName = builder.Name;
        if (laneName is not null)
        {
            ArgumentException.ThrowIfNullOrWhiteSpace(laneName);
            string? lanePool = WorkerPoolRegistry.Find(builder.Services)?.PoolOfLane(laneName);
            if (lanePool is not null && !string.Equals(lanePool, poolName, StringComparison.Ordinal))
            {
                throw new ArgumentException(
                    $"Lane '{laneName}' belongs to worker pool '{lanePool}', not to '{poolName}': a background service of pool " +
                    $"'{poolName}' runs on that pool or on one of its lanes.", nameof(laneName));
            }
        }
        string where = laneName is null ? $"pool '{poolName}'" : $"lane '{laneName}' of pool '{poolName}'";
        foreach (ServiceDescriptor descriptor in builder.Services)
        {
            if (descriptor.ServiceType == typeof(BackgroundServiceTarget<TService>))
            {
                // One singleton serves every registration of the type: a second would start that one instance twice,
                // both runs on the target registered last.
                throw new InvalidOperationException(
                    $"The background service {typeof(TService).Name} already runs on {((BackgroundServiceTarget<TService>)descriptor.ImplementationInstance!).Where}; " +
                    $"it cannot also run on {where}. A service type runs on one pool or lane: derive another type for the second.");
            }
        }
        builder.Services.AddSingleton(new BackgroundServiceTarget<TService>(where));
        builder.Services.TryAddSingleton<TService>();
        builder.Services.AddSingleton<IHostedService>(provider =>
        {
            // The host resolves its hosted services before it starts any: a lane that is not this pool's fails the start
            // here, before the service runs, rather than inside the service's start, with the container's message.
            if (laneName is not null)
            {
                ThrowIfNotALaneOf(provider, typeof(TService), poolName, laneName);
            }
            TService service = provider.GetRequiredService<TService>();
            service.RunOn(() => laneName is null
                ? provider.GetRequiredKeyedService<WorkerPool>(poolName)
                : ResolveLane(provider, typeof(TService), poolName, laneName));
            return service;
        });
        return builder;
    }

    /// <summary>
    /// Throws when <paramref name="laneName"/> is not a lane of <paramref name="poolName"/> as far as the registrations
    /// tell: registered for another pool, or not at all. A keyed lane registered by hand (not through
    /// <see cref="AddLane"/> or configuration) passes, and <see cref="ResolveLane"/> checks its pool.
    /// </summary>
    private static void ThrowIfNotALaneOf(IServiceProvider provider, Type service, string poolName, string laneName)
    {
        string? lanePool = provider.GetRequiredService<WorkerPoolRegistry>().PoolOfLane(laneName);
        if (lanePool is null && provider.GetService<IServiceProviderIsKeyedService>()?.IsKeyedService(typeof(WorkerPoolLane), laneName) != true)
        {
            throw new InvalidOperationException(
                $"The background service {service.Name} is registered to run on lane '{laneName}' of worker pool '{poolName}', " +
                $"but no lane named '{laneName}' is registered: add it with AddLane on pool '{poolName}', or in the Lanes of its section.");
        }
        if (lanePool is not null && !string.Equals(lanePool, poolName, StringComparison.Ordinal))
        {
            throw NotALaneOf(service, poolName, laneName, lanePool);
        }
    }

    /// <summary>The lane a background service runs on, checked to be a lane of its pool.</summary>
    private static WorkerPoolLane ResolveLane(IServiceProvider provider, Type service, string poolName, string laneName)
    {
        WorkerPoolLane lane = provider.GetRequiredKeyedService<WorkerPoolLane>(laneName);
        if (!ReferenceEquals(lane.Pool, provider.GetRequiredKeyedService<WorkerPool>(poolName)))
        {
            throw NotALaneOf(service, poolName, laneName, lane.Pool.Name);
        }
        return lane;
    }

    private static InvalidOperationException NotALaneOf(Type service, string poolName, string laneName, string lanePool) =>
        new($"The background service {service.Name} is registered to run on lane '{laneName}' of worker pool '{poolName}', " +
            $"but that lane belongs to worker pool '{lanePool}': a background service of a pool runs on that pool or on one of its lanes.");

    /// <summary>Where a background service type was registered to run (one registration per type).</summary>
    private sealed class BackgroundServiceTarget<TService>(string where)
    {
        public string Where { get; } = where;
    }
}
