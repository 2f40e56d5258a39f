using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Proto.Mailbox;

namespace Spindle.ProtoActor;

/// <summary>
/// A Proto.Actor <see cref="IDispatcher"/> that runs mailboxes on a Spindle <see cref="WorkerPool"/> or on one of its
/// <see cref="WorkerPoolLane"/>s: give it to an actor with <see cref="PropsExtensions.WithWorkerPool"/>, which also gives
/// the actor a <see cref="WorkerPoolMailbox"/>, or with <c>Props.WithDispatcher</c>. One dispatcher may serve any number
/// of actors.
/// </summary>
/// <remarks>
/// <para><b>Allocation.</b> Queueing a run allocates nothing: the runner is the work item's state. Proto.Actor's own
/// mailbox makes a new runner for every schedule on a dispatcher other than its default one (64 bytes per message); a
/// <see cref="WorkerPoolMailbox"/> hands over the same runner every time.</para>
/// <para>Each <see cref="Schedule"/> queues one work item: a mailbox run, which processes up to <see cref="Throughput"/>
/// messages and then, when messages remain, schedules the mailbox again. On a lane the run takes one of the lane's
/// slots, so a lane's <see cref="WorkerPoolLane.MaxConcurrency"/> caps how many of its actors run at once.</para>
/// <para><b>Locality.</b> A message one actor sends another during its run, on one of the pool's workers, schedules the
/// receiver's mailbox on that worker's local queue, as an <c>await</c>'s continuation is: it is processed on the worker
/// whose cache holds it. Every other schedule goes to the pool's shared queue, in order: one from outside the pool,
/// and a mailbox rescheduling itself, at the end of its own run (it used up its throughput with messages left) or after
/// an <c>await</c> in an actor, because the worker's local queue is newest first and would run the same mailbox again
/// at once, which would defeat the throughput's purpose of letting other actors run. A lane's items always go to the
/// lane's queue. (One exception: when an actor's awaited task is completed inline during another mailbox's run, for
/// example by that actor's message with <c>ConfigureAwait(false)</c> in the awaiting actor, the awaiting mailbox's
/// reschedule happens inside that run and goes to the local queue like a sent message.)</para>
/// <para><b>Synchronization context.</b> A run executes with the target's
/// <see cref="WorkTarget.SynchronizationContext"/> installed (the previous one is put back afterwards), so an
/// <c>await</c> inside an actor resumes on the pool, or in the lane, unless it uses <c>ConfigureAwait(false)</c>.
/// Proto.Actor's mailbox itself awaits the actor's task with <c>ConfigureAwait(false)</c>: the rest of the mailbox run
/// continues on the thread that completed the actor's task, which, for an <c>await</c> that came back through the
/// context, is one of the pool's threads.</para>
/// <para><b>A faulted run.</b> Proto.Actor's mailbox hands an actor's exception to the actor's supervisor, so its runs do
/// not fault. A run that throws or whose task faults anyway (a failing mailbox statistics hook, a custom mailbox) is
/// counted by <see cref="FaultedRunCount"/> and raised through <see cref="RunFaulted"/>, or written to
/// <see cref="Trace"/> when no handler is attached. It never reaches the pool's
/// <see cref="WorkerPool.UnhandledException"/> policy, which by default fails the process.</para>
/// <para><b>Shutdown and bounds.</b> A mailbox that could not be scheduled would keep its messages forever, and a
/// refusal would throw into the sender. So every run is queued as a continuation of accepted work
/// (<see cref="WorkTarget.UnsafeQueueContinuation{TState}(Action{TState}, TState, bool)"/>): never refused, never
/// cancelled by <see cref="ShutdownMode.CancelPending"/>, and past a lane's <see cref="WorkerPoolLane.QueueLimit"/>
/// (a mailbox is queued at most once at a time whatever its backlog; bound the actor's mailbox instead,
/// <see cref="WorkerPoolMailbox.CreateBounded"/>). The mailbox runs on the pool while the pool runs and drains (a lane's, once the lane has
/// stopped, on the pool's own queue), and on the built-in <see cref="ThreadPool"/> once the pool has stopped, counted
/// by <see cref="WorkerPool.RedirectedCallbackCount"/>.</para>
/// </remarks>
public sealed class WorkerPoolDispatcher : IDispatcher
{
    /// <summary>
    /// The number of messages a mailbox processes per run unless the constructor is given another:
    /// the throughput of Proto.Actor's default dispatcher.
    /// </summary>
    public const int DefaultThroughput = 300;

    // The mailbox (the runner's target) whose run this thread is executing, so that Schedule recognises a message
    // sent during a run, and a mailbox rescheduling itself. Only compared by reference, never dereferenced.
    [ThreadStatic]
    private static object? t_runningMailbox;

    private readonly WorkTarget _target;
    private readonly WorkerPoolSynchronizationContext _context;

    // Bound once here so that queueing does not allocate per schedule (the runner is the work item's state).
    private readonly Action<Func<Task>> _run;

    private long _faultedRunCount;

    /// <summary>Creates a dispatcher that runs mailboxes on <paramref name="target"/>.</summary>
    /// <param name="target">A <see cref="WorkerPool"/> (its own queue) or one of its <see cref="WorkerPoolLane"/>s.</param>
    /// <param name="throughput">How many messages a mailbox processes per run before it lets other work run; the
    /// mailbox reads it as <see cref="Throughput"/>. Defaults to <see cref="DefaultThroughput"/>.</param>
    /// <exception cref="ArgumentNullException"><paramref name="target"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="throughput"/> is zero or negative.</exception>
    public WorkerPoolDispatcher(WorkTarget target, int throughput = DefaultThroughput)
    {
        ArgumentNullException.ThrowIfNull(target);
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(throughput);
        _target = target;
        Throughput = throughput;
        _context = target.SynchronizationContext;
        _run = Run;
    }

