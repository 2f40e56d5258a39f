using System;
using System.Collections.Concurrent;
using System.Collections.ObjectModel;
using System.Diagnostics.Tracing;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Telemetry;
using Xunit;

namespace Spindle.Tests.Telemetry;

/// <summary>
/// Stuck-item detection (<see cref="WorkerPoolOptions.StuckItemThreshold"/>): an item that runs past the threshold is
/// reported once, by <see cref="WorkerPool.StuckWorkItemDetected"/> and the <c>Spindle</c> event source, named by the
/// caller's delegate or work item; short items and pools with detection off report nothing.
/// </summary>
public sealed class StuckItemTests
{
    private static readonly TimeSpan Threshold = TimeSpan.FromMilliseconds(100);

    private static WorkerPool NewPool(string test, TimeSpan threshold) => new(new WorkerPoolOptions
    {
        Name = $"stuck-{test}-{Guid.NewGuid():N}",
        MinThreads = 1,
        MaxThreads = 2,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
        StuckItemThreshold = threshold,
    });

    /// <summary>The item the tests block: a named static method, so its description is known.</summary>
    private static void BlockUntilReleased(object? gate) => ((Gate)gate!).Block();

    private static void BlockOnStruct(GateHolder holder) => holder.Gate.Block();

    private static void BlockOnWait(object? gate, bool timedOut) => ((Gate)gate!).Block();

    private static string NameOf(string method) => typeof(StuckItemTests).FullName + "." + method;

    private readonly record struct GateHolder(Gate Gate);

    /// <summary>Blocks the items that enter it until the test releases them; remembers the thread of the last one.</summary>
    private sealed class Gate : IDisposable
    {
        private readonly ManualResetEventSlim _released = new();

        public ManualResetEventSlim Entered { get; } = new();

        public int ThreadId { get; private set; }

        public string? ThreadName { get; private set; }

        public void Block()
        {
            ThreadId = Environment.CurrentManagedThreadId;
            ThreadName = Thread.CurrentThread.Name;
            Entered.Set();
            _released.Wait(Waits.MustHappen);
        }

        public void Release() => _released.Set();

        /// <summary>Releases whatever still waits (a failed test must not leave the pool's dispose waiting). The events
        /// are left to the collector: a released item may still be on its way out of <see cref="Block"/>.</summary>
        public void Dispose() => Release();
    }

    private sealed class BlockingWorkItem(Gate gate) : IWorkItem
    {
        public void Execute() => gate.Block();
    }

    /// <summary>Collects a pool's reports.</summary>
    private sealed class Reports : IDisposable
    {
        private readonly WorkerPool _pool;
        private readonly ConcurrentQueue<StuckWorkItemEventArgs> _seen = new();
        private readonly SemaphoreSlim _arrived = new(0);

        public Reports(WorkerPool pool)
        {
            _pool = pool;
            pool.StuckWorkItemDetected += OnReport;
        }

        public int Count => _seen.Count;

        public StuckWorkItemEventArgs WaitForFirst(string what)
        {
            Waits.For(_arrived, what);
            Assert.True(_seen.TryPeek(out StuckWorkItemEventArgs? first));
            return first;
        }

        /// <summary>Watches for several thresholds: no further report comes.</summary>
        public void AssertNoMoreThan(int count, string what) =>
            Assert.False(Waits.Poll(() => Count > count, Threshold * 6), $"{what}: {Count} reports");

        private void OnReport(object? sender, StuckWorkItemEventArgs e)
        {
            Assert.Same(_pool, sender);
            _seen.Enqueue(e);
            _arrived.Release();
        }

        public void Dispose()
        {
            _pool.StuckWorkItemDetected -= OnReport;
            _arrived.Dispose();
        }
    }

    [Fact]
    public void BlockedItem_IsReportedExactlyOnce_ByItsMethod_WithItsWorker()
    {
        using WorkerPool pool = NewPool("once", Threshold);
        using var reports = new Reports(pool);
        using var gate = new Gate();
        pool.UnsafeQueueUserWorkItem(BlockUntilReleased, gate);

        StuckWorkItemEventArgs report = reports.WaitForFirst("the report of the blocked item");
        reports.AssertNoMoreThan(1, "the same item was reported again");
        gate.Release();

        Assert.Same(pool, report.Pool);
        Assert.Equal(NameOf(nameof(BlockUntilReleased)), report.Description);
        Assert.True(report.RunningTime >= Threshold, $"running time {report.RunningTime}");
        Assert.Null(report.LaneName);
        Assert.Equal(gate.ThreadId, report.ManagedThreadId);
        Assert.Equal(gate.ThreadName, report.WorkerThreadName);
        Assert.StartsWith(pool.Name + " #", report.WorkerThreadName, StringComparison.Ordinal);

        Waits.Until(() => pool.CompletedWorkItemCount == 1, "the released item to complete");
        reports.AssertNoMoreThan(1, "a report after the item completed");
    }

