using System;
using System.Collections.Generic;
using System.Diagnostics.CodeAnalysis;
using Microsoft.Extensions.DependencyInjection;

namespace Spindle.Extensions.Hosting;

/// <summary>The <see cref="IWorkerPoolProvider"/> over the keyed <see cref="WorkerPool"/> singletons.</summary>
internal sealed class WorkerPoolProvider : IWorkerPoolProvider
{
    private readonly IServiceProvider _services;
    private readonly string[] _names;
    private IReadOnlyDictionary<string, WorkerPool>? _pools;

    public WorkerPoolProvider(IServiceProvider services, WorkerPoolRegistry registry)
    {
        _services = services;
        _names = [.. registry.Names];
    }

    public IReadOnlyList<string> Names => _names;

    public IReadOnlyDictionary<string, WorkerPool> Pools
    {
        get
        {
            if (_pools is null)
            {
                var pools = new Dictionary<string, WorkerPool>(_names.Length, StringComparer.Ordinal);
                foreach (string name in _names)
                {
                    pools.Add(name, Resolve(name));
                }
                _pools = pools;
            }
            return _pools;
        }
    }

    public WorkerPool GetPool(string name)
    {
        if (!TryGetPool(name, out WorkerPool? pool))
        {
            throw new KeyNotFoundException(_names.Length == 0
                ? $"No worker pool named '{name}' is registered; no pool is registered at all (call AddWorkerPool)."
                : $"No worker pool named '{name}' is registered; the registered pools are: {string.Join(", ", _names)}.");
        }
        return pool;
    }

    public bool TryGetPool(string name, [NotNullWhen(true)] out WorkerPool? pool)
    {
        ArgumentNullException.ThrowIfNull(name);
        if (Array.IndexOf(_names, name) < 0)
        {
            pool = null;
            return false;
        }
        pool = Resolve(name);
        return true;
    }

    private WorkerPool Resolve(string name) => _services.GetRequiredKeyedService<WorkerPool>(name);
}
