using System;
using System.Threading;
using Akka.Configuration;
using Akka.Dispatch;

namespace Spindle.Akka;

/// <summary>
/// Runs an Akka.NET dispatcher's mailboxes on a Spindle <see cref="WorkerPool"/>, or on a lane of one. Name it in the
/// dispatcher's HOCON: <c>executor = "Spindle.Akka.SpindleExecutorServiceConfigurator, Spindle.Akka"</c>, with its
/// settings in a <c>spindle</c> section of the dispatcher.
/// </summary>
/// <remarks>
/// <para>Settings (all optional):</para>
/// <list type="bullet">
/// <item><c>spindle.pool</c> (default <c>"akka"</c>): the pool's name. A <see cref="SpindleSetup"/> passed to the actor
/// system may hold a pool or lane of the application's under that name; otherwise the actor system creates the pool
/// (named <c>"&lt;system&gt;/&lt;pool&gt;"</c>), shares it between all its dispatchers that name it, and shuts it down
/// when it terminates.</item>
/// <item><c>spindle.min-threads</c>, <c>spindle.max-threads</c> (default 0, Spindle's defaults): the limits of a pool
/// the actor system creates. Dispatchers that share a pool must not give it different limits.</item>
/// <item><c>spindle.lane</c>: run this dispatcher in a lane of its own on the pool (named after the dispatcher), with
/// <c>priority</c> (<c>high</c>, <c>normal</c>, <c>low</c>; default <c>normal</c>), <c>share</c> (default 1) and
/// <c>max-concurrency</c> (default 0: no cap). Dispatchers on lanes of one pool share its threads, and the pool runs
/// the higher classes first: give the dispatchers that must stay punctual (cluster heartbeats, request handlers) a
/// higher class than bulk or blocking work.</item>
/// <item><c>spindle.prefer-local</c> (default <c>off</c>): <c>on</c> queues a mailbox scheduled from one of the pool's
/// workers to that worker's local queue (faster for ping-pong between actors, less fair: a mailbox that always has
/// messages can keep the others of its worker waiting until a thief takes them). Off, every mailbox goes to the
/// pool's global queue, first in first out, as the default dispatcher's do on the built-in thread pool.</item>
/// </list>
/// <para>Scheduling a mailbox allocates nothing: it is queued with its runnable as the state of one static callback.
/// A mailbox scheduled after its pool or lane has shut down (the application disposed it before terminating the actor
/// system) runs on the built-in <see cref="System.Threading.ThreadPool"/> instead, with a warning on the event stream,
/// so no message is stranded.</para>
/// <para>The executor's own <c>Shutdown</c>, which Akka.NET calls when a dispatcher has had no actors for its
/// <c>shutdown-timeout</c>, shuts nothing down: the dispatcher may come back, and the pool's lifetime is the actor
/// system's (or the application's, for a pool it supplied).</para>
/// </remarks>
public sealed class SpindleExecutorServiceConfigurator : ExecutorServiceConfigurator
{
    private readonly DispatcherSettings _settings;
    private readonly IDispatcherPrerequisites _prerequisites;
    private readonly Lock _lock = new();
    private SpindleExecutorTarget? _target; // set once, under _lock, at the first Produce

    /// <summary>Called by Akka.NET with the dispatcher's configuration.</summary>
    /// <param name="config">The dispatcher's HOCON section.</param>
    /// <param name="prerequisites">The actor system's dispatcher prerequisites.</param>
    /// <exception cref="ConfigurationException">The <c>spindle</c> section has a value out of range or of the wrong kind.</exception>
    public SpindleExecutorServiceConfigurator(Config config, IDispatcherPrerequisites prerequisites)
        : base(config, prerequisites)
    {
        ArgumentNullException.ThrowIfNull(prerequisites);
        _settings = DispatcherSettings.Parse(config);
        _prerequisites = prerequisites;
    }

    /// <summary>An executor over the dispatcher's pool or lane (the same one every time).</summary>
    /// <param name="id">The dispatcher's id.</param>
    /// <returns>The executor.</returns>
    /// <exception cref="ConfigurationException">The settings conflict with another dispatcher's, or with the setup's target.</exception>
    public override ExecutorService Produce(string id)
    {
        // Resolved here, not in the constructor: the actor system is still being built when dispatchers are configured.
        lock (_lock)
        {
            _target ??= SystemTargets.For(_prerequisites.Settings.System).Resolve(id, _settings, _prerequisites);
            return new SpindleExecutorService(id, _target);
        }
    }
}
