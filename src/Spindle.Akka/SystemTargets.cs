using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using Akka.Actor;
using Akka.Configuration;
using Akka.Dispatch;

namespace Spindle.Akka;

/// <summary>
/// One actor system's Spindle targets: the pools it created (by name, shared between its dispatchers) and the lanes it
/// created (one per dispatcher that asks for a lane), all shut down when the system terminates; plus the targets the
/// application supplied through <see cref="SpindleSetup"/>, which it never shuts down.
/// </summary>
/// <remarks>
/// State: everything below is guarded by <see cref="_lock"/>; dispatchers resolve their target at their first executor,
/// from any thread. The termination callback marks the registry terminated under the lock, then shuts down what it
/// created outside it, without blocking (it may run on a worker of the very pool it shuts down).
/// </remarks>
internal sealed class SystemTargets
{
    private static readonly ConditionalWeakTable<ActorSystem, SystemTargets> s_systems = new();

    private readonly Lock _lock = new();
    private readonly ActorSystem _system;
    private readonly Dictionary<string, (WorkerPool Pool, int MinThreads, int MaxThreads)> _createdPools = new(StringComparer.Ordinal);
    private readonly List<WorkerPoolLane> _createdLanes = [];
    private bool _hooked;
    private bool _terminated;

    private SystemTargets(ActorSystem system) => _system = system;

    public static SystemTargets For(ActorSystem system) => s_systems.GetValue(system, static s => new SystemTargets(s));

    /// <summary>The target of one dispatcher (the same one for every executor it produces).</summary>
    public SpindleExecutorTarget Resolve(string dispatcherId, DispatcherSettings settings, IDispatcherPrerequisites prerequisites)
    {
        var found = prerequisites.Settings.Setup.Get<SpindleSetup>();
        SpindleSetup? setup = found.HasValue ? found.Value : null;
        lock (_lock)
        {
            ObjectDisposedException.ThrowIf(_terminated, _system);
            HookTermination();
            WorkTarget target;
            if (setup is not null && setup.Targets.TryGetValue(settings.Pool, out WorkTarget? supplied))
            {
                if (settings.MinThreads != 0 || settings.MaxThreads != 0)
                {
                    throw new ConfigurationException(
                        $"The Spindle pool '{settings.Pool}' is the application's (SpindleSetup): its thread limits are set in code, not by 'spindle.min-threads' or 'spindle.max-threads'.");
                }
                target = supplied;
            }
            else
            {
                target = CreatedPool(settings);
            }
            if (settings.Lane is not null)
            {
                target = CreateLane(target, dispatcherId, settings);
            }
            return new SpindleExecutorTarget(target, settings.PreferLocal, dispatcherId, prerequisites.EventStream);
        }
    }

    private WorkerPool CreatedPool(DispatcherSettings settings)
    {
        if (_createdPools.TryGetValue(settings.Pool, out var created))
        {
            if ((settings.MinThreads != 0 && settings.MinThreads != created.MinThreads)
                || (settings.MaxThreads != 0 && settings.MaxThreads != created.MaxThreads))
            {
                throw new ConfigurationException(
                    $"The Spindle pool '{settings.Pool}' is shared by dispatchers that give it different thread limits: min-threads {settings.MinThreads} and max-threads {settings.MaxThreads} against {created.MinThreads} and {created.MaxThreads}.");
            }
            return created.Pool;
        }
        var options = new WorkerPoolOptions { Name = $"{_system.Name}/{settings.Pool}" };
        if (settings.MaxThreads != 0)
        {
            options.MaxThreads = settings.MaxThreads;
            options.MinThreads = Math.Min(options.MinThreads, settings.MaxThreads);
        }
        if (settings.MinThreads != 0)
        {
            options.MinThreads = settings.MinThreads;
        }
        var pool = new WorkerPool(options);
        _createdPools.Add(settings.Pool, (pool, settings.MinThreads, settings.MaxThreads));
        return pool;
    }

    private WorkerPoolLane CreateLane(WorkTarget target, string dispatcherId, DispatcherSettings settings)
    {
        if (target is not WorkerPool pool)
        {
            throw new ConfigurationException(
                $"The Spindle target '{settings.Pool}' is a lane already (SpindleSetup): a dispatcher on it cannot ask for a lane of its own ('spindle.lane').");
        }
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions
        {
            Name = dispatcherId,
            Priority = settings.Lane!.Priority,
            Share = settings.Lane.Share,
            MaxConcurrency = settings.Lane.MaxConcurrency,
        });
        _createdLanes.Add(lane);
        return lane;
    }

    private void HookTermination()
    {
        if (!_hooked)
        {
            _system.RegisterOnTermination(OnTerminated);
            _hooked = true;
        }
    }

    private void OnTerminated()
    {
        List<WorkerPoolLane> lanes;
        List<WorkerPool> pools = [];
        lock (_lock)
        {
            _terminated = true;
            lanes = [.. _createdLanes];
            foreach (var created in _createdPools.Values)
            {
                pools.Add(created.Pool);
            }
        }
        // Not waited for: this callback may run on a worker of these pools. Lanes first (a lane of a supplied pool
        // would otherwise live on); a pool's shutdown covers its own lanes anyway.
        foreach (WorkerPoolLane lane in lanes)
        {
            _ = lane.ShutdownAsync(ShutdownMode.Drain);
        }
        foreach (WorkerPool pool in pools)
        {
            _ = pool.ShutdownAsync(ShutdownMode.Drain);
        }
    }
}
