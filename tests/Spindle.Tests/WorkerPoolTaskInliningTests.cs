using System;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A task a worker queued to itself and then waits for runs inline, and its queued entry does not stay behind holding
/// the finished task; a queued entry that cannot be taken back runs nothing when a worker reaches it.
/// </summary>
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
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            stateCollected = !state.IsAlive;
        }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);

        Assert.True(outer.Wait(Waits.MustHappen), "the waited task was not run inline (and nothing else could run it)");
        Assert.Equal(outerThread, innerThread);
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

    /// <summary>
    /// Queues a task holding a state object to the pool's scheduler from the calling worker and waits for it (which runs
    /// it inline); returns a weak reference to the state, so that no local of the caller keeps the task alive.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static WeakReference QueueAndWait(WorkerPool pool, Action<int> ranOn, out long queued)
    {
        var state = new object();
        Task inner = Task.Factory.StartNew(s => ranOn(Environment.CurrentManagedThreadId), state, CancellationToken.None,
            TaskCreationOptions.None, pool.TaskScheduler);
        queued = pool.PendingWorkItemCount;
        inner.Wait(); // untimed and uncancellable: the wait Task inlines
        Assert.True(inner.IsCompletedSuccessfully, inner.Exception?.ToString());
        return new WeakReference(state);
    }
}
