using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Channels;
using System.Threading.Tasks;
using Proto;
using Proto.Mailbox;

namespace Spindle.ProtoActor;

/// <summary>
/// A Proto.Actor mailbox that schedules itself without allocating: pair it with a <see cref="WorkerPoolDispatcher"/>
/// (<see cref="PropsExtensions.WithWorkerPool(Props, WorkerPoolDispatcher)"/> sets both) and an actor's messages cost
/// the pool no allocation of their own. It processes messages as Proto.Actor's default mailbox does.
/// </summary>
/// <remarks>
/// <para><b>Why it exists.</b> Proto.Actor's default mailbox queues itself on the built-in thread pool directly when it
/// runs on Proto.Actor's default dispatcher, but on any other dispatcher it makes a new delegate each time it schedules
/// a run: 64 bytes per message in a ping-pong, whatever the dispatcher does. This mailbox hands every dispatcher the same
/// delegate, made once with the mailbox. It works with any <see cref="IDispatcher"/>; only a dispatcher that queues that
/// delegate without wrapping it (as <see cref="WorkerPoolDispatcher"/> does) makes the whole path allocation-free.</para>
/// <para><b>Processing.</b> A run processes up to the dispatcher's <see cref="IDispatcher.Throughput"/> messages, each
/// time taking a system message first if one waits, and user messages only while the mailbox is not suspended (the
/// actor suspends it while its supervisor decides on a failure). A message whose handler returns an incomplete task
/// ends the run's loop: the run awaits the task, then ends and reschedules the mailbox if messages remain, so one
/// actor's awaits never hold a worker. An exception from a handler (or a faulted task) goes to the actor's
/// <see cref="IMessageInvoker.EscalateFailure"/>, that is to its supervisor. A message batch
/// (<see cref="IMessageBatch"/>) is unpacked into its messages when posted, and followed by the batch itself when the
/// batch is an <see cref="IAutoRespond"/>. Posting <see cref="Stop"/> cancels the actor's cancellation token at once.
/// The <see cref="IMailboxStatistics"/> hooks are called as Proto.Actor's own mailbox calls them.</para>
/// <para><b>Queues.</b> The constructor takes any <see cref="IMailboxQueue"/> whose <see cref="IMailboxQueue.HasMessages"/>
/// reflects a push at once, as Proto.Actor's <see cref="UnboundedMailboxQueue"/> and
/// <see cref="LockingUnboundedMailboxQueue"/> do. Proto.Actor's <see cref="BoundedMailboxQueue"/> does not (its answer
/// changes only when the mailbox pops, so a message posted as a run ends can wait for the next post):
/// <see cref="CreateBounded"/> uses a bounded queue of its own instead.</para>
/// <para><b>Protocol.</b> <see cref="_status"/> is <see cref="Scheduled"/> from the moment a poster's compare-and-swap
/// takes it from <see cref="Idle"/> until the run it scheduled ends: at most one run exists at a time, and only that run
/// reads the queues' heads and writes <see cref="_suspended"/>. A poster pushes its message (the queue's push is a full
/// fence) and then tries the swap; a run ending sets the status back with an exchange (a full fence) and then looks at
/// the queues. Whichever comes second sees the other's write, so a message is never left without a run.</para>
/// </remarks>
public sealed class WorkerPoolMailbox : IMailbox
{
    private const int Idle = 0;
    private const int Scheduled = 1;

    private readonly IMailboxQueue _systemMessages;
    private readonly IMailboxQueue _userMessages;
    private readonly IMailboxStatistics[] _statistics;

    // Made once: the delegate every dispatcher is handed, so that scheduling a run allocates nothing.
    private readonly Func<Task> _run;

    // Written once by RegisterHandlers (Proto.Actor calls it before it posts Started; a post that comes earlier only
    // queues its message, which Start schedules); read by posters and runs.
    private IMessageInvoker? _invoker;
    private IDispatcher? _dispatcher;

    private int _status;

    // Written and read only by the run that holds the status.
    private bool _suspended;