    [Fact]
    public void TwoItemsBlockedInTurn_AreEachReportedOnce()
    {
        using WorkerPool pool = NewPool("twice", Threshold);
        using var reports = new Reports(pool);
        using var first = new Gate();
        using var second = new Gate();
        pool.UnsafeQueueUserWorkItem(BlockUntilReleased, first);
        reports.WaitForFirst("the first item's report");
        first.Release();
        Waits.Until(() => pool.CompletedWorkItemCount == 1, "the first item to complete");
        pool.UnsafeQueueUserWorkItem(BlockUntilReleased, second);
        Waits.Until(() => reports.Count == 2, "the second item's report");
        reports.AssertNoMoreThan(2, "an item reported twice");
        second.Release();
    }

    [Fact]
    public void ShortItems_AreNeverReported_ThoughTheWorkerStaysBusy()
    {
        // Each item takes about a millisecond; together they keep one worker busy for several thresholds.
        TimeSpan threshold = TimeSpan.FromMilliseconds(500);
        using WorkerPool pool = NewPool("short", threshold);
        using var reports = new Reports(pool);
        using var done = new ManualResetEventSlim();
        long until = Environment.TickCount64 + (long)(threshold * 3).TotalMilliseconds;
        void Step(object? _)
        {
            Thread.Sleep(1);
            if (Environment.TickCount64 < until)
            {
                pool.UnsafeQueueUserWorkItem<object?>(Step, null, preferLocal: true);
            }
            else
            {
                done.Set();
            }
        }
        pool.UnsafeQueueUserWorkItem(Step, null);
        Waits.For(done, "the chain of short items");
        Assert.False(Waits.Poll(() => reports.Count > 0, threshold), $"{reports.Count} reports of short items");
    }

    [Fact]
    public void DetectionOff_ReportsNothing_AndStartsNoTimerThread()
    {
        using WorkerPool pool = NewPool("off", Timeout.InfiniteTimeSpan);
        Assert.Equal(Timeout.InfiniteTimeSpan, pool.StuckItemThreshold);
        using var reports = new Reports(pool);
        using var gate = new Gate();
        pool.UnsafeQueueUserWorkItem(BlockUntilReleased, gate);
        Waits.For(gate.Entered, "the blocking item");
        Assert.False(Waits.Poll(() => reports.Count > 0, Threshold * 4), "a report with detection off");
        Assert.False(pool.HasTimerThread, "a timer thread without timers or detection");
        gate.Release();
    }

    [Fact]
    public void DetectionOn_TimerThreadStartsWithTheFirstWorker_AndExitsAtShutdown()
    {
        WorkerPool pool = NewPool("thread", Threshold);
        Assert.Equal(Threshold, pool.StuckItemThreshold);
        Assert.False(pool.HasTimerThread); // no worker yet
        using var ran = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(_ => ran.Set(), null);
        Waits.For(ran, "the item");
        Waits.Until(() => pool.TimerThreadIsAlive, "the timer thread, which watches the workers");
        pool.Dispose();
        Waits.Until(() => !pool.TimerThreadIsAlive, "the timer thread exits once the pool has stopped");
    }

