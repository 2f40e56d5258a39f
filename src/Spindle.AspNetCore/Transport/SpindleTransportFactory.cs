using System;
using System.Buffers;
using System.Collections.Generic;
using System.Net;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Connections;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Options;
using Spindle.Extensions.Hosting;

namespace Spindle.AspNetCore.Transport;

/// <summary>
/// Kestrel's connection listener factory for IP endpoints on a Spindle pool. Kestrel asks the factories registered
/// last first: this one binds IP endpoints where the pool has its own socket driver (or everywhere when
/// <see cref="SpindleTransportOptions.BindWithoutPoolDriver"/> is set) and declines the others (Unix sockets, named
/// pipes, and IP endpoints elsewhere), which fall to Kestrel's own sockets transport.
/// </summary>
internal sealed class SpindleTransportFactory : IConnectionListenerFactory, IConnectionListenerFactorySelector
{
    private readonly SpindleTransportOptions _options;
    private readonly IServiceProvider _services;
    private readonly ILogger _logger;
    private readonly bool _hasPoolDriver;
    private WorkerPool? _pool;

    public SpindleTransportFactory(IOptions<SpindleTransportOptions> options, IServiceProvider services, ILoggerFactory? loggerFactory)
        : this(options, services, loggerFactory, HasPoolDriver())
    {
    }

    /// <summary>The seam of the tests: <paramref name="hasPoolDriver"/> stands for the platform's answer.</summary>
    internal SpindleTransportFactory(IOptions<SpindleTransportOptions> options, IServiceProvider services, ILoggerFactory? loggerFactory,
        bool hasPoolDriver)
    {
        ArgumentNullException.ThrowIfNull(options);
        ArgumentNullException.ThrowIfNull(services);
        _options = options.Value;
        _services = services;
        _logger = (ILogger?)loggerFactory?.CreateLogger("Spindle.AspNetCore.Transport") ?? NullLogger.Instance;
        _hasPoolDriver = hasPoolDriver;
    }

    /// <summary>The pool of the connections, resolved at the first bind (the host has created its pools by then).</summary>
    internal WorkerPool Pool => _pool ??= ResolvePool();

    /// <inheritdoc/>
    public bool CanBind(EndPoint endpoint) => endpoint is IPEndPoint && (_hasPoolDriver || _options.BindWithoutPoolDriver);

    /// <inheritdoc/>
    public ValueTask<IConnectionListener> BindAsync(EndPoint endpoint, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(endpoint);
        if (endpoint is not IPEndPoint ip)
        {
            throw new NotSupportedException($"The Spindle transport binds IP endpoints only, not {endpoint.GetType().Name} ({endpoint}).");
        }
        cancellationToken.ThrowIfCancellationRequested();
        MemoryPool<byte> memory = _services.GetService<IMemoryPoolFactory<byte>>()?.Create(new MemoryPoolOptions { Owner = "spindle" })
            ?? MemoryPool<byte>.Shared;
        var listener = new SpindleConnectionListener(Pool, memory, _options, _logger);
        try
        {
            listener.Bind(ip);
        }
        catch
        {
            memory.Dispose();
            throw;
        }
        return new ValueTask<IConnectionListener>(listener);
    }

    private WorkerPool ResolvePool()
    {
        if (_options.OwnPool is WorkerPool own)
        {
            return own;
        }
        string name = _options.PoolName;
        IWorkerPoolProvider? provider = _services.GetService<IWorkerPoolProvider>();
        try
        {
            if (provider is not null && provider.TryGetPool(name, out WorkerPool? pool))
            {
                return pool;
            }
        }
        catch (KeyNotFoundException)
        {
        }
        throw new InvalidOperationException(
            $"The Spindle transport runs on the worker pool '{name}', and no pool of that name is registered: call " +
            $"services.AddWorkerPool(\"{name}\") (Spindle.Extensions.Hosting), or UseSpindle() without a name to register one.");
    }

    private static bool HasPoolDriver() =>
        OperatingSystem.IsLinux() && RuntimeInformation.ProcessArchitecture is Architecture.X64 or Architecture.Arm64;
}