    /// <summary>
    /// Creates a mailbox over the given queues: Proto.Actor's own queue types fit (for example a
    /// <see cref="LockingUnboundedMailboxQueue"/> for system messages and an <see cref="UnboundedMailboxQueue"/> or a
    /// <see cref="BoundedMailboxQueue"/> for user messages).
    /// </summary>
    /// <param name="systemMessages">The queue of system messages (lifecycle, supervision, watches).</param>
    /// <param name="userMessages">The queue of the actor's own messages.</param>
    /// <param name="statistics">Hooks told of the mailbox's events; may be empty.</param>
    /// <exception cref="ArgumentNullException">A queue, the array or one of its hooks is null.</exception>
    /// <exception cref="ArgumentException">Both queues are the same object.</exception>
    public WorkerPoolMailbox(IMailboxQueue systemMessages, IMailboxQueue userMessages, params IMailboxStatistics[] statistics)
    {
        ArgumentNullException.ThrowIfNull(systemMessages);
        ArgumentNullException.ThrowIfNull(userMessages);
        ArgumentNullException.ThrowIfNull(statistics);
        if (ReferenceEquals(systemMessages, userMessages))
        {
            throw new ArgumentException("The system and user messages need queues of their own.", nameof(userMessages));
        }
        foreach (IMailboxStatistics hook in statistics)
        {
            if (hook is null)
            {
                throw new ArgumentNullException(nameof(statistics), "A mailbox statistics hook is null.");
            }
        }
        _systemMessages = systemMessages;
        _userMessages = userMessages;
        _statistics = statistics.Length == 0 ? [] : (IMailboxStatistics[])statistics.Clone();
        _run = Run;
    }

    /// <summary>
    /// Creates an unbounded mailbox (the queues of Proto.Actor's <see cref="UnboundedMailbox"/>). Fits
    /// <see cref="Props.WithMailbox"/> as a method group: <c>props.WithMailbox(WorkerPoolMailbox.Create)</c>.
    /// </summary>
    public static IMailbox Create() => Create([]);

    /// <summary>Creates an unbounded mailbox (the queues of Proto.Actor's <see cref="UnboundedMailbox"/>).</summary>
    /// <param name="statistics">Hooks told of the mailbox's events.</param>
    /// <exception cref="ArgumentNullException">The array or one of its hooks is null.</exception>
    public static IMailbox Create(params IMailboxStatistics[] statistics) =>
        new WorkerPoolMailbox(new LockingUnboundedMailboxQueue(4), new UnboundedMailboxQueue(), statistics);

