using System;
using System.Collections.Generic;
using System.Linq;
using Microsoft.Extensions.DependencyInjection;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// The names registered with <c>AddWorkerPool</c> on one service collection, in registration order, and the lanes
/// registered with <c>AddLane</c> (each with its pool). One instance per collection, itself registered there as a
/// singleton, so registration can reject a duplicate at the call.
/// </summary>
internal sealed class WorkerPoolRegistry
{
    private readonly List<string> _names = new();
    private readonly List<KeyValuePair<string, string>> _lanes = new();

    /// <summary>The lanes, in registration order: the lane's name (its key) and its pool's name.</summary>
    public IReadOnlyList<KeyValuePair<string, string>> Lanes => _lanes;

    public bool ContainsLane(string laneName) => _lanes.Exists(lane => string.Equals(lane.Key, laneName, StringComparison.Ordinal));

    public void AddLane(string laneName, string poolName) => _lanes.Add(new(laneName, poolName));

    /// <summary>The name of the pool the lane <paramref name="laneName"/> is registered for, or <see langword="null"/> when none.</summary>
    public string? PoolOfLane(string laneName)
    {
        foreach (KeyValuePair<string, string> lane in _lanes)
        {
            if (string.Equals(lane.Key, laneName, StringComparison.Ordinal))
            {
                return lane.Value;
            }
        }
        return null;
    }

    public IReadOnlyList<string> Names => _names;

    public bool Contains(string name) => _names.Contains(name, StringComparer.Ordinal);

    public void Add(string name) => _names.Add(name);

    /// <summary>The registry of <paramref name="services"/>, or <see langword="null"/> when no pool is registered there yet.</summary>
    public static WorkerPoolRegistry? Find(IServiceCollection services)
    {
        foreach (ServiceDescriptor descriptor in services)
        {
            if (descriptor.ServiceType == typeof(WorkerPoolRegistry) && !descriptor.IsKeyedService
                && descriptor.ImplementationInstance is WorkerPoolRegistry existing)
            {
                return existing;
            }
        }
        return null;
    }

    /// <summary>The registry of <paramref name="services"/>, added to it the first time.</summary>
    public static WorkerPoolRegistry GetOrAdd(IServiceCollection services)
    {
        if (Find(services) is WorkerPoolRegistry existing)
        {
            return existing;
        }
        var registry = new WorkerPoolRegistry();
        services.AddSingleton(registry);
        return registry;
    }
}
