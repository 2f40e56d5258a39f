using System;
using System.Diagnostics.Tracing;
using System.Threading;

namespace Spindle.Compare.Pools;

/// <summary>A private <see cref="WorkerPool"/>, configured from the scenario's <see cref="PoolSettings"/>.</summary>
internal sealed class SpindlePool : IPoolUnderTest
{
    private readonly WorkerPool _pool;
    private Exception? _fault;

    public SpindlePool(PoolSettings settings)
    {
        var options = new WorkerPoolOptions
        {
            Name = "Spindle.Compare",
            // Short enough that the kernel's 15-byte thread names tell the pool's threads apart in perf and /proc.
            ThreadNamePrefix = "Spindle",
            MinThreads = settings.MinThreads,
            MaxThreads = settings.MaxThreads ?? WorkerPoolOptions.MaxThreadLimit,
            FlowExecutionContext = true,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        if (settings.StuckItemThreshold is { } threshold)
        {
            options.StuckItemThreshold = threshold;
        }
        _pool = new WorkerPool(options);
        _pool.UnhandledException += (_, e) => Interlocked.CompareExchange(ref _fault, e.Exception, null);
    }

    public PoolKind Kind => PoolKind.Spindle;

    public WorkerPool SpindleTarget => _pool;

    public int ThreadCount => _pool.ThreadCount + _pool.DedicatedThreadCount;

    public long PendingWorkItemCount => _pool.PendingWorkItemCount;

    public Exception? Fault => Volatile.Read(ref _fault);

    // The names of src/Spindle/Telemetry: PoolMetrics.MeterName and SpindleEventSource (internal to the library).
    public PoolTelemetry Telemetry { get; } = new("Spindle", [new("Spindle", EventKeywords.All, EventLevel.Verbose)]);

    public void Queue(WaitCallback callBack, object? state) => _pool.QueueUserWorkItem(callBack, state);

    public void UnsafeQueue(WaitCallback callBack, object? state) => _pool.UnsafeQueueUserWorkItem(callBack, state);

    public void UnsafeQueue(Action<object?> callBack, object? state, bool preferLocal) =>
        _pool.UnsafeQueueUserWorkItem(callBack, state, preferLocal);

    public void UnsafeQueue(PoolWorkItem item, bool preferLocal) => _pool.UnsafeQueueUserWorkItem(item, preferLocal);

    public void QueueLongRunning(Action<object?> callBack, object? state) =>
        _pool.UnsafeQueueUserWorkItem(callBack, state, WorkItemOptions.LongRunning);

    public void RunBlocking(Action blockingCall)
    {
        using (WorkerPool.EnterBlockingRegion())
        {
            blockingCall();
        }
    }

    public IStreamEnd WrapSocket(System.Net.Sockets.Socket socket) => new LoopbackSockets.PoolEnd(_pool, socket);

    public System.Threading.Tasks.Task Run(Action action) => _pool.Run(action);

    public System.Threading.Tasks.Task Run(Func<System.Threading.Tasks.Task> function) => _pool.Run(function);

    public System.Threading.Tasks.Task<T> Run<T>(Func<System.Threading.Tasks.Task<T>> function) => _pool.Run(function);

    public System.Threading.Tasks.Task RunOnScheduler(Func<System.Threading.Tasks.Task> function) =>
        System.Threading.Tasks.TaskExtensions.Unwrap(System.Threading.Tasks.Task.Factory.StartNew(function,
            System.Threading.CancellationToken.None, System.Threading.Tasks.TaskCreationOptions.DenyChildAttach, _pool.TaskScheduler));

    public System.Threading.Tasks.TaskScheduler Scheduler => _pool.TaskScheduler;

    public TimeProvider TimeProvider => _pool.TimeProvider;

    public SynchronizationContext? Context => _pool.SynchronizationContext;

    public ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period) =>
        _pool.CreateTimer(callback, state, dueTime, period);

    public IRegisteredSignal RegisterEventWait(WaitOrTimerCallback callBack, object? state)
    {
        var handle = new AutoResetEvent(false);
        RegisteredWait registration = _pool.RegisterWaitForSingleObject(handle, callBack, state, Timeout.Infinite, executeOnlyOnce: false);
        return new EventRegistration(handle, registration);
    }

    public IRegisteredSignal RegisterNativeWait(WaitOrTimerCallback callBack, object? state)
    {
        var signal = new PoolSignal();
        RegisteredWait registration = _pool.RegisterWait(signal, callBack, state, Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        return new SignalRegistration(signal, registration);
    }

    public IPoolLane CreateLane(LaneOptions options) => new Lane(_pool.CreateLane(options));

    public bool TryObserveStuckItems(Action<StuckItemReport> onReport)
    {
        _pool.StuckWorkItemDetected += (_, e) =>
            onReport(new StuckItemReport(e.Description, e.RunningTime, e.ManagedThreadId, e.WorkerThreadName, e.LaneName));
        return true;
    }

    public void Dispose() => _pool.Dispose();

    private sealed class EventRegistration(AutoResetEvent handle, RegisteredWait registration) : IRegisteredSignal
    {
        public void Set() => handle.Set();

        public void Unregister()
        {
            registration.Unregister(null);
            handle.Dispose();
        }
    }

    /// <summary>A <see cref="WorkerPoolLane"/>, queued to with the same calls as the pool.</summary>
    private sealed class Lane(WorkerPoolLane lane) : IPoolLane
    {
        public void UnsafeQueue(PoolWorkItem item) => lane.UnsafeQueueUserWorkItem(item, preferLocal: false);

        public void Queue(Action<object?> callBack, object? state) => lane.QueueUserWorkItem(callBack, state, preferLocal: false);
    }

    private sealed class SignalRegistration(PoolSignal signal, RegisteredWait registration) : IRegisteredSignal
    {
        public void Set() => signal.Set();

        public void Unregister() => registration.Unregister(null);
    }
}
