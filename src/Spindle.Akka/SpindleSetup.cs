using System;
using System.Collections.Generic;
using System.Collections.Immutable;
using Akka.Actor.Setup;

namespace Spindle.Akka;

/// <summary>
/// Worker pools and lanes that the application owns and hands to an actor system by name, for dispatchers whose
/// <c>spindle.pool</c> setting names them (see <see cref="SpindleExecutorServiceConfigurator"/>). Pass it with
/// <c>ActorSystemSetup.Create(BootstrapSetup.Create().WithConfig(hocon), setup)</c>.
/// </summary>
/// <remarks>
/// The actor system never shuts these targets down: the application does, after the actor system has terminated. A
/// name the setup does not hold makes the actor system create a pool of its own under that name (and shut it down when
/// it terminates). The setup is immutable: <see cref="WithTarget(string, WorkTarget)"/> returns a new one.
/// </remarks>
public sealed class SpindleSetup : Setup
{
    private readonly ImmutableDictionary<string, WorkTarget> _targets;

    /// <summary>An empty setup: every dispatcher's pool is created by the actor system.</summary>
    public SpindleSetup()
        : this(ImmutableDictionary.Create<string, WorkTarget>(StringComparer.Ordinal))
    {
    }

    private SpindleSetup(ImmutableDictionary<string, WorkTarget> targets) => _targets = targets;

    /// <summary>The targets by name.</summary>
    public IReadOnlyDictionary<string, WorkTarget> Targets => _targets;

    /// <summary>
    /// A setup that also holds <paramref name="target"/> under <paramref name="name"/>: a <see cref="WorkerPool"/>, or a
    /// <see cref="WorkerPoolLane"/> (then the dispatcher runs its mailboxes in that lane, and its HOCON must not ask
    /// for a lane of its own).
    /// </summary>
    /// <param name="name">The name dispatchers give in <c>spindle.pool</c>.</param>
    /// <param name="target">The pool or lane; not shut down by the actor system.</param>
    /// <returns>A new setup.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="name"/> or <paramref name="target"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="name"/> is empty or white space, or already taken; or
    /// <paramref name="target"/> is a lane with a queue limit (a mailbox cannot wait for room or be refused).</exception>
    public SpindleSetup WithTarget(string name, WorkTarget target)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(name);
        ArgumentNullException.ThrowIfNull(target);
        if (_targets.ContainsKey(name))
        {
            throw new ArgumentException($"The setup already holds a target named '{name}'.", nameof(name));
        }
        if (target is WorkerPoolLane { QueueLimit: not null } lane)
        {
            throw new ArgumentException(
                $"The lane '{lane.Name}' has a queue limit: an actor's mailbox cannot wait for room or be refused, so a dispatcher needs an unbounded lane.",
                nameof(target));
        }
        return new SpindleSetup(_targets.Add(name, target));
    }
}
