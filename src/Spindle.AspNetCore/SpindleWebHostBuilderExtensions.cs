using System;
using Microsoft.AspNetCore.Connections;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;
using Spindle;
using Spindle.AspNetCore;
using Spindle.AspNetCore.Transport;

namespace Microsoft.AspNetCore.Hosting;

/// <summary>Puts Kestrel's connections on a Spindle <see cref="WorkerPool"/>: <c>builder.WebHost.UseSpindle()</c>.</summary>
/// <remarks>
/// <para>The transport binds IP endpoints (Kestrel's <c>Listen</c>, <c>ListenAnyIP</c>, URLs) with the pool's
/// <see cref="Spindle.IO.PoolSocket"/>: on Linux (x64, arm64) the pool's own epoll driver completes every receive and
/// send on the pool's workers, and the code after Kestrel's reads and flushes resumes on the pool, so requests on open
/// connections go on while the built-in thread pool is starved. Other endpoints (Unix sockets, named pipes), and IP
/// endpoints on other platforms unless <see cref="SpindleTransportOptions.BindWithoutPoolDriver"/> is set, are left to
/// Kestrel's own sockets transport, which keeps working there.</para>
/// <para>Not isolated: Kestrel starts each accepted connection on the built-in thread pool (so a new connection waits
/// while that pool is starved; keep-alive connections do not), and handler code runs wherever its awaits resume
/// (<c>RunOnWorkerPool</c> and <c>RunOnLane</c> put an endpoint on the pool).</para>
/// </remarks>
public static class SpindleWebHostBuilderExtensions
{
    /// <summary>
    /// Runs Kestrel's connections on a pool of their own, registered here under
    /// <see cref="SpindleTransportOptions.DefaultPoolName"/> (<c>"kestrel"</c>) with <c>AddWorkerPool</c>: created when
    /// the host starts, drained when it stops.
    /// </summary>
    /// <param name="builder">The web host builder (<c>WebApplicationBuilder.WebHost</c>).</param>
    /// <param name="configurePool">Sets the pool's options, or <see langword="null"/> for the defaults.</param>
    /// <param name="configure">Sets the transport's options, or <see langword="null"/> for the defaults.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> is null.</exception>
    /// <exception cref="InvalidOperationException">A pool named <c>"kestrel"</c> is already registered, or <c>UseSpindle</c> was already called.</exception>
    public static IWebHostBuilder UseSpindle(this IWebHostBuilder builder, Action<WorkerPoolOptions>? configurePool = null,
        Action<SpindleTransportOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        return builder.ConfigureServices(services =>
        {
            ThrowIfRegistered(services);
            services.AddWorkerPool(SpindleTransportOptions.DefaultPoolName, configurePool);
            Register(services, SpindleTransportOptions.DefaultPoolName, configure);
        });
    }

    /// <summary>
    /// Runs Kestrel's connections on the pool registered as <paramref name="poolName"/> with <c>AddWorkerPool</c>
    /// (Spindle.Extensions.Hosting), before or after this call; a name that no pool has fails the server's start with an
    /// <see cref="InvalidOperationException"/> that says so.
    /// </summary>
    /// <param name="builder">The web host builder (<c>WebApplicationBuilder.WebHost</c>).</param>
    /// <param name="poolName">The pool's registration name.</param>
    /// <param name="configure">Sets the transport's options, or <see langword="null"/> for the defaults.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> or <paramref name="poolName"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="poolName"/> is empty or white space.</exception>
    /// <exception cref="InvalidOperationException"><c>UseSpindle</c> was already called.</exception>
    public static IWebHostBuilder UseSpindle(this IWebHostBuilder builder, string poolName, Action<SpindleTransportOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentException.ThrowIfNullOrWhiteSpace(poolName);
        return builder.ConfigureServices(services =>
        {
            ThrowIfRegistered(services);
            Register(services, poolName, configure);
        });
    }

    /// <summary>
    /// Runs Kestrel's connections on <paramref name="pool"/>, a pool the caller created and owns: the host neither
    /// drains nor disposes it, so it must outlive the host (dispose it after the host has stopped).
    /// </summary>
    /// <param name="builder">The web host builder (<c>WebApplicationBuilder.WebHost</c>).</param>
    /// <param name="pool">The pool.</param>
    /// <param name="configure">Sets the transport's options, or <see langword="null"/> for the defaults.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> or <paramref name="pool"/> is null.</exception>
    /// <exception cref="InvalidOperationException"><c>UseSpindle</c> was already called.</exception>
    public static IWebHostBuilder UseSpindle(this IWebHostBuilder builder, WorkerPool pool, Action<SpindleTransportOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentNullException.ThrowIfNull(pool);
        return builder.ConfigureServices(services =>
        {
            ThrowIfRegistered(services);
            services.AddOptions<SpindleTransportOptions>().Configure(options => options.OwnPool = pool);
            Register(services, pool.Name, configure);
        });
    }

    private static void ThrowIfRegistered(IServiceCollection services)
    {
        foreach (ServiceDescriptor descriptor in services)
        {
            if (descriptor.ServiceType == typeof(SpindleTransportMarker))
            {
                throw new InvalidOperationException("UseSpindle was already called for this host; call it once.");
            }
        }
    }

    private static void Register(IServiceCollection services, string poolName, Action<SpindleTransportOptions>? configure)
    {
        services.AddSingleton(new SpindleTransportMarker());
        services.AddOptions<SpindleTransportOptions>().Configure(options => options.PoolName = poolName);
        if (configure is not null)
        {
            services.Configure(configure);
        }
        // Added after Kestrel's sockets transport (which UseKestrel registers first): Kestrel asks the last registered
        // factory first, and this one declines what it does not bind (CanBind).
        services.AddSingleton<IConnectionListenerFactory>(static provider => new SpindleTransportFactory(
            provider.GetRequiredService<IOptions<SpindleTransportOptions>>(), provider, provider.GetService<ILoggerFactory>()));
    }

    /// <summary>Says that <c>UseSpindle</c> registered the transport with a service collection.</summary>
    private sealed class SpindleTransportMarker;
}
