using System;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Spindle;
using Spindle.AspNetCore.Handlers;

namespace Microsoft.AspNetCore.Builder;

/// <summary>
/// Runs endpoints, or every endpoint of a group, on a Spindle pool or lane: <c>app.MapGet(...).RunOnLane("admin")</c>,
/// <c>app.MapGroup("/api").RunOnWorkerPool("requests")</c>.
/// </summary>
/// <remarks>
/// <para>The endpoint's request delegate is queued to the target as a work item and runs there with the request's
/// <see cref="System.Threading.ExecutionContext"/> and the target's <see cref="System.Threading.SynchronizationContext"/>,
/// so its own <c>await</c>s (without <c>ConfigureAwait(false)</c>) resume on the target too; a lane's
/// <see cref="LaneOptions.MaxConcurrency"/> counts each of those steps, not the whole request.</para>
/// <para>A bounded lane (<see cref="LaneOptions.QueueLimit"/>) that is full, and a target that is shutting down, do not
/// queue the request: it is answered <c>503 Service Unavailable</c> with a <c>Retry-After</c> header, at once, on the
/// thread that routed it. The rest of the pipeline (middleware before the endpoint, Kestrel's response writing) runs
/// where it resumes.</para>
/// </remarks>
public static class SpindleEndpointConventionBuilderExtensions
{
    /// <summary>The <c>Retry-After</c> of a request refused by a full lane unless told otherwise: 1 second.</summary>
    public const int DefaultRetryAfterSeconds = 1;

    /// <summary>Runs the endpoints on the pool registered as <paramref name="poolName"/> with <c>AddWorkerPool</c>.</summary>
    /// <typeparam name="TBuilder">The endpoint, group or route handler builder.</typeparam>
    /// <param name="builder">The endpoints.</param>
    /// <param name="poolName">The pool's registration name; resolved at the first request.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> or <paramref name="poolName"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="poolName"/> is empty or white space.</exception>
    public static TBuilder RunOnWorkerPool<TBuilder>(this TBuilder builder, string poolName)
        where TBuilder : IEndpointConventionBuilder
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentException.ThrowIfNullOrWhiteSpace(poolName);
        return AddDispatch(builder, services => services.GetRequiredKeyedService<WorkerPool>(poolName), DefaultRetryAfterSeconds);
    }

    /// <summary>
    /// Runs the endpoints on the lane registered as <paramref name="laneName"/> (<c>AddLane</c> or configuration); a full
    /// bounded lane answers 503 with <c>Retry-After: <paramref name="retryAfterSeconds"/></c>.
    /// </summary>
    /// <typeparam name="TBuilder">The endpoint, group or route handler builder.</typeparam>
    /// <param name="builder">The endpoints.</param>
    /// <param name="laneName">The lane's registration name; resolved at the first request.</param>
    /// <param name="retryAfterSeconds">The <c>Retry-After</c> of a refused request, in seconds.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> or <paramref name="laneName"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="laneName"/> is empty or white space.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="retryAfterSeconds"/> is negative.</exception>
    public static TBuilder RunOnLane<TBuilder>(this TBuilder builder, string laneName, int retryAfterSeconds = DefaultRetryAfterSeconds)
        where TBuilder : IEndpointConventionBuilder
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentException.ThrowIfNullOrWhiteSpace(laneName);
        ArgumentOutOfRangeException.ThrowIfNegative(retryAfterSeconds);
        return AddDispatch(builder, services => services.GetRequiredKeyedService<WorkerPoolLane>(laneName), retryAfterSeconds);
    }

    /// <summary>
    /// Runs the endpoints on <paramref name="target"/> (a pool, or one of its lanes); a full bounded lane answers 503
    /// with <c>Retry-After: <paramref name="retryAfterSeconds"/></c>.
    /// </summary>
    /// <typeparam name="TBuilder">The endpoint, group or route handler builder.</typeparam>
    /// <param name="builder">The endpoints.</param>
    /// <param name="target">The pool or lane.</param>
    /// <param name="retryAfterSeconds">The <c>Retry-After</c> of a refused request, in seconds.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> or <paramref name="target"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="retryAfterSeconds"/> is negative.</exception>
    public static TBuilder RunOn<TBuilder>(this TBuilder builder, WorkTarget target, int retryAfterSeconds = DefaultRetryAfterSeconds)
        where TBuilder : IEndpointConventionBuilder
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentNullException.ThrowIfNull(target);
        ArgumentOutOfRangeException.ThrowIfNegative(retryAfterSeconds);
        return AddDispatch(builder, _ => target, retryAfterSeconds);
    }

    private static TBuilder AddDispatch<TBuilder>(TBuilder builder, Func<IServiceProvider, WorkTarget> resolve, int retryAfterSeconds)
        where TBuilder : IEndpointConventionBuilder
    {
        // Finally: after every other convention (filters included) has shaped the request delegate, which this wraps.
        builder.Finally(endpoint =>
        {
            RequestDelegate inner = endpoint.RequestDelegate
                ?? throw new InvalidOperationException($"The endpoint '{endpoint.DisplayName}' has no request delegate to run on a pool.");
            var dispatcher = new WorkTargetDispatcher(inner, endpoint.ApplicationServices, resolve, retryAfterSeconds);
            endpoint.RequestDelegate = dispatcher.InvokeAsync;
        });
        return builder;
    }
}