    /// <summary>
    /// Creates a mailbox that holds at most <paramref name="size"/> user messages; what a post does when it is full is
    /// <paramref name="fullMode"/>'s (as with Proto.Actor's <see cref="BoundedMailbox"/>, whose queue this does not use:
    /// see the remarks on <see cref="WorkerPoolMailbox"/>).
    /// </summary>
    /// <param name="size">The most user messages the mailbox holds.</param>
    /// <param name="fullMode">What a post to a full mailbox does. <see cref="BoundedChannelFullMode.Wait"/> (the
    /// default) blocks the sender until the actor has taken a message; on a Spindle worker the wait is a blocking region,
    /// so the pool can add a thread, but a sender on the only worker a pool may have waits for an actor that cannot run:
    /// do not send to a full mailbox of an actor on the sender's own one-thread pool. The drop modes never block; they
    /// discard a message as their names say.</param>
    /// <param name="statistics">Hooks told of the mailbox's events.</param>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="size"/> is zero or negative, or
    /// <paramref name="fullMode"/> is not a defined value.</exception>
    /// <exception cref="ArgumentNullException">The array or one of its hooks is null.</exception>
    public static IMailbox CreateBounded(int size, BoundedChannelFullMode fullMode = BoundedChannelFullMode.Wait,
        params IMailboxStatistics[] statistics)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(size);
        if (!Enum.IsDefined(fullMode))
        {
            throw new ArgumentOutOfRangeException(nameof(fullMode), fullMode, "Not a BoundedChannelFullMode value.");
        }
        return new WorkerPoolMailbox(new LockingUnboundedMailboxQueue(4), new BoundedMessageQueue(size, fullMode), statistics);
    }

    /// <summary>How many user messages wait in the mailbox.</summary>
    public int UserMessageCount => _userMessages.Length;

    /// <summary>
    /// Queues one of the actor's messages and schedules a run if none is scheduled. A message batch
    /// (<see cref="IMessageBatch"/>, bare or in a <see cref="MessageEnvelope"/>) is queued as its messages, followed by the
    /// batch itself when it is an <see cref="IAutoRespond"/>.
    /// </summary>
    /// <param name="msg">The message.</param>
    /// <exception cref="ArgumentNullException"><paramref name="msg"/> is null (the queue would read it as empty).</exception>
    public void PostUserMessage(object msg)
    {
        ArgumentNullException.ThrowIfNull(msg);
        bool pushed = false;
        try
        {
            if (MessageEnvelope.UnwrapMessage(msg) is IMessageBatch batch)
            {
                foreach (object message in batch.GetMessages())
                {
                    _userMessages.Push(message);
                    pushed = true;
                    Posted(message);
                }
                if (batch is IAutoRespond)
                {
                    // The batch itself comes last, so that its automatic response follows every message it carried.
                    _userMessages.Push(msg);
                    pushed = true;
                }
            }
            else
            {
                _userMessages.Push(msg);
                pushed = true;
            }
            Posted(msg);
        }
        finally
        {
            // A statistics hook that throws goes back to the sender, but what was queued still gets its run.
            if (pushed)
            {
                Schedule();
            }
        }
    }

    /// <summary>
    /// Queues a system message (Proto.Actor's lifecycle and supervision messages) and schedules a run if none is
    /// scheduled. <see cref="Stop"/> also cancels the actor's cancellation token at once.
    /// </summary>
    /// <param name="msg">A <see cref="SystemMessage"/>.</param>
    /// <exception cref="ArgumentNullException"><paramref name="msg"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="msg"/> is not a <see cref="SystemMessage"/>.</exception>
    public void PostSystemMessage(object msg)
    {
        ArgumentNullException.ThrowIfNull(msg);
        if (msg is not SystemMessage)
        {
            throw new ArgumentException(
                $"A system message must implement {nameof(SystemMessage)}; {msg.GetType()} does not. Post it as a user message.",
                nameof(msg));
        }
        _systemMessages.Push(msg);
        try
        {
            if (msg is Stop)
            {
                _invoker?.CancellationTokenSource?.Cancel();
            }
            Posted(msg);
        }
        finally
        {
            // A callback on the actor's token or a statistics hook that throws goes back to the sender, but the message
            // still gets its run (a Stop that never ran would leave whoever awaits the actor's stop waiting for ever).
            Schedule();
        }
    }

    /// <summary>
    /// Called by Proto.Actor when it spawns the actor, before the actor's first message: the actor's context, which
    /// handles the messages, and the dispatcher the mailbox's runs go to.
    /// </summary>
    /// <param name="invoker">The actor's context.</param>
    /// <param name="dispatcher">The dispatcher of the actor's props.</param>
    /// <exception cref="ArgumentNullException">An argument is null.</exception>
    /// <exception cref="InvalidOperationException">The mailbox already has its handlers: a mailbox belongs to one
    /// actor (give <see cref="Props.WithMailbox"/> a producer that makes a new mailbox each time).</exception>
    public void RegisterHandlers(IMessageInvoker invoker, IDispatcher dispatcher)
    {
        ArgumentNullException.ThrowIfNull(invoker);
        ArgumentNullException.ThrowIfNull(dispatcher);
        if (Interlocked.CompareExchange(ref _invoker, invoker, null) is not null)
        {
            throw new InvalidOperationException(
                "This mailbox already serves an actor: a mailbox belongs to one actor, so the props' mailbox producer must make a new one each time.");
        }
        Interlocked.Exchange(ref _dispatcher, dispatcher);
    }

    /// <summary>
    /// Called by Proto.Actor once the actor is spawned (after it posted <see cref="Started"/>): tells the statistics hooks,
    /// and schedules a run for anything posted before the dispatcher was known.
    /// </summary>
    public void Start()
    {
        foreach (IMailboxStatistics hook in _statistics)
        {
            hook.MailboxStarted();
        }
        // A message posted before RegisterHandlers (only possible for a named actor found by its name in the instant
        // between its registration and that call) only queued itself. Scheduling it here, after Started was posted,
        // keeps Started first. The exchange on the status (in Schedule) or Started's own post already did it, usually.
        if (_systemMessages.HasMessages || _userMessages.HasMessages)
        {
            Schedule();
        }
    }

    /// <inheritdoc/>
    public override string ToString() =>
        $"WorkerPoolMailbox ({_userMessages.Length} user messages, {(Volatile.Read(ref _status) == Scheduled ? "scheduled" : "idle")})";

    private void Posted(object message)
    {
        foreach (IMailboxStatistics hook in _statistics)
        {
            hook.MessagePosted(message);
        }
    }

    private void Received(object message)
    {
        foreach (IMailboxStatistics hook in _statistics)
        {
            hook.MessageReceived(message);
        }
    }

    private void Schedule()
    {
        // Without a dispatcher the message waits for Start, which Proto.Actor calls after RegisterHandlers.
        IDispatcher? dispatcher = Volatile.Read(ref _dispatcher);
        if (dispatcher is null || Interlocked.CompareExchange(ref _status, Scheduled, Idle) != Idle)
        {
            return;
        }
        try
        {
            dispatcher.Schedule(_run);
        }
        catch
        {
            // The run was not queued: give the status back so that the next post can try again, rather than leave
            // the mailbox marked scheduled with no run to clear it.
            Volatile.Write(ref _status, Idle);
            throw;
        }
    }

    /// <summary>One run: returns a completed task unless a message's handler went asynchronous.</summary>
    private Task Run()
    {
        Debug.Assert(Volatile.Read(ref _status) == Scheduled, "A run must hold the mailbox's status.");
        Task? pending;
        try
        {
            pending = ProcessMessages();
        }
        catch
        {
            // Only the supervisor's escalation can throw out of the loop: the mailbox must still be released, or its
            // messages would never run again.
            EndRun();
            throw;
        }
        if (pending is not null)
        {
            return pending;
        }
        EndRun();
        return Task.CompletedTask;
    }

    /// <summary>
    /// Processes up to the throughput's messages; returns the task that finishes the run when a handler went
    /// asynchronous, null when the run ended here.
    /// </summary>
    private Task? ProcessMessages()
    {
        IMessageInvoker invoker = _invoker!;
        object? message = null;
        try
        {
            int throughput = _dispatcher!.Throughput;
            for (int i = 0; i < throughput; i++)
            {
                message = _systemMessages.Pop();
                Task handled;
                if (message is not null)
                {
                    var system = (SystemMessage)message; // PostSystemMessage admits nothing else
                    if (system is SuspendMailbox)
                    {
                        _suspended = true;
                    }
                    else if (system is ResumeMailbox)
                    {
                        _suspended = false;
                    }
                    handled = invoker.InvokeSystemMessageAsync(system);
                }
                else if (_suspended || (message = _userMessages.Pop()) is null)
                {
                    break;
                }
                else
                {
                    handled = invoker.InvokeUserMessageAsync(message);
                }
                if (!handled.IsCompletedSuccessfully)
                {
                    return FinishAfter(handled, message);
                }
                Received(message);
            }
        }
        catch (Exception exception)
        {
            exception.CheckFailFast();
            invoker.EscalateFailure(exception, message);
        }
        return null;
    }

    /// <summary>Waits for a handler that went asynchronous, reports how it ended, and ends the run.</summary>
    private async Task FinishAfter(Task handled, object message)
    {
        try
        {
            try
            {
                await handled.ConfigureAwait(false);
                Received(message);
            }
            catch (Exception exception)
            {
                exception.CheckFailFast();
                _invoker!.EscalateFailure(exception, message);
            }
        }
        finally
        {
            EndRun();
        }
    }

    /// <summary>Gives the status back and schedules another run if messages that may run now are waiting.</summary>
    private void EndRun()
    {
        bool suspended = _suspended; // read while this run still holds the status
        Interlocked.Exchange(ref _status, Idle); // a full fence before the queues are read
        if (_systemMessages.HasMessages || (!suspended && _userMessages.HasMessages))
        {
            Schedule();
            return;
        }
        foreach (IMailboxStatistics hook in _statistics)
        {
            hook.MailboxEmpty();
        }
    }
}
