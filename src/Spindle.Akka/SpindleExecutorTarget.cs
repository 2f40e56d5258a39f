using System.Threading;
using Akka.Event;

namespace Spindle.Akka;

/// <summary>
/// What a dispatcher's executors queue to: its pool or lane, and how. One per dispatcher, made at its first executor;
/// counts the mailboxes that had to run on the built-in pool because the target had shut down.
/// </summary>
internal sealed class SpindleExecutorTarget(WorkTarget target, bool preferLocal, string dispatcherId, EventStream events)
{
    private long _redirected;

    public WorkTarget Target { get; } = target;

    public bool PreferLocal { get; } = preferLocal;

    /// <summary>Mailboxes run on the built-in pool because the target had shut down.</summary>
    public long RedirectedCount => Interlocked.Read(ref _redirected);

    /// <summary>A mailbox went to the built-in pool: counted, and reported once on the event stream.</summary>
    public void OnRedirected()
    {
        if (Interlocked.Increment(ref _redirected) == 1)
        {
            events.Publish(new Warning(dispatcherId, typeof(SpindleExecutorServiceConfigurator),
                $"The Spindle target '{Target}' of dispatcher '{dispatcherId}' has shut down while the actor system runs: its mailboxes now run on the built-in thread pool. Shut Spindle pools down after the actor system has terminated."));
        }
    }
}
