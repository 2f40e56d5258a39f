using System;
using System.Diagnostics.Tracing;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Compare.Pools;

/// <summary>
/// <see cref="ThreadPool"/> with its default configuration (it is process-wide, so <see cref="PoolSettings"/> do not
/// apply). Disposing does nothing.
/// </summary>
internal sealed class BuiltInPool : IPoolUnderTest
{
    public PoolKind Kind => PoolKind.BuiltIn;

    public int ThreadCount => ThreadPool.ThreadCount;

    public long PendingWorkItemCount => ThreadPool.PendingWorkItemCount;

    // An unhandled exception on the built-in pool ends the process, which the parent reports.
    public Exception? Fault => null;

    // The runtime's ThreadingKeyword (0x10000) covers worker-thread starts, waits and hill-climbing adjustments, but no
    // per-item event: the managed thread pool writes its enqueue and dequeue events (ThreadPoolEnqueueWork,
    // ThreadPoolDequeueWork) only on FrameworkEventSource, under its ThreadPool (0x2) and ThreadTransfer (0x10) keywords.
    public PoolTelemetry Telemetry { get; } = new("System.Runtime",
    [
        new("Microsoft-Windows-DotNETRuntime", (EventKeywords)0x10000, EventLevel.Verbose),
        new("System.Diagnostics.Eventing.FrameworkEventSource", (EventKeywords)0x12, EventLevel.Verbose),
    ]);

    public void Queue(WaitCallback callBack, object? state) => ThreadPool.QueueUserWorkItem(callBack, state);

    public void UnsafeQueue(WaitCallback callBack, object? state) => ThreadPool.UnsafeQueueUserWorkItem(callBack, state);

    public void UnsafeQueue(Action<object?> callBack, object? state, bool preferLocal) =>
        ThreadPool.UnsafeQueueUserWorkItem(callBack, state, preferLocal);

    public void UnsafeQueue(PoolWorkItem item, bool preferLocal) => ThreadPool.UnsafeQueueUserWorkItem(item, preferLocal);

    public void QueueLongRunning(Action<object?> callBack, object? state) =>
        Task.Factory.StartNew(callBack, state, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);

    public void RunBlocking(Action blockingCall) => blockingCall();

    public IStreamEnd WrapSocket(System.Net.Sockets.Socket socket) => new LoopbackSockets.RuntimeEnd(socket);

    public Task Run(Action action) => Task.Run(action);

    public Task Run(Func<Task> function) => Task.Run(function);

    public Task<T> Run<T>(Func<Task<T>> function) => Task.Run(function);

    public Task RunOnScheduler(Func<Task> function) => Task.Run(function);

    public TaskScheduler Scheduler => TaskScheduler.Default;

    public TimeProvider TimeProvider => TimeProvider.System;

    public SynchronizationContext? Context => null;

    public void Dispose()
    {
    }

    public ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period) =>
        new Timer(callback, state, dueTime, period);

    public IRegisteredSignal RegisterEventWait(WaitOrTimerCallback callBack, object? state)
    {
        var handle = new AutoResetEvent(false);
        RegisteredWaitHandle registration = ThreadPool.RegisterWaitForSingleObject(handle, callBack, state, Timeout.Infinite, executeOnlyOnce: false);
        return new EventRegistration(handle, registration);
    }

    // No thread-free signal exists on the built-in pool: its best is the event registration.
    public IRegisteredSignal RegisterNativeWait(WaitOrTimerCallback callBack, object? state) => RegisterEventWait(callBack, state);

    public IPoolLane CreateLane(LaneOptions options) => options.MaxConcurrency switch
    {
        null => GlobalQueueLane.Instance,
        1 => new ExclusiveLane(new ConcurrentExclusiveSchedulerPair().ExclusiveScheduler),
        int cap => throw new NotSupportedException($"The built-in pool has no equivalent of a lane capped at {cap}."),
    };

    // The built-in pool has no stuck-item detection.
    public bool TryObserveStuckItems(Action<StuckItemReport> onReport) => false;

    /// <summary>An uncapped "lane": the pool's one global queue (the priority and share are ignored: it has neither).</summary>
    private sealed class GlobalQueueLane : IPoolLane
    {
        public static readonly GlobalQueueLane Instance = new();

        public void UnsafeQueue(PoolWorkItem item) => ThreadPool.UnsafeQueueUserWorkItem(item, preferLocal: false);

        public void Queue(Action<object?> callBack, object? state) => ThreadPool.QueueUserWorkItem(callBack, state, preferLocal: false);
    }

    /// <summary>
    /// A serial "lane": an <c>ExclusiveScheduler</c>, each item a task started on it. A task always captures the
    /// caller's <see cref="ExecutionContext"/>, so <see cref="UnsafeQueue"/> flows it too.
    /// </summary>
    private sealed class ExclusiveLane(TaskScheduler exclusive) : IPoolLane
    {
        private static readonly Action<object?> s_execute = static item => ((PoolWorkItem)item!).Execute();

        public void UnsafeQueue(PoolWorkItem item) => Queue(s_execute, item);

        public void Queue(Action<object?> callBack, object? state) =>
            Task.Factory.StartNew(callBack, state, CancellationToken.None, TaskCreationOptions.None, exclusive);
    }

    private sealed class EventRegistration(AutoResetEvent handle, RegisteredWaitHandle registration) : IRegisteredSignal
    {
        public void Set() => handle.Set();

        public void Unregister()
        {
            registration.Unregister(null);
            handle.Dispose();
        }
    }
}
