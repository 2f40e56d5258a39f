using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using Akka.Actor;
using Akka.Configuration;

namespace Spindle.Akka;

/// <summary>
/// One actor system's Spindle targets: the pools it creates (by name, shared between its dispatchers) and the lanes it
/// creates (one per dispatcher that asks for a lane), all shut down when the system terminates; the targets the
/// application supplies through <see cref="SpindleSetup"/> are never shut down here.
/// </summary>
/// <remarks>
/// <para>Two steps, so that a configuration mistake is an exception where the dispatcher is looked up (the actor
/// system's start for the default dispatcher, <c>ActorOf</c> for the others), never a mailbox that cannot run:
/// <see cref="Declare"/>, from a dispatcher's configurator, checks its settings against the setup and against what the
/// other dispatchers declared for the same pool, and throws; <see cref="Resolve"/>, at the dispatcher's first executor
/// (inside Akka.NET's scheduling of a mailbox, where an exception would leave the mailbox marked scheduled for ever),
/// creates what was declared and never throws: what it cannot provide (the system has terminated, a supplied pool was
/// disposed) becomes a target on the built-in pool, reported on the event stream.</para>
/// <para>State: everything below is guarded by <see cref="_lock"/>; configurators and executors come from any thread.
/// The termination callback marks the registry terminated under the lock, then shuts down what it created outside it,
/// without waiting.</para>
/// </remarks>
internal sealed class SystemTargets
{
    private static readonly ConditionalWeakTable<ActorSystem, SystemTargets> s_systems = new();

    private readonly Lock _lock = new();
    private readonly ActorSystem _system;
    private readonly Dictionary<string, PoolDeclaration> _declared = new(StringComparer.Ordinal);
    private readonly List<WorkerPoolLane> _createdLanes = [];
    private bool _hooked;
    private bool _terminated;

    private SystemTargets(ActorSystem system) => _system = system;

    public static SystemTargets For(ActorSystem system) => s_systems.GetValue(system, static s => new SystemTargets(s));

    /// <summary>Whether the actor system has terminated (its targets are being shut down or have been).</summary>
    public bool Terminated
    {
        get
        {
            lock (_lock)
            {
                return _terminated;
            }
        }
    }

    /// <summary>
    /// A dispatcher's configurator: checks <paramref name="settings"/> against the setup's targets and the other
    /// dispatchers' declarations for the same pool, and records them.
    /// </summary>
    /// <exception cref="ConfigurationException">The settings conflict.</exception>
    public void Declare(string dispatcherId, DispatcherSettings settings, SpindleSetup? setup)
    {
        if (setup is not null && setup.Targets.TryGetValue(settings.Pool, out WorkTarget? supplied))
        {
            if (settings.MinThreads != 0 || settings.MaxThreads != 0)
            {
                throw new ConfigurationException(
                    $"Dispatcher '{dispatcherId}': the Spindle pool '{settings.Pool}' is the application's (SpindleSetup), so its thread limits are set in code; remove 'spindle.min-threads' and 'spindle.max-threads'.");
            }
            if (settings.Lane is not null && supplied is not WorkerPool)
            {
                throw new ConfigurationException(
                    $"Dispatcher '{dispatcherId}': the Spindle target '{settings.Pool}' is a lane (SpindleSetup), so the dispatcher cannot have a lane of its own; remove 'spindle.lane'.");
            }
            return;
        }
        lock (_lock)
        {
            if (!_declared.TryGetValue(settings.Pool, out PoolDeclaration? declaration))
            {
                _declared.Add(settings.Pool, new PoolDeclaration(settings.MinThreads, settings.MaxThreads, dispatcherId));
                return;
            }
            declaration.Merge(dispatcherId, settings);
        }
    }

    /// <summary>The target of a dispatcher at its first executor. Never throws (see the class remarks).</summary>
    public WorkTarget? Resolve(string dispatcherId, DispatcherSettings settings, SpindleSetup? setup, Action<string, Exception?> reportError)
    {
        try
        {
            lock (_lock)
            {
                if (_terminated)
                {
                    reportError($"Dispatcher '{dispatcherId}' started after its actor system terminated: its mailboxes run on the built-in thread pool.", null);
                    return null;
                }
                if (!_hooked)
                {
                    _system.RegisterOnTermination(OnTerminated);
                    _hooked = true;
                }
                WorkTarget target = setup is not null && setup.Targets.TryGetValue(settings.Pool, out WorkTarget? supplied)
                    ? supplied
                    : CreatedPool(settings.Pool);
                if (settings.Lane is not null)
                {
                    WorkerPoolLane lane = ((WorkerPool)target).CreateLane(new LaneOptions
                    {
                        Name = dispatcherId,
                        Priority = settings.Lane.Priority,
                        Share = settings.Lane.Share,
                        MaxConcurrency = settings.Lane.MaxConcurrency,
                    });
                    _createdLanes.Add(lane);
                    target = lane;
                }
                return target;
            }
        }
        catch (Exception e) when (e is ObjectDisposedException or ArgumentException or InvalidOperationException)
        {
            reportError($"Dispatcher '{dispatcherId}' could not get its Spindle target '{settings.Pool}': its mailboxes run on the built-in thread pool.", e);
            return null;
        }
    }

