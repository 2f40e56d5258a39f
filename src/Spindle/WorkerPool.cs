using System;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Threading;

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
/// <para>The type is split by concern: <c>WorkerPool.Queueing.cs</c> (public queueing API and the enqueue path),
/// <c>WorkerPool.Worker.cs</c> (the dispatch loop), <c>WorkerPool.Parking.cs</c> (search, park and wake),
/// <c>WorkerPool.Injection.cs</c> (the one place that decides to add a thread), <c>WorkerPool.Shutdown.cs</c>.</para>
/// </remarks>
public sealed partial class WorkerPool : IDisposable, IAsyncDisposable
{
    private const int StateRunning = 0;
    private const int StateDraining = 1;
    private const int StateCancelling = 2;

    private readonly WorkerPoolOptions _options;
    private readonly bool _flowExecutionContext;
    private readonly string _threadNamePrefix;
    private readonly int _idleTimeoutMs;
    private readonly GlobalQueue _globalQueue = new();
    private readonly IdleStack<Worker> _idle = new();

    // Workers currently searching for work (spinning). Written by searchers and wakers with atomics; read by every
    // enqueue, hence alone on its cache line.
    private PaddedInt32 _searching;

    // 0 running, 1 draining, 2 cancelling. Written once or twice (under _threadLock), read on the enqueue and dispatch
    // paths; it sits on a line that is otherwise read-only while the pool runs.
    private volatile int _state;

    /// <summary>Creates a pool with default options.</summary>
    public WorkerPool()
        : this(new WorkerPoolOptions())
    {
    }

    /// <summary>Creates a pool. The options are validated and copied.</summary>
    /// <exception cref="ArgumentNullException"><paramref name="options"/> or its name is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException">A thread count or the stack size is out of range, or min exceeds max.</exception>
    /// <exception cref="ArgumentException">The name or thread name prefix is empty.</exception>
    public WorkerPool(WorkerPoolOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        _options = options.Validate();
        _flowExecutionContext = _options.FlowExecutionContext;
        _threadNamePrefix = _options.ThreadNamePrefix ?? _options.Name;
        _idleTimeoutMs = _options.IdleTimeout == Timeout.InfiniteTimeSpan ? Timeout.Infinite : (int)_options.IdleTimeout.TotalMilliseconds;
        _workers = [];
        InitializeLimits(_options.MinThreads, _options.MaxThreads);
    }

    /// <summary>The pool's name, from <see cref="WorkerPoolOptions.Name"/>.</summary>
    public string Name => _options.Name;

    /// <summary>The pool's current minimum thread count (from the options, or the last <see cref="SetThreadLimits(int, int)"/>).</summary>
    public int MinThreads => Volatile.Read(ref _minThreads);

    /// <summary>The pool's current maximum worker thread count (from the options, or the last <see cref="SetThreadLimits(int, int)"/>).</summary>
    public int MaxThreads => Volatile.Read(ref _maxThreads);

    /// <summary>How long idle threads above the minimum wait before they exit, from <see cref="WorkerPoolOptions.IdleTimeout"/>.</summary>
    public TimeSpan IdleTimeout => _options.IdleTimeout;

    /// <summary>Whether the safe queueing methods flow the caller's <see cref="ExecutionContext"/>.</summary>
    public bool FlowsExecutionContext => _flowExecutionContext;

    /// <summary>What the pool does when a work item throws.</summary>
    public UnhandledExceptionPolicy ExceptionPolicy => _options.ExceptionPolicy;

    /// <summary>
    /// The number of worker threads that exist right now (created and not yet retired), including workers blocked
    /// inside an item. Dedicated threads of long-running items are counted by <see cref="DedicatedThreadCount"/>.
    /// </summary>
    public int ThreadCount => Volatile.Read(ref _threadCount);

    /// <summary>The number of dedicated threads (running or idle) that serve <see cref="WorkItemOptions.LongRunning"/> items.</summary>
    public int DedicatedThreadCount => Volatile.Read(ref _dedicatedCount);

    /// <summary>
    /// The number of accepted items that have not started yet. A snapshot: exact when no thread is queueing or
    /// dispatching, approximate while the pool is busy.
    /// </summary>
    public long PendingWorkItemCount
    {
        get
        {
            long pending = _globalQueue.Count + ReadyTimerCount;
            foreach (Worker worker in Volatile.Read(ref _workers))
            {
                pending += worker.Ring.Count + (Volatile.Read(ref worker.LifoSlot.Value) is null ? 0 : 1);
            }
            return pending;
        }
    }

    /// <summary>Items waiting in the global queue (tests and diagnostics; a snapshot).</summary>
    internal long GlobalQueueCount => _globalQueue.Count;

    /// <summary>The number of items that have finished running (normally or by throwing) on this pool.</summary>
    public long CompletedWorkItemCount
    {
        get
        {
            long completed = Volatile.Read(ref _exitedWorkersCompleted);
            foreach (Worker worker in Volatile.Read(ref _workers))
            {
                completed += worker.CompletedCount;
            }
            return completed;
        }
    }

    /// <summary>Whether <see cref="Dispose"/> or <see cref="Shutdown(ShutdownMode)"/> has been called.</summary>
    public bool IsShutdownStarted => _state != StateRunning;

    /// <summary>
    /// The pool that owns the calling thread (one of its workers or dedicated long-running threads), or
    /// <see langword="null"/> on any other thread.
    /// </summary>
    public static WorkerPool? Current => t_currentWorker?.Pool ?? t_dedicatedPool;

    /// <summary>
    /// Raised on the worker thread when a work item throws (and when a worker hook throws). Handlers run one at a
    /// time per worker, may run concurrently on different workers, and must not block for long. See
    /// <see cref="UnhandledExceptionPolicy"/> for what happens afterwards.
    /// </summary>
    public event EventHandler<WorkItemExceptionEventArgs>? UnhandledException;

    /// <inheritdoc/>
    public override string ToString() => $"WorkerPool '{Name}' (threads {ThreadCount}, pending {PendingWorkItemCount})";
}
