using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Diagnostics.CodeAnalysis;
using System.Threading;
using System.Diagnostics.Tracing;
using Spindle.IO;
using Spindle.Lanes;
using Spindle.Telemetry;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Tasks;
using Spindle.Threading;
using Spindle.Timers;
using Spindle.Registrations;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle;

/// <summary>
/// An isolated pool of worker threads: its own threads, queues, options and counters, independent of
/// <see cref="ThreadPool"/> and of every other <see cref="WorkerPool"/> in the process.
/// </summary>
/// <remarks>
/// <para>Work queued from a worker of this pool goes to that worker's local ring (newest first, stealable by idle
/// workers); work queued from any other thread goes to a lock-free global queue that workers take in batches and
/// look at every few dozen items, so outside work is never starved by local work.</para>
/// <para>Idle workers search briefly (longer when cores are free, not at all when the pool's threads occupy most of
/// them), then park in LIFO order on a per-thread futex-style blocker. At most about half the workers search at once.</para>
/// <para>This type is the public façade: it validates arguments, orchestrates the pool's lifetime and forwards to the
/// components that own the state (see docs/ARCHITECTURE.md): the scheduler (work sources and the admission state), the
/// item runner, the idle coordinator (search, park, wake), the thread controller (limits, threads, lifetime), the stall
/// monitor, the dedicated threads, the timer service, the wait registry and the task bridge. The partial files hold its
/// public surface by concern: <c>WorkerPool.Queueing.cs</c>, <c>WorkerPool.Threads.cs</c>, <c>WorkerPool.Tasks.cs</c>,
/// <c>WorkerPool.Timers.cs</c>, <c>WorkerPool.Waits.cs</c> and <c>WorkerPool.Shutdown.cs</c>.</para>
/// </remarks>
public sealed partial class WorkerPool : WorkTarget, IDisposable, IAsyncDisposable, IPoolHost, IPoolReadings
{
    // The components, created by the constructor and never replaced. Each owns its state and lock; the façade holds
    // no mutable state of its own besides the lazily created TimeProvider, the event's handler list and the background
    // finisher that makes disposal stop waiting (WorkerPool.Shutdown.cs).
    private readonly WorkerPoolOptions _options;
    private readonly ItemRunner _runner;
    private readonly Scheduler _scheduler;
    private readonly ThreadController _threads;
    private readonly DedicatedThreads _dedicated;
    private readonly TimerService _timers;
    private readonly WaitRegistry _waits;
    private readonly PoolIo _io;
    private WorkerPoolTimeProvider? _timeProvider;

    /// <summary>Creates a pool with default options.</summary>
    public WorkerPool()
        : this(new WorkerPoolOptions())
    {
    }

    /// <summary>Creates a pool. The options are validated and copied.</summary>
    /// <exception cref="ArgumentNullException"><paramref name="options"/> or its name is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException">A thread count, the idle timeout, the stuck-item threshold or the stack
    /// size is out of range, or min exceeds max.</exception>
    /// <exception cref="ArgumentException">The name or thread name prefix is empty.</exception>
    public WorkerPool(WorkerPoolOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        _options = options.Validate();
        // Wiring, in dependency order. The back edges (the idle coordinator and the scheduler need the thread controller
        // and the monitor, which need them) are set once by Connect, here, before any thread of the pool exists.
        _runner = new ItemRunner(this);
        var idle = new IdleCoordinator(_options);
        _scheduler = new Scheduler(idle, _runner, _options.LaneStarvationIntervalMs);
        var starts = new ThreadStarts(_options);
        _timers = new TimerService(_options, _scheduler, _runner, starts);
        _threads = new ThreadController(this, _options, _scheduler, idle, _runner, _timers, starts);
        var monitor = new StallMonitor(_options, _scheduler, idle, _threads, RarePathWarmUp.PrepareNext);
        var relief = new OutsideRelief(this, _options, _scheduler, idle, _threads, _runner);
        idle.Connect(_scheduler, _threads, monitor, relief);
        _scheduler.Connect(_threads, monitor, relief);
        _threads.Connect(monitor);
        if (_options.DetectsStuckItems)
        {
            _timers.Connect(new StuckItemDetector(this, _options, _threads, relief));
        }
        _dedicated = new DedicatedThreads(this, _options, _scheduler, _threads, _runner);
        _waits = new WaitRegistry(this, _options, _scheduler, _timers);
        Bind(new TaskBridge(this, _scheduler, _threads, _dedicated), lane: null, _options.FlowExecutionContext);
        _io = new PoolIo(_options.Name, _options.ThreadNamePrefixOrName, _scheduler, starts);
        _scheduler.ConnectMetrics(new PoolMetrics(this, _options.MeterFactory));
        RetiredSegmentTrimmer.Start(_scheduler);
    }