    private WorkerPool CreatedPool(string name)
    {
        PoolDeclaration declaration = _declared[name];
        if (declaration.Pool is null)
        {
            var options = new WorkerPoolOptions { Name = $"{_system.Name}/{name}" };
            if (declaration.MaxThreads != 0)
            {
                options.MaxThreads = declaration.MaxThreads;
                options.MinThreads = Math.Min(options.MinThreads, declaration.MaxThreads);
            }
            if (declaration.MinThreads != 0)
            {
                options.MinThreads = declaration.MinThreads;
            }
            declaration.Pool = new WorkerPool(options);
        }
        return declaration.Pool;
    }

    private void OnTerminated()
    {
        List<WorkerPoolLane> lanes;
        List<WorkerPool> pools = [];
        lock (_lock)
        {
            _terminated = true;
            lanes = [.. _createdLanes];
            foreach (PoolDeclaration declaration in _declared.Values)
            {
                if (declaration.Pool is not null)
                {
                    pools.Add(declaration.Pool);
                }
            }
        }
        // Not waited for. Lanes first: a lane of a supplied pool would otherwise live on (a created pool's shutdown
        // covers its lanes anyway).
        foreach (WorkerPoolLane lane in lanes)
        {
            _ = lane.ShutdownAsync(ShutdownMode.Drain);
        }
        foreach (WorkerPool pool in pools)
        {
            _ = pool.ShutdownAsync(ShutdownMode.Drain);
        }
    }

    /// <summary>
    /// What the dispatchers naming one created pool asked of it: the limits any of them set (0: not set), who set each
    /// first, and the pool once made (under the registry's lock).
    /// </summary>
    private sealed class PoolDeclaration(int minThreads, int maxThreads, string dispatcherId)
    {
        public int MinThreads { get; private set; } = minThreads;

        public int MaxThreads { get; private set; } = maxThreads;

        private string? _minSetBy = minThreads != 0 ? dispatcherId : null;
        private string? _maxSetBy = maxThreads != 0 ? dispatcherId : null;

        public WorkerPool? Pool { get; set; }

        public void Merge(string dispatcherId, DispatcherSettings settings)
        {
            int min = settings.MinThreads != 0 ? settings.MinThreads : MinThreads;
            int max = settings.MaxThreads != 0 ? settings.MaxThreads : MaxThreads;
            if (settings.MinThreads != 0 && MinThreads != 0 && settings.MinThreads != MinThreads)
            {
                throw Conflict(dispatcherId, settings.Pool, "min-threads", settings.MinThreads, MinThreads, _minSetBy!);
            }
            if (settings.MaxThreads != 0 && MaxThreads != 0 && settings.MaxThreads != MaxThreads)
            {
                throw Conflict(dispatcherId, settings.Pool, "max-threads", settings.MaxThreads, MaxThreads, _maxSetBy!);
            }
            if (max != 0 && min > max)
            {
                throw new ConfigurationException(
                    $"Dispatcher '{dispatcherId}': the Spindle pool '{settings.Pool}' would have min-threads {min} above max-threads {max} (set by dispatchers '{_minSetBy ?? dispatcherId}' and '{_maxSetBy ?? dispatcherId}').");
            }
            if (Pool is not null && (min != MinThreads || max != MaxThreads))
            {
                throw new ConfigurationException(
                    $"Dispatcher '{dispatcherId}': the Spindle pool '{settings.Pool}' is running already, so its thread limits can no longer be set; set them on the dispatcher that is looked up first.");
            }
            _minSetBy ??= settings.MinThreads != 0 ? dispatcherId : null;
            _maxSetBy ??= settings.MaxThreads != 0 ? dispatcherId : null;
            MinThreads = min;
            MaxThreads = max;
        }

        private static ConfigurationException Conflict(string dispatcherId, string pool, string setting, int value, int existing, string setBy) =>
            new($"Dispatcher '{dispatcherId}' sets 'spindle.{setting}' of the Spindle pool '{pool}' to {value}, but dispatcher '{setBy}' set it to {existing}: dispatchers that share a pool must agree on its limits.");
    }
}
