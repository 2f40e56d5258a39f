using System;
using System.Diagnostics.Metrics;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A task a worker queued and then waits for runs inline, and its queued entry does not stay behind holding the finished
/// task (taken back from the worker's ring; on a lane, left in the lane's queue without the task); a queued entry that
/// cannot be released runs nothing when a worker reaches it.
/// </summary>
/// <remarks>
/// Runs alone: while another test's meter listener has the queue-wait histogram on, the pool wraps some enqueues in a
/// timing sample, and a lane's queue cannot release a wrapped entry (the pool's own queue can).
/// </remarks>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolTaskInliningTests
{
    // One worker: nothing but the waiting task can run or take what it queues, so the queue's length shows what is left.
    private static WorkerPool NewOneThreadPool() => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolTaskInliningTests),
        MinThreads = 1,
        MaxThreads = 1,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void WaitingForTheTaskItQueuedLast_RunsItInline_AndTakesItsEntryBack()
    {
        using var pool = NewOneThreadPool();
        long queuedBefore = -1, queuedAfter = -1;
        bool stateCollected = false;
        int outerThread = 0, innerThread = 0;
        Task outer = Task.Factory.StartNew(() =>
        {
            outerThread = Environment.CurrentManagedThreadId;
            WeakReference state = QueueAndWait(pool, thread => innerThread = thread, out queuedBefore);
            queuedAfter = pool.PendingWorkItemCount;
            // Still inside the item that queued the task: only a queued entry could keep the task's state reachable now.
            stateCollected = Retention.IsCollectedNow(state);
        }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);

        Assert.True(outer.Wait(Waits.MustHappen), "the waited task was not run inline (and nothing else could run it)");
        Assert.Equal(outerThread, innerThread);
        Assert.Equal(1, queuedBefore);
        Assert.Equal(0, queuedAfter);
        Assert.True(stateCollected, "the finished task's state was still reachable from the pool's queues");
    }

    [Fact]
    public void WithTheQueueWaitHistogramOn_ASampledEntryIsTakenBackToo()
    {
        // With a listener on, a worker's first enqueue after a park is queued inside a timing sample, a work item that
        // goes to the worker's LIFO slot rather than its ring: the take-back must find it there.
        using MeterListener listener = QueueWaitListener.Start();
        using var pool = NewOneThreadPool();
        long queuedBefore = -1, queuedAfter = -1;
        bool stateCollected = false;
        Task outer = Task.Factory.StartNew(() =>
        {
            WeakReference state = QueueAndWait(pool, _ => { }, out queuedBefore);
            queuedAfter = pool.PendingWorkItemCount;
            stateCollected = Retention.IsCollectedNow(state);
        }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);

        Assert.True(outer.Wait(Waits.MustHappen), "the waited task was not run inline");
        Assert.Equal(1, queuedBefore);
        Assert.Equal(0, queuedAfter);
        Assert.True(stateCollected, "the finished task's state was still reachable from the pool's queues");
    }

    [Fact]
    public void ATaskQueuedBeforeOtherWork_RunsInlineOnce_AndItsEntryRunsNothingLater()
    {
        using var pool = NewOneThreadPool();
        int innerRuns = 0;
        long queuedAfterWait = -1;
        using var laterRan = new ManualResetEventSlim();
        Task outer = Task.Factory.StartNew(() =>
        {
            Task inner = Task.Factory.StartNew(() => Interlocked.Increment(ref innerRuns));
            // Queued after the task, so the task's entry is no longer the newest and stays queued.
            pool.UnsafeQueueUserWorkItem(static (ManualResetEventSlim gate) => gate.Set(), laterRan, preferLocal: true);
            inner.Wait();
            queuedAfterWait = pool.PendingWorkItemCount;
        }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);

        Assert.True(outer.Wait(Waits.MustHappen), "the waited task was not run inline");
        Assert.Equal(2, queuedAfterWait); // the task's finished entry and the later item
        Waits.For(laterRan, "the item queued after the task");
        Waits.Until(() => pool.PendingWorkItemCount == 0, "the pool to reach the task's finished entry");
        Assert.Equal(1, Volatile.Read(ref innerRuns));
    }

    [Fact]
    public void OnALane_WaitingForATaskItQueued_RunsItInline_AndTheEntryNoLongerHoldsIt()
    {
        using var pool = NewOneThreadPool();
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "inline" });
        long queuedBefore = -1, queuedAfter = -1;
        bool stateCollected = false;
        int innerThread = 0, outerThread = 0;
        Task outer = Task.Factory.StartNew(() =>
        {
            outerThread = Environment.CurrentManagedThreadId;
            WeakReference state = QueueAndWait(lane.TaskScheduler, thread => innerThread = thread, () => lane.PendingWorkItemCount, out queuedBefore);
            queuedAfter = lane.PendingWorkItemCount;
            stateCollected = Retention.IsCollectedNow(state);
        }, CancellationToken.None, TaskCreationOptions.None, lane.TaskScheduler);

        Assert.True(outer.Wait(Waits.MustHappen), "the waited task was not run inline on the lane");
        Assert.Equal(outerThread, innerThread);
        Assert.Equal(1, queuedBefore);
        Assert.Equal(1, queuedAfter); // a lane's queue is shared: the entry keeps its place, without the task
        Assert.True(stateCollected, "the finished task's state was still reachable from the lane's queue");
        Waits.Until(() => lane.PendingWorkItemCount == 0 && lane.RunningWorkItemCount == 0, "the lane to reach the released entry");
    }

    /// <summary>
    /// Queues a task holding a state object to a scheduler of the pool from the calling worker and waits for it (which
    /// runs it inline); returns a weak reference to the state, so that no local of the caller keeps the task alive.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference QueueAndWait(WorkerPool pool, Action<int> ranOn, out long queued) =>
        QueueAndWait(pool.TaskScheduler, ranOn, () => pool.PendingWorkItemCount, out queued);

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference QueueAndWait(TaskScheduler scheduler, Action<int> ranOn, Func<long> pending, out long queued)
    {
        var state = new object();
        Task inner = Task.Factory.StartNew(s => ranOn(Environment.CurrentManagedThreadId), state, CancellationToken.None,
            TaskCreationOptions.None, scheduler);
        queued = pending();
        inner.Wait(); // untimed and uncancellable: the wait Task inlines
        Assert.True(inner.IsCompletedSuccessfully, inner.Exception?.ToString());
        return new WeakReference(state);
    }
}