    [Fact]
    public void AnIdleWorker_KeepsNoCompletedItemAlive()
    {
        // Workers publish the callback of the item they run and drop it when they park: a closure (and what it captured)
        // becomes collectable once the worker is idle.
        using WorkerPool pool = NewPool("retention", Threshold);
        using var done = new ManualResetEventSlim();
        WeakReference payload = QueueClosureHoldingPayload(pool, done);
        Waits.For(done, "the closure");
        Retention.AssertCollected(payload, "what the last item's callback captured, once its worker is idle");
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference QueueClosureHoldingPayload(WorkerPool pool, ManualResetEventSlim done)
    {
        var payload = new byte[1024];
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            GC.KeepAlive(payload);
            done.Set();
        }, null);
        return new WeakReference(payload);
    }

    [Fact]
    public void WorkItem_IsDescribedByItsType()
    {
        using WorkerPool pool = NewPool("workitem", Threshold);
        using var reports = new Reports(pool);
        using var gate = new Gate();
        pool.UnsafeQueueUserWorkItem(new BlockingWorkItem(gate), preferLocal: false);
        StuckWorkItemEventArgs report = reports.WaitForFirst("the work item's report");
        gate.Release();
        Assert.Equal(typeof(BlockingWorkItem).FullName, report.Description);
        Assert.Equal(gate.ThreadId, report.ManagedThreadId);
    }

    public static TheoryData<string> Ways => new()
    {
        "WaitCallback", "Action<struct>", "Run", "RunAsValueTask", "Post", "Send", "Timer", "RegisteredWait", "Task",
    };

    /// <summary>The pool's own wrappers are named by the caller's delegate they run (a task by its id).</summary>
    [Theory]
    [MemberData(nameof(Ways))]
    public void LibraryWrappers_AreNamedByTheDelegateTheyRun(string way)
    {
        using WorkerPool pool = NewPool("wrappers", Threshold);
        using var reports = new Reports(pool);
        using var gate = new Gate();
        var signal = new PoolSignal();
        string expected = NameOf(nameof(BlockUntilReleased));
        ITimer? timer = null;
        TestThread? sender = null;
        switch (way)
        {
            case "WaitCallback":
                pool.QueueUserWorkItem(BlockUntilReleased, gate);
                break;
            case "Action<struct>":
                pool.QueueUserWorkItem(BlockOnStruct, new GateHolder(gate), preferLocal: false);
                expected = NameOf(nameof(BlockOnStruct));
                break;
            case "Run":
                _ = pool.Run(gate.Block);
                expected = typeof(Gate).FullName + "." + nameof(Gate.Block);
                break;
            case "RunAsValueTask":
                _ = pool.RunAsValueTask(gate.Block).AsTask();
                expected = typeof(Gate).FullName + "." + nameof(Gate.Block);
                break;
            case "Post":
                pool.SynchronizationContext.Post(BlockUntilReleased, gate);
                break;
            case "Send":
                sender = Waits.Start(() => pool.SynchronizationContext.Send(BlockUntilReleased, gate), "sender");
                break;
            case "Timer":
                timer = pool.CreateTimer(BlockUntilReleased, gate, TimeSpan.Zero, Timeout.InfiniteTimeSpan);
                break;
            case "RegisteredWait":
                pool.RegisterWait(signal, BlockOnWait, gate, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
                signal.Set();
                expected = NameOf(nameof(BlockOnWait));
                break;
            case "Task":
                Task task = Task.Factory.StartNew(gate.Block, CancellationToken.None,
                    TaskCreationOptions.None, pool.TaskScheduler);
                expected = $"Task {task.Id}";
                break;
            default:
                throw new ArgumentOutOfRangeException(nameof(way), way, null);
        }
        StuckWorkItemEventArgs report = reports.WaitForFirst($"the report ({way})");
        gate.Release();
        sender?.Join();
        timer?.Dispose();
        Assert.Equal(expected, report.Description);
    }

    /// <summary>
    /// The library's wrappers of a whole entry (a queue-wait sample, a lane's long-running item) are named by the entry
    /// they run; a long-running item is recognised through them.
    /// </summary>
    [Fact]
    public void EntryWrappers_AreNamedByTheEntryTheyRun()
    {
        using WorkerPool pool = NewPool("entrywrappers", Threshold);
        using var gate = new Gate();
        var plain = new WorkItemEntry(new WaitCallback(BlockUntilReleased), gate, null);
        var sampled = new WaitSampledItem(plain, 0, pool.Metrics, null);
        Assert.Equal(NameOf(nameof(BlockUntilReleased)), ItemDescriber.DescribeItem(sampled, WorkItemEntry.WorkItemMarker));
        Assert.False(ItemDescriber.IsLongRunning(sampled));

        var longRunning = new LongRunningLaneItem(new WorkItemEntry(new BlockingWorkItem(gate), WorkItemEntry.WorkItemMarker, null));
        var sampledLongRunning = new WaitSampledItem(new WorkItemEntry(longRunning, WorkItemEntry.WorkItemMarker, null), 0, pool.Metrics, null);
        Assert.Equal(typeof(BlockingWorkItem).FullName, ItemDescriber.DescribeItem(sampledLongRunning, WorkItemEntry.WorkItemMarker));
        Assert.True(ItemDescriber.IsLongRunning(longRunning));
        Assert.True(ItemDescriber.IsLongRunning(sampledLongRunning));
    }

    [Fact]
    public void LaneItem_NamesItsLane()
    {
        using WorkerPool pool = NewPool("lane", Threshold);
        using var reports = new Reports(pool);
        using var gate = new Gate();
        using WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "reports-lane" });
        lane.UnsafeQueueUserWorkItem(BlockUntilReleased, gate);
        StuckWorkItemEventArgs report = reports.WaitForFirst("the lane item's report");
        gate.Release();
        Assert.Equal("reports-lane", report.LaneName);
        Assert.Equal($"lane 'reports-lane': {NameOf(nameof(BlockUntilReleased))}", report.Description);
    }

    [Fact]
    public void LongRunningLaneItem_IsNotWatched()
    {
        using WorkerPool pool = NewPool("longlane", Threshold);
        using var reports = new Reports(pool);
        using var gate = new Gate();
        using WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "long" });
        lane.QueueUserWorkItem(BlockUntilReleased, gate, WorkItemOptions.LongRunning);
        Waits.For(gate.Entered, "the long-running item");
        Assert.False(Waits.Poll(() => reports.Count > 0, Threshold * 4), "a report of a long-running item");
        gate.Release();
    }

    [Fact]
    public void ThrowingHandler_DoesNotStopTheOthers()
    {
        using WorkerPool pool = NewPool("throwing", Threshold);
        pool.StuckWorkItemDetected += (_, _) => throw new InvalidOperationException("handler failure");
        using var reports = new Reports(pool);
        using var gate = new Gate();
        pool.UnsafeQueueUserWorkItem(BlockUntilReleased, gate);
        reports.WaitForFirst("the report, past the throwing handler");
        gate.Release();
        using var after = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(_ => after.Set(), null);
        Waits.For(after, "an item after the throwing handler");
    }

    [Fact]
    public void EventSource_WritesStuckWorkItem_WithItsPayloadNames()
    {
        using WorkerPool pool = NewPool("eventsource", Threshold);
        using var listener = new StuckItemListener(pool.Name);
        using var gate = new Gate();
        pool.UnsafeQueueUserWorkItem(BlockUntilReleased, gate);
        Waits.For(listener.Seen, "the StuckWorkItem event");
        gate.Release();

        EventWrittenEventArgs e = listener.First!;
        Assert.Equal(5, e.EventId);
        Assert.Equal("StuckWorkItem", e.EventName);
        Assert.Equal(EventLevel.Warning, e.Level);
        Assert.Equal(["PoolName", "Item", "WorkerId", "RunningMs"], e.PayloadNames!.ToArray());
        ReadOnlyCollection<object?> payload = e.Payload!;
        Assert.Equal(pool.Name, payload[0]);
        Assert.Equal(NameOf(nameof(BlockUntilReleased)), payload[1]);
        Assert.True((int)payload[2]! >= 1);
        Assert.True((double)payload[3]! >= Threshold.TotalMilliseconds, $"RunningMs {payload[3]}");
    }

    /// <summary>Listens to the Spindle source's WorkItems keyword and keeps the StuckWorkItem events of one pool.</summary>
    private sealed class StuckItemListener(string poolName) : EventListener
    {
        public ManualResetEventSlim Seen { get; } = new();

        public EventWrittenEventArgs? First { get; private set; }

        protected override void OnEventSourceCreated(EventSource eventSource)
        {
            // May run from the base constructor, before this class's fields exist.
            if (eventSource.Name == "Spindle")
            {
                EnableEvents(eventSource, EventLevel.Warning, (EventKeywords)0x2);
            }
        }

        protected override void OnEventWritten(EventWrittenEventArgs eventData)
        {
            if (eventData.EventId == 5 && eventData.Payload is { Count: > 0 } payload && Equals(payload[0], poolName) && First is null)
            {
                First = eventData;
                Seen.Set();
            }
        }

        public override void Dispose()
        {
            base.Dispose();
            Seen.Dispose();
        }
    }

    public static TheoryData<TimeSpan> BadThresholds => new()
    {
        TimeSpan.Zero,
        TimeSpan.FromTicks(5_000), // half a millisecond
        TimeSpan.FromMilliseconds(-2),
        TimeSpan.FromMilliseconds((double)int.MaxValue + 1),
        TimeSpan.MaxValue,
    };

    [Theory]
    [MemberData(nameof(BadThresholds))]
    public void BadThreshold_IsRejected_NamingTheOption(TimeSpan threshold)
    {
        var options = new WorkerPoolOptions { StuckItemThreshold = threshold };
        ArgumentOutOfRangeException e = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.StuckItemThreshold), e.ParamName);
    }

    [Fact]
    public void Threshold_DefaultsToThirtySeconds_AndAcceptsOneMillisecondAndInfinite()
    {
        Assert.Equal(TimeSpan.FromSeconds(30), new WorkerPoolOptions().StuckItemThreshold);
        using (var pool = new WorkerPool(new WorkerPoolOptions { StuckItemThreshold = TimeSpan.FromMilliseconds(1) }))
        {
            Assert.Equal(TimeSpan.FromMilliseconds(1), pool.StuckItemThreshold);
        }
        using (var pool = new WorkerPool(new WorkerPoolOptions { StuckItemThreshold = Timeout.InfiniteTimeSpan }))
        {
            Assert.Equal(Timeout.InfiniteTimeSpan, pool.StuckItemThreshold);
        }
        using (var pool = new WorkerPool())
        {
            Assert.Equal(TimeSpan.FromSeconds(30), pool.StuckItemThreshold);
        }
    }
}
