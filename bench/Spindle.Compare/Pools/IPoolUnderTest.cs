using System;
using System.Threading;

namespace Spindle.Compare.Pools;

/// <summary>A registered wait and the signal that releases it.</summary>
internal interface IRegisteredSignal
{
    /// <summary>Signals the wait once, so that its callback runs.</summary>
    void Set();

    /// <summary>Ends the registration and releases what it holds; later signals call nothing.</summary>
    void Unregister();
}

/// <summary>
/// The operations scenarios need from a pool, so that each scenario is written once. Each method maps to the pool's
/// own closest API; see the implementations for the exact calls.
/// </summary>
internal interface IPoolUnderTest : IDisposable
{
    /// <summary>Which pool this is.</summary>
    PoolKind Kind { get; }

    /// <summary>The Spindle pool itself, for the integrations that take one (the actor dispatchers); null for the built-in pool.</summary>
    WorkerPool? SpindleTarget => null;

    /// <summary>Threads the pool has right now (for Spindle, workers plus dedicated long-running threads).</summary>
    int ThreadCount { get; }

    /// <summary>Items queued and not started yet.</summary>
    long PendingWorkItemCount { get; }

    /// <summary>The first exception a work item threw, for pools that report instead of crashing the process.</summary>
    Exception? Fault { get; }

    /// <summary>
    /// The pool's telemetry, as a monitoring agent would collect it: Spindle's <c>Spindle</c> meter and event source (all
    /// keywords, Verbose); for the built-in pool the runtime's <c>System.Runtime</c> meter, the runtime's threading
    /// events (<c>Microsoft-Windows-DotNETRuntime</c>, keyword 0x10000, Verbose) and the per-item enqueue and dequeue
    /// events (<c>System.Diagnostics.Eventing.FrameworkEventSource</c>, keywords ThreadPool and ThreadTransfer, Verbose).
    /// </summary>
    PoolTelemetry Telemetry { get; }

    /// <summary><c>QueueUserWorkItem(WaitCallback, object)</c>: flows the caller's <see cref="ExecutionContext"/>.</summary>
    void Queue(WaitCallback callBack, object? state);

    /// <summary><c>UnsafeQueueUserWorkItem(WaitCallback, object)</c>: does not flow the context.</summary>
    void UnsafeQueue(WaitCallback callBack, object? state);

    /// <summary>
    /// <c>UnsafeQueueUserWorkItem&lt;object?&gt;(Action&lt;object?&gt;, object?, preferLocal)</c>: no context, and with
    /// <paramref name="preferLocal"/> the calling worker's local queue (the WaitCallback overloads cannot ask for that on
    /// the built-in pool, which always sends them to its global queue).
    /// </summary>
    void UnsafeQueue(Action<object?> callBack, object? state, bool preferLocal);

    /// <summary>Queues a reusable item object without allocating and without flowing the context.</summary>
    void UnsafeQueue(PoolWorkItem item, bool preferLocal);

    /// <summary>
    /// Runs <paramref name="callBack"/> as long-running work: Spindle's <c>WorkItemOptions.LongRunning</c>; on the
    /// built-in pool a task started with <c>TaskCreationOptions.LongRunning</c> (a thread of its own).
    /// </summary>
    void QueueLongRunning(Action<object?> callBack, object? state);

    /// <summary>
    /// Runs <paramref name="blockingCall"/> announced as blocking: inside <c>WorkerPool.EnterBlockingRegion()</c> on
    /// Spindle. The built-in pool has no such API and just runs it.
    /// </summary>
    void RunBlocking(Action blockingCall);

    /// <summary>Spindle's <c>Run(Action)</c>; <see cref="System.Threading.Tasks.Task.Run(Action)"/> on the built-in pool.</summary>
    /// <summary>Wraps one end of a connected loopback socket for this pool's async I/O (see <see cref="LoopbackSockets"/>).</summary>
    IStreamEnd WrapSocket(System.Net.Sockets.Socket socket);