    /// <summary>The pool's instruments on the <c>Spindle</c> meter (disposed when the pool stops).</summary>
    internal PoolMetrics Metrics => _scheduler.Metrics;

    /// <summary>
    /// Creates a lane: a queue with its own priority class, share, concurrency cap and bound, served by this pool's
    /// threads. See <see cref="WorkerPoolLane"/>. Lanes are meant to be few (tens): a dispatch that finds lane work
    /// looks at the lanes of the classes involved.
    /// </summary>
    /// <param name="options">The lane's settings; validated and copied.</param>
    /// <returns>The lane, open for work until it or this pool is shut down.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="options"/> or its name is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException">The priority, share, cap, limit or full mode is out of range.</exception>
    /// <exception cref="ArgumentException">The name is empty.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public WorkerPoolLane CreateLane(LaneOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        LaneOptions validated = options.Validate();
        var lane = new Lane(_scheduler.Lanes, _scheduler, validated);
        var result = new WorkerPoolLane(this, lane, new TaskBridge(this, _scheduler, _threads, _dedicated, lane));
        if (!_scheduler.TryAddLane(lane))
        {
            ThrowShutDown();
        }
        return result;
    }

    /// <summary>The lanes of this pool that have not stopped (a snapshot; the pool's own queue is not among them).</summary>
    /// <remarks>A lane leaves the list when it stops: after its own shutdown has drained or cancelled its work, or when
    /// the pool stops (lanes the pool's stop left with leftovers included, while the pool sweeps them).</remarks>
    public System.Collections.Generic.IReadOnlyList<WorkerPoolLane> Lanes => Array.ConvertAll(_scheduler.Lanes.LiveLanes(), static lane => (WorkerPoolLane)lane.Handle);

    /// <summary>The scheduler, for the queueing surface shared with lanes.</summary>
    internal Scheduler SchedulerCore => _scheduler;

    /// <summary>The dedicated threads, for the queueing surface's long-running items.</summary>
    internal DedicatedThreads DedicatedCore => _dedicated;

    /// <summary>The pool's name, from <see cref="WorkerPoolOptions.Name"/>.</summary>
    public string Name => _options.Name;

    /// <summary>The pool's current minimum thread count (from the options, or the last <see cref="SetThreadLimits(int, int)"/>).</summary>
    public int MinThreads => _threads.MinThreads;

    /// <summary>The pool's current maximum worker thread count (from the options, or the last <see cref="SetThreadLimits(int, int)"/>).</summary>
    public int MaxThreads => _threads.MaxThreads;

    /// <summary>How long idle threads above the minimum wait before they exit, from <see cref="WorkerPoolOptions.IdleTimeout"/>.</summary>
    public TimeSpan IdleTimeout => _options.IdleTimeout;

    /// <summary>
    /// How long an item may run on a worker before <see cref="StuckWorkItemDetected"/> reports it, from
    /// <see cref="WorkerPoolOptions.StuckItemThreshold"/>; <see cref="Timeout.InfiniteTimeSpan"/> when detection is off.
    /// </summary>
    public TimeSpan StuckItemThreshold => _options.StuckItemThreshold;

    /// <summary>Whether the safe queueing methods flow the caller's <see cref="ExecutionContext"/>.</summary>
    public bool FlowsExecutionContext => _options.FlowExecutionContext;

    /// <summary>What the pool does when a work item throws.</summary>
    public UnhandledExceptionPolicy ExceptionPolicy => _options.ExceptionPolicy;

    /// <summary>
    /// The number of worker threads that exist right now (created and not yet retired), including workers blocked
    /// inside an item. Dedicated threads of long-running items are counted by <see cref="DedicatedThreadCount"/>.
    /// </summary>
    public int ThreadCount => _threads.ThreadCount;

    /// <summary>The number of dedicated threads (running or idle) that serve <see cref="WorkItemOptions.LongRunning"/> items.</summary>
    public int DedicatedThreadCount => _dedicated.Count;

    /// <summary>
    /// The number of accepted items that have not started yet. A snapshot: exact when no thread is queueing or
    /// dispatching, approximate while the pool is busy.
    /// </summary>
    public long PendingWorkItemCount => _scheduler.Sources.PendingCount;

    /// <summary>The number of items that have finished running (normally or by throwing) on this pool.</summary>
    public long CompletedWorkItemCount => _threads.WorkerCompletedCount + _dedicated.CompletedCount + _scheduler.Relief.CompletedCount + _runner.LeftoversCompleted;

    /// <summary>Whether <see cref="Dispose"/> or <see cref="Shutdown(ShutdownMode)"/> has been called.</summary>
    public bool IsShutdownStarted => _scheduler.IsShutdownStarted;

    /// <summary>
    /// The pool that owns the calling thread (one of its workers, its dedicated long-running threads or its relief
    /// thread, see <see cref="WorkerPoolOptions.OutsideWorkReliefDelay"/>), or <see langword="null"/> on any other thread.
    /// </summary>
    public static WorkerPool? Current => PoolThreads.CurrentPool as WorkerPool;

    /// <summary>
    /// Raised on the worker thread when a work item throws (and when a worker hook throws). Handlers run one at a
    /// time per worker, may run concurrently on different workers, and must not block for long. See
    /// <see cref="UnhandledExceptionPolicy"/> for what happens afterwards.
    /// </summary>
    public event EventHandler<WorkItemExceptionEventArgs>? UnhandledException;

    /// <summary>
    /// Raised once for each item that has been running on a worker for longer than <see cref="StuckItemThreshold"/>
    /// (see <see cref="WorkerPoolOptions.StuckItemThreshold"/>); the item itself is left alone. The same report goes to
    /// the <c>Spindle</c> event source (event <c>StuckWorkItem</c>, keyword <c>WorkItems</c>).
    /// </summary>
    /// <remarks>
    /// Handlers run on the built-in <see cref="ThreadPool"/>, neither on the pool's timer thread (a slow handler would
    /// delay the pool's timers) nor on the pool's own workers (they may all be stuck). An exception thrown by a handler
    /// is written to <see cref="Trace"/> and goes no further; the other handlers still run.
    /// </remarks>
    public event EventHandler<StuckWorkItemEventArgs>? StuckWorkItemDetected;

    /// <inheritdoc/>
    public override string ToString() => $"WorkerPool '{Name}' (threads {ThreadCount}, pending {PendingWorkItemCount})";

    /// <summary>Items waiting in the global queue (tests and diagnostics; a snapshot).</summary>
    internal long GlobalQueueCount => _scheduler.GlobalQueueCount;

    /// <summary>Whether shutdown has finished: no worker is left and every accepted item has run or was cancelled.</summary>
    internal bool HasStopped => _threads.HasStopped;

    /// <summary>
    /// Offers an exception thrown by an item or a hook to the <see cref="UnhandledException"/> handlers. Returns true
    /// when the pool may go on (the policy is <see cref="UnhandledExceptionPolicy.Report"/>, or a handler marked it
    /// handled); the item runner applies the policy.
    /// </summary>
    internal bool ReportItemException(Exception exception)
    {
        // Counted before the handlers run, so that a handler (or whoever it signals) reads a count that includes this one.
        Metrics.RecordException(exception);
        var args = new WorkItemExceptionEventArgs(this, exception);
        EventHandler<WorkItemExceptionEventArgs>? handlers = UnhandledException;
        if (handlers is not null)
        {
            foreach (EventHandler<WorkItemExceptionEventArgs> handler in handlers.GetInvocationList())
            {
                try
                {
                    handler(this, args);
                }
                catch (Exception handlerException)
                {
                    // A failing handler must not take the worker down with it. Whatever it set on args.Handled before
                    // throwing stands; the other handlers still run.
                    TraceHandlerFailure("an UnhandledException", handlerException);
                }
            }
        }
        bool handled = _options.ExceptionPolicy == UnhandledExceptionPolicy.Report || args.Handled;
        if (SpindleEventSource.Log.IsOn(EventLevel.Error, SpindleEventSource.Keywords.WorkItems))
        {
            SpindleEventSource.Log.WorkItemException(Name, exception.GetType().FullName ?? exception.GetType().Name, MessageOf(exception), handled);
        }
        return handled;
    }

    /// <summary>
    /// An exception's message for a trace: never null, and never throwing (a user's exception type may override
    /// <see cref="Exception.Message"/> badly, and this runs on a worker, where an escaping exception ends the process).
    /// </summary>
    private static string MessageOf(Exception exception)
    {
        try
        {
            return exception.Message ?? string.Empty;
        }
        catch (Exception)
        {
            return string.Empty;
        }
    }

    /// <summary>Traces a handler that threw, without letting the trace itself throw (its text calls the user's ToString).</summary>
    private void TraceHandlerFailure(string handlerKind, Exception handlerException) =>
        FailureTrace.Write($"{handlerKind} handler of pool '{Name}' threw", handlerException);

    /// <summary>Whether anyone handles <see cref="StuckWorkItemDetected"/> (the detector builds no report otherwise).</summary>
    internal bool HasStuckWorkItemHandlers => StuckWorkItemDetected is not null;

    /// <summary>Raises <see cref="StuckWorkItemDetected"/> on the built-in pool (see its remarks); called by the detector.</summary>
    internal static void RaiseStuckWorkItemDetected(StuckWorkItemEventArgs args) =>
        ThreadPool.UnsafeQueueUserWorkItem(static args => args.Pool.InvokeStuckWorkItemHandlers(args), args, preferLocal: false);

    private void InvokeStuckWorkItemHandlers(StuckWorkItemEventArgs args)
    {
        EventHandler<StuckWorkItemEventArgs>? handlers = StuckWorkItemDetected;
        if (handlers is null)
        {
            return;
        }
        foreach (EventHandler<StuckWorkItemEventArgs> handler in handlers.GetInvocationList())
        {
            try
            {
                handler(this, args);
            }
            catch (Exception handlerException)
            {
                // On the built-in pool an escaping exception would end the process: report it as UnhandledException's
                // handlers' failures are reported, and let the other handlers run.
                TraceHandlerFailure("a StuckWorkItemDetected", handlerException);
            }
        }
    }

    internal override WorkerPool OwningPool => this;

    /// <summary>Throws the exception every entry point throws once the pool is shutting down.</summary>
    [DoesNotReturn]
    internal override void ThrowShutDown() =>
        throw new ObjectDisposedException(GetType().FullName, $"The worker pool '{Name}' is shut down or shutting down and accepts no more work.");

    /// <summary>Whether the calling thread is one of this pool's (a worker or a dedicated thread).</summary>
    private bool IsOwnThread => Current == this;

    PoolMetrics IPoolHost.Metrics => Metrics;

    int IPoolReadings.BlockingCount => _threads.BlockingCount;

    long IPoolReadings.StealCount => _threads.WorkerStealCount;

    long IPoolReadings.ParkCount => _threads.WorkerParkCount;

    int IPoolReadings.TimerCount => _timers.ScheduledCount;

    int IPoolReadings.WaitCount => _waits.RegistrationCount;

    long IPoolReadings.GetCreationFailures(PoolThreadKind kind) => _threads.Starts.GetFailures(kind);

    Lane[] IPoolReadings.LiveLanes() => _scheduler.Lanes.LiveLanes();

    bool IPoolHost.ReportItemException(Exception exception) => ReportItemException(exception);

    [DoesNotReturn]
    void IPoolHost.ThrowShutDown() => ThrowShutDown();

    void IPoolHost.OnIoStopped() => _io.OnStopped();

    bool IPoolHost.HasStuckWorkItemHandlers => HasStuckWorkItemHandlers;

    void IPoolHost.RaiseStuckWorkItemDetected(string description, Thread? thread, TimeSpan runningTime, string? laneName) =>
        RaiseStuckWorkItemDetected(new StuckWorkItemEventArgs(this, description, thread?.Name, thread?.ManagedThreadId ?? 0,
            runningTime, laneName));
}
