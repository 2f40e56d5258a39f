using System.Threading;
using Akka.Event;

namespace Spindle.Akka;

/// <summary>
/// What a dispatcher's executors queue to: its pool or lane (null: the built-in pool), and how. One per dispatcher,
/// made at its first executor. Reports once when its target has shut down under a running actor system.
/// </summary>
internal sealed class SpindleExecutorTarget(WorkTarget? target, bool preferLocal, string dispatcherId, EventStream events, SystemTargets system)
{
    private int _warned;

    public WorkTarget? Target { get; } = target;

    public bool PreferLocal { get; } = preferLocal;

    /// <summary>
    /// After a mailbox was queued: if the target has shut down while the actor system runs, the mailbox went on (to the
    /// pool's queue, or the built-in pool once the pool stopped): reported once on the event stream.
    /// </summary>
    public void CheckStillOpen()
    {
        bool shutDown = Target switch
        {
            WorkerPool pool => pool.IsShutdownStarted,
            WorkerPoolLane lane => lane.IsShutdownStarted,
            _ => false,
        };
        if (shutDown && Volatile.Read(ref _warned) == 0 && !system.Terminated && Interlocked.Exchange(ref _warned, 1) == 0)
        {
            events.Publish(new Warning(dispatcherId, typeof(SpindleExecutorServiceConfigurator),
                $"The Spindle target '{Target}' of dispatcher '{dispatcherId}' has shut down while the actor system runs: its mailboxes still run, on the pool while it drains and then on the built-in thread pool. Shut Spindle pools down after the actor system has terminated."));
        }
    }
}