    System.Threading.Tasks.Task Run(Action action);

    /// <summary>Spindle's <c>Run(Func&lt;Task&gt;)</c>; <c>Task.Run(Func&lt;Task&gt;)</c> on the built-in pool.</summary>
    System.Threading.Tasks.Task Run(Func<System.Threading.Tasks.Task> function);

    /// <summary>Spindle's <c>Run(Func&lt;Task&lt;T&gt;&gt;)</c>; <c>Task.Run(Func&lt;Task&lt;T&gt;&gt;)</c> on the built-in pool.</summary>
    System.Threading.Tasks.Task<T> Run<T>(Func<System.Threading.Tasks.Task<T>> function);

    /// <summary>
    /// Starts <paramref name="function"/> as a task of the pool's <see cref="System.Threading.Tasks.TaskScheduler"/>, so that
    /// its awaits come back through that scheduler: Spindle's <c>TaskScheduler</c>; <c>Task.Run</c> (the default
    /// scheduler) on the built-in pool.
    /// </summary>
    System.Threading.Tasks.Task RunOnScheduler(Func<System.Threading.Tasks.Task> function);

    /// <summary>
    /// The pool's <see cref="System.Threading.Tasks.TaskScheduler"/>, for APIs that take one (<c>Parallel.For</c>,
    /// <c>Task.Factory.StartNew</c>): Spindle's <c>TaskScheduler</c>; <see cref="System.Threading.Tasks.TaskScheduler.Default"/>
    /// on the built-in pool.
    /// </summary>
    System.Threading.Tasks.TaskScheduler Scheduler { get; }

    /// <summary>
    /// The pool's own timers as a <see cref="TimeProvider"/>: Spindle's <c>TimeProvider</c> (its timing wheel);
    /// <see cref="TimeProvider.System"/> on the built-in pool.
    /// </summary>
    TimeProvider TimeProvider { get; }

    /// <summary>The pool's <see cref="SynchronizationContext"/>, or null when it has none (the built-in pool).</summary>
    SynchronizationContext? Context { get; }

    /// <summary>Spindle's <c>WorkerPool.CreateTimer</c>; a <see cref="Timer"/> on the built-in pool.</summary>
    ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period);

    /// <summary>
    /// A repeating wait registration on an <see cref="AutoResetEvent"/>: Spindle's <c>RegisterWaitForSingleObject</c>,
    /// the built-in <see cref="ThreadPool.RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, int, bool)"/>.
    /// </summary>
    IRegisteredSignal RegisterEventWait(WaitOrTimerCallback callBack, object? state);

    /// <summary>
    /// A repeating wait registration on the pool's own thread-free signal: Spindle's <c>PoolSignal</c> with
    /// <c>RegisterWait</c>. The built-in pool has none, so it falls back to <see cref="RegisterEventWait"/>.
    /// </summary>
    IRegisteredSignal RegisterNativeWait(WaitOrTimerCallback callBack, object? state);

    /// <summary>
    /// A lane: Spindle's <c>WorkerPool.CreateLane(options)</c>. The built-in pool has no lanes, so it returns its nearest
    /// equivalent: for <see cref="LaneOptions.MaxConcurrency"/> 1, the <c>ExclusiveScheduler</c> of a new
    /// <see cref="System.Threading.Tasks.ConcurrentExclusiveSchedulerPair"/> (each item a task); without a cap, its one
    /// global queue, whatever the priority and share say. It supports no other cap.
    /// </summary>
    IPoolLane CreateLane(LaneOptions options);

    /// <summary>
    /// Calls <paramref name="onReport"/> for every report of a stuck item (one that has run past
    /// <see cref="PoolSettings.StuckItemThreshold"/>) from now on, on whatever thread the pool reports on: Spindle's
    /// <c>WorkerPool.StuckWorkItemDetected</c>. Returns false, and subscribes nothing, when the pool cannot report stuck
    /// items (the built-in pool).
    /// </summary>
    bool TryObserveStuckItems(Action<StuckItemReport> onReport);
}