    /// <summary>The pool or lane the mailboxes run on.</summary>
    public WorkTarget Target => _target;

    /// <summary>
    /// How many messages a mailbox processes per run; Proto.Actor's mailbox reads it at every message, a
    /// <see cref="WorkerPoolMailbox"/> once per run.
    /// </summary>
    public int Throughput { get; }

    /// <summary>How many runs threw, returned a null task, or returned a task that faulted or was cancelled.</summary>
    public long FaultedRunCount => Interlocked.Read(ref _faultedRunCount);

    /// <summary>
    /// Raised when a run throws, returns a null task, or returns a task that faults or is cancelled (an
    /// <see cref="OperationCanceledException"/> then), on the thread that observed it; the event's
    /// <see cref="UnhandledExceptionEventArgs.IsTerminating"/> is always <see langword="false"/>. An exception thrown by a
    /// handler is written to <see cref="Trace"/> and goes no further; the other handlers still run. With no handler
    /// attached the fault is written to <see cref="Trace"/>.
    /// </summary>
    public event EventHandler<UnhandledExceptionEventArgs>? RunFaulted;

    /// <summary>
    /// Queues a run of <paramref name="runner"/> (a mailbox's run, from Proto.Actor) on the target, without allocating.
    /// Never refused because of shutdown (see the remarks on <see cref="WorkerPoolDispatcher"/>).
    /// </summary>
    /// <param name="runner">The mailbox's run.</param>
    /// <exception cref="ArgumentNullException"><paramref name="runner"/> is null.</exception>
    public void Schedule(Func<Task> runner)
    {
        ArgumentNullException.ThrowIfNull(runner);
        // The local queue is used only when this thread is a worker of the target's pool (the scheduler checks) and
        // never for a lane (whose items go to its queue).
        object? running = t_runningMailbox;
        _target.UnsafeQueueContinuation(_run, runner, preferLocal: running is not null && !ReferenceEquals(runner.Target, running));
    }

    /// <inheritdoc/>
    public override string ToString() =>
        _target is WorkerPoolLane lane
            ? $"WorkerPoolDispatcher (pool '{lane.Pool.Name}', lane '{lane.Name}', throughput {Throughput})"
            : $"WorkerPoolDispatcher (pool '{((WorkerPool)_target).Name}', throughput {Throughput})"; // not a lane: a pool

    private void Run(Func<Task> runner)
    {
        SynchronizationContext? previousContext = SynchronizationContext.Current;
        object? previousMailbox = t_runningMailbox;
        SynchronizationContext.SetSynchronizationContext(_context);
        t_runningMailbox = runner.Target;
        try
        {
            Task? task = runner();
            if (task is null)
            {
                OnRunFaulted(new InvalidOperationException("The mailbox's runner returned a null task."));
            }
            else if (!task.IsCompletedSuccessfully)
            {
                Observe(task);
            }
        }
        catch (Exception exception)
        {
            OnRunFaulted(exception);
        }
        finally
        {
            t_runningMailbox = previousMailbox;
            SynchronizationContext.SetSynchronizationContext(previousContext);
        }
    }

    /// <summary>
    /// Reports <paramref name="task"/> if it faults or is cancelled. Only runs that went asynchronous get here (their
    /// mailbox awaits an actor's task), and they already allocate the mailbox's state machine; this adds a continuation.
    /// </summary>
    private void Observe(Task task)
    {
        if (task.IsCompleted)
        {
            OnRunFaulted(task);
            return;
        }
        task.ContinueWith(
            static (completed, state) => ((WorkerPoolDispatcher)state!).OnRunFaulted(completed),
            this,
            CancellationToken.None,
            TaskContinuationOptions.NotOnRanToCompletion | TaskContinuationOptions.ExecuteSynchronously,
            TaskScheduler.Default);
    }

    private void OnRunFaulted(Task task)
    {
        // Reading Exception marks the fault observed: it never reaches TaskScheduler.UnobservedTaskException.
        Exception exception = task.IsFaulted
            ? (task.Exception!.InnerExceptions.Count == 1 ? task.Exception.InnerException! : task.Exception)
            : new OperationCanceledException("The mailbox's run was cancelled.");
        OnRunFaulted(exception);
    }

    private void OnRunFaulted(Exception exception)
    {
        Interlocked.Increment(ref _faultedRunCount);
        EventHandler<UnhandledExceptionEventArgs>? handlers = RunFaulted;
        if (handlers is null)
        {
            WriteTrace($"A mailbox run on {this} faulted", exception);
            return;
        }
        var args = new UnhandledExceptionEventArgs(exception, isTerminating: false);
        foreach (Delegate handler in handlers.GetInvocationList())
        {
            try
            {
                ((EventHandler<UnhandledExceptionEventArgs>)handler)(this, args);
            }
            catch (Exception handlerException)
            {
                WriteTrace($"A RunFaulted handler of {this} threw", handlerException);
            }
        }
    }

    private static void WriteTrace(string what, Exception exception)
    {
        try
        {
            Trace.TraceError($"{what}: {exception}");
        }
        catch (Exception)
        {
            // A trace listener, or the exception's ToString, that throws must not take the worker down with it.
        }
    }
}
