using System;
using System.Threading;
using Akka.Configuration;
using Akka.Dispatch;
using Akka.Event;

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
/// <item><c>spindle.prefer-local</c> (default <c>on</c>): a message one actor sends another while it runs on one of the
/// pool's workers schedules the receiver's mailbox on that worker's local queue, where the message is still in the
/// core's cache (ping-pong between actors runs about twice as fast); mailboxes scheduled from outside the pool, and a
/// mailbox rescheduling itself after its throughput, go to the pool's global queue in order. The local queue runs newest
/// first: a mailbox left at its far end waits for an idle worker to steal it, or for its worker's ageing rule (one
/// item each 20 ms). <c>off</c> sends every mailbox to the global queue, first in first out, as the default
/// dispatcher's go on the built-in thread pool. A lane ignores it: a lane's items always go to the lane's queue.</item>
/// </list>
/// <para>Settings are read from the dispatcher's own section only (not from the default dispatcher's, which Akka.NET
/// gives every dispatcher as a fallback): a dispatcher without a <c>spindle</c> section runs on the pool
/// <c>"akka"</c>, without a lane. Mistakes are reported where the dispatcher is first looked up (the actor system's
/// start for the default dispatcher, <c>ActorOf</c> for others) as a <see cref="ConfigurationException"/>, which
/// Akka.NET, creating the configurator by reflection, wraps in a
/// <see cref="System.Reflection.TargetInvocationException"/>.</para>
/// <para>Scheduling a mailbox allocates nothing: it is queued with its runnable as the state of one static callback,
/// as a continuation of accepted work (<see cref="WorkTarget.UnsafeQueueContinuation{TState}(Action{TState}, TState, bool)"/>),
/// so it is never refused, cancelled by <see cref="ShutdownMode.CancelPending"/> or held back by a lane's bound: a
/// mailbox with messages always runs. After its pool has stopped (the application disposed it before terminating the
/// actor system) it runs on the built-in <see cref="System.Threading.ThreadPool"/>, with a warning on the event stream.</para>
/// <para>The executor's own <c>Shutdown</c>, which Akka.NET calls when a dispatcher has had no actors for its
/// <c>shutdown-timeout</c>, shuts nothing down: the dispatcher may come back, and the pool's lifetime is the actor
/// system's (or the application's, for a pool it supplied).</para>
/// </remarks>
public sealed class SpindleExecutorServiceConfigurator : ExecutorServiceConfigurator
{
    private readonly string _dispatcherId;
    private readonly DispatcherSettings _settings;
    private readonly SpindleSetup? _setup;
    private readonly SystemTargets _targets;
    private readonly EventStream _events;
    private readonly Lock _lock = new();
    private SpindleExecutorTarget? _target; // set once, under _lock, at the first Produce

    /// <summary>Called by Akka.NET with the dispatcher's configuration, when the dispatcher is first looked up.</summary>
    /// <param name="config">The dispatcher's HOCON section.</param>
    /// <param name="prerequisites">The actor system's dispatcher prerequisites.</param>
    /// <exception cref="ConfigurationException">The dispatcher's <c>spindle</c> section has a value out of range or of
    /// the wrong kind, or conflicts with the <see cref="SpindleSetup"/> or with another dispatcher's settings for the
    /// same pool (Akka.NET, which calls this constructor by reflection, passes it on inside a
    /// <see cref="System.Reflection.TargetInvocationException"/>).</exception>
    public SpindleExecutorServiceConfigurator(Config config, IDispatcherPrerequisites prerequisites)
        : base(config, prerequisites)
    {
        ArgumentNullException.ThrowIfNull(config);
        ArgumentNullException.ThrowIfNull(prerequisites);
        // Akka.NET hands a dispatcher its own section with the default dispatcher's as a fallback, so a 'spindle'
        // section there would reach every dispatcher; only the dispatcher's own section counts.
        _dispatcherId = config.HasPath("id") ? config.GetString("id") : "(unnamed dispatcher)";
        Config own = config.HasPath("id") && prerequisites.Settings.Config.HasPath(_dispatcherId)
            ? prerequisites.Settings.Config.GetConfig(_dispatcherId)
            : config;
        _settings = DispatcherSettings.Parse(own);
        var setup = prerequisites.Settings.Setup.Get<SpindleSetup>();
        _setup = setup.HasValue ? setup.Value : null;
        _events = prerequisites.EventStream;
        _targets = SystemTargets.For(prerequisites.Settings.System);
        _targets.Declare(_dispatcherId, _settings, _setup);
    }

    /// <summary>
    /// An executor over the dispatcher's pool or lane (the same one every time). Never throws: Akka.NET calls it while
    /// scheduling a mailbox, which an exception would leave stuck; a target it cannot provide (the actor system has
    /// terminated, the application's pool was disposed) becomes the built-in thread pool, with an error on the event
    /// stream.
    /// </summary>
    /// <param name="id">The dispatcher's id.</param>
    /// <returns>The executor.</returns>
    public override ExecutorService Produce(string id)
    {
        lock (_lock)
        {
            _target ??= new SpindleExecutorTarget(
                _targets.Resolve(_dispatcherId, _settings, _setup, ReportError), _settings.PreferLocal, _dispatcherId, _events, _targets);
            return new SpindleExecutorService(id, _target);
        }
    }

    private void ReportError(string message, Exception? cause) =>
        _events.Publish(new Error(cause, _dispatcherId, typeof(SpindleExecutorServiceConfigurator), message));
}
