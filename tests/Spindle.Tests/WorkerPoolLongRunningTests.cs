using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary><see cref="WorkItemOptions.LongRunning"/>: dedicated threads, reuse, retirement, shutdown and bad input.</summary>
public sealed class WorkerPoolLongRunningTests
{
    private static readonly AsyncLocal<string?> s_flowed = new();

    private static WorkerPool NewPool(Action<WorkerPoolOptions>? configure = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolLongRunningTests),
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        configure?.Invoke(options);
        return new WorkerPool(options);
    }

    [Fact]
    public void LongRunningItem_RunsOnADedicatedThreadOfThePool_NotOnAWorker()
    {
        using var pool = NewPool();
        using var release = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        WorkerPool? current = null;
        string? name = null;
        pool.QueueUserWorkItem<int>(_ =>
        {
            current = WorkerPool.Current;
            name = Thread.CurrentThread.Name;
            started.Set();
            release.Wait(Waits.MustHappen);
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(started, "the long-running item");
        Assert.Same(pool, current);
        Assert.Contains("long-running", name);
        Assert.Equal(1, pool.DedicatedThreadCount);
        Assert.Equal(0, pool.ThreadCount); // no worker was needed
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning));
        release.Set();
        Waits.Until(() => pool.CompletedWorkItemCount == 1, "the item to complete");
    }

    [Fact]
    public void LongRunningItems_AllStartAtOnce_AndFreeThreadsAreReused()
    {
        const int items = 6;
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        using var all = new CountdownEvent(items);
        using var release = new ManualResetEventSlim();
        for (int i = 0; i < items; i++)
        {
            pool.UnsafeQueueUserWorkItem<int>(_ =>
            {
                all.Signal();
                release.Wait(Waits.MustHappen);
            }, i, WorkItemOptions.LongRunning);
        }
        Waits.For(all, "every long-running item to be running at once (MaxThreads = 1 does not limit them)");
        release.Set();
        Waits.Until(() => pool.CompletedWorkItemCount == items, "the items to complete");
        Waits.Until(() => pool.IdleDedicatedThreadCount == items, "the dedicated threads to wait for more work");
        Assert.Equal(items, pool.DedicatedThreadCount); // idle, kept for the idle timeout

        using var again = new CountdownEvent(items);
        for (int i = 0; i < items; i++)
        {
            pool.UnsafeQueueUserWorkItem<int>(_ => again.Signal(), i, WorkItemOptions.LongRunning);
        }
        Waits.For(again, "a second round of long-running items");
        Assert.Equal(items, pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning)); // no new thread
    }

    /// <summary>
    /// Runs one long-running item and holds its thread on its way back (counted as returning, neither idle nor busy) at
    /// the dedicated threads' lock, which the caller holds until the returned scope ends; <paramref name="threadId"/> is
    /// that thread's.
    /// </summary>
    private static Lock.Scope HoldAThreadOnItsWayBack(WorkerPool pool, out int threadId)
    {
        int id = 0;
        using var release = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem<int>(_ =>
        {
            id = Environment.CurrentManagedThreadId;
            started.Set();
            release.Wait(Waits.MustHappen);
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(started, "the first item"); // its thread takes the lock on the way in, too
        Lock.Scope held = pool.DedicatedCore.EnterLockForTests();
        release.Set();
        Waits.Until(() => pool.CompletedWorkItemCount == 1, "the first item to return");
        threadId = id;
        return held;
    }

    [Fact]
    public void ItemQueuedWhileTheLastOneIsReturning_GoesToItsThread_NotToANewOne()
    {
        using var pool = NewPool();
        int firstThread;
        int secondThread = 0;
        using var secondRan = new ManualResetEventSlim();
        using (HoldAThreadOnItsWayBack(pool, out firstThread))
        {
            Assert.Equal(0, pool.IdleDedicatedThreadCount);
            pool.UnsafeQueueUserWorkItem<int>(_ =>
            {
                secondThread = Environment.CurrentManagedThreadId;
                secondRan.Set();
            }, 0, WorkItemOptions.LongRunning);
            Assert.Equal(1, pool.DedicatedThreadCount); // left for the returning thread: no thread started
        }
        Waits.For(secondRan, "the item left for the returning thread");
        Assert.Equal(firstThread, secondThread);
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning));
        Waits.Until(() => pool.IdleDedicatedThreadCount == 1, "the thread to wait for more work");
    }

    [Fact]
    public void ItemLeftForAReturningThread_StillRunsWhenShutdownBeginsMeanwhile()
    {
        var pool = NewPool();
        bool secondRan = false;
        System.Threading.Tasks.Task dispose;
        using (HoldAThreadOnItsWayBack(pool, out _))
        {
            pool.UnsafeQueueUserWorkItem<int>(_ => Volatile.Write(ref secondRan, true), 0, WorkItemOptions.LongRunning);
            // Shutdown begins while the returning thread has not yet looked for the item (it waits at this lock too).
            dispose = System.Threading.Tasks.Task.Run(pool.Dispose);
            Waits.Until(() => pool.IsShutdownStarted, "the shutdown to begin");
        }
        Assert.True(dispose.Wait(Waits.MustHappen), "the shutdown to complete");
        Assert.True(Volatile.Read(ref secondRan)); // accepted before the shutdown: run, not lost
        Assert.Equal(2, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.DedicatedThreadCount);
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning));
    }

    [Fact]
    public void ItemLeftForAReturningThread_IsCancelledWhenACancellingShutdownBeginsMeanwhile()
    {
        var pool = NewPool();
        bool secondRan = false;
        System.Threading.Tasks.Task<int> shutdown;
        using (HoldAThreadOnItsWayBack(pool, out _))
        {
            pool.UnsafeQueueUserWorkItem<int>(_ => Volatile.Write(ref secondRan, true), 0, WorkItemOptions.LongRunning);
            // The cancelling shutdown begins while the item waits for the returning thread's look (at this lock too):
            // the item has not started, so it is dropped and counted, as a queued item is.
            shutdown = System.Threading.Tasks.Task.Run(() => pool.Shutdown(ShutdownMode.CancelPending));
            Waits.Until(() => pool.IsShutdownStarted, "the shutdown to begin");
        }
        Assert.True(shutdown.Wait(Waits.MustHappen), "the shutdown to complete");
        Assert.False(Volatile.Read(ref secondRan));
        Assert.Equal(1, shutdown.Result);
        Assert.Equal(1, pool.CancelledWorkItemCount);
        Assert.Equal(1, pool.CompletedWorkItemCount);
        Assert.Equal(0, pool.DedicatedThreadCount);
    }

    [Fact]
    public void IdleDedicatedThreads_RetireAfterTheIdleTimeout()
    {
        using var pool = NewPool(o => o.IdleTimeout = TimeSpan.FromMilliseconds(50));
        using var ran = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem<ManualResetEventSlim>(static e => e.Set(), ran, WorkItemOptions.LongRunning);
        Waits.For(ran, "the item");
        Waits.Until(() => pool.DedicatedThreadCount == 0, "the idle dedicated thread to retire");
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.RetiredIdle));

        using var again = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem<ManualResetEventSlim>(static e => e.Set(), again, WorkItemOptions.LongRunning);
        Waits.For(again, "an item after the retirement");
    }

    [Fact]
    public void ExecutionContext_FlowsOnTheSafePathOnly()
    {
        using var pool = NewPool();
        s_flowed.Value = "caller";
        string? seenSafe = "unset", seenUnsafe = "unset";
        using var done = new CountdownEvent(2);
        pool.QueueUserWorkItem<int>(_ => { seenSafe = s_flowed.Value; done.Signal(); }, 0, WorkItemOptions.LongRunning);
        pool.UnsafeQueueUserWorkItem<int>(_ => { seenUnsafe = s_flowed.Value; done.Signal(); }, 0, WorkItemOptions.LongRunning);
        s_flowed.Value = null;
        Waits.For(done, "both items");
        Assert.Equal("caller", seenSafe);
        Assert.Null(seenUnsafe);
    }

    [Fact]
    public void WorkItemInterface_WithLongRunning_Runs()
    {
        using var pool = NewPool();
        var item = new SignalItem();
        pool.UnsafeQueueUserWorkItem(item, WorkItemOptions.LongRunning | WorkItemOptions.PreferLocal);
        Waits.For(item.Ran, "the work item");
        Assert.Equal(1, pool.DedicatedThreadCount);
    }

    [Fact]
    public void ThrowingLongRunningItem_IsReportedAndTheThreadSurvives()
    {
        using var pool = NewPool();
        Exception? reported = null;
        pool.UnhandledException += (_, e) => Interlocked.CompareExchange(ref reported, e.Exception, null);
        pool.UnsafeQueueUserWorkItem<int>(_ => throw new InvalidOperationException("boom"), 0, WorkItemOptions.LongRunning);
        Waits.Until(() => Volatile.Read(ref reported) is not null, "the exception to be reported");
        Assert.Equal("boom", reported!.Message);
        Waits.Until(() => pool.IdleDedicatedThreadCount == 1, "the thread to wait for more work");
        using var ran = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem<ManualResetEventSlim>(static e => e.Set(), ran, WorkItemOptions.LongRunning);
        Waits.For(ran, "an item after the throwing one");
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning));
    }

    [Fact]
    public void Dispose_WaitsForRunningLongRunningItems_AndThenRejectsThem()
    {
        var pool = NewPool();
        using var started = new ManualResetEventSlim();
        bool finished = false;
        pool.UnsafeQueueUserWorkItem<int>(_ =>
        {
            started.Set();
            Thread.Sleep(100);
            Volatile.Write(ref finished, true);
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(started, "the item");
        pool.Dispose();
        Assert.True(Volatile.Read(ref finished));
        Assert.Equal(0, pool.DedicatedThreadCount);
        Assert.Throws<ObjectDisposedException>(() =>
            pool.UnsafeQueueUserWorkItem<int>(_ => { }, 0, WorkItemOptions.LongRunning));
    }

    [Fact]
    public void DisposeFromInsideALongRunningItem_DoesNotDeadlock()
    {
        var pool = NewPool();
        using var done = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem<int>(_ =>
        {
            pool.Dispose();
            done.Set();
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(done, "dispose from inside a long-running item to return");
        pool.Dispose(); // and from outside, afterwards: waits for the dedicated thread to exit
        Assert.Equal(0, pool.DedicatedThreadCount);
    }

    [Fact]
    public void DedicatedThreadCreationFailing_RunsTheItemOnAWorkerInstead()
    {
        // The first creation (the dedicated thread) fails; the worker created for the fallback succeeds.
        int calls = 0;
        using var pool = NewPool(o => o.ThreadFactory = (start, stack) =>
            Interlocked.Increment(ref calls) == 1 ? throw new OutOfMemoryException("injected") : new Thread(start, stack));
        using var ran = new ManualResetEventSlim();
        bool onWorker = false;
        pool.UnsafeQueueUserWorkItem<int>(_ =>
        {
            onWorker = Thread.CurrentThread.Name!.Contains('#');
            ran.Set();
        }, 0, WorkItemOptions.LongRunning);
        Waits.For(ran, "the item whose dedicated thread could not be created");
        Assert.True(onWorker);
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed));
    }

    [Theory]
    [InlineData(4)]
    [InlineData(-1)]
    [InlineData(7)]
    public void UndefinedOptions_Throw(int options)
    {
        using var pool = NewPool();
        var flags = (WorkItemOptions)options;
        Assert.Equal("options", Assert.Throws<ArgumentOutOfRangeException>(() => pool.QueueUserWorkItem<int>(_ => { }, 0, flags)).ParamName);
        Assert.Equal("options", Assert.Throws<ArgumentOutOfRangeException>(() => pool.UnsafeQueueUserWorkItem<int>(_ => { }, 0, flags)).ParamName);
        Assert.Equal("options", Assert.Throws<ArgumentOutOfRangeException>(() => pool.UnsafeQueueUserWorkItem(new SignalItem(), flags)).ParamName);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(0, pool.DedicatedThreadCount);
    }

    [Fact]
    public void NullCallbacks_Throw()
    {
        using var pool = NewPool();
        Assert.Throws<ArgumentNullException>(() => pool.QueueUserWorkItem<int>(null!, 0, WorkItemOptions.LongRunning));
        Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem<int>(null!, 0, WorkItemOptions.LongRunning));
        Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem((IWorkItem)null!, WorkItemOptions.LongRunning));
    }

    [Fact]
    public void OptionsWithoutLongRunning_UseTheWorkers()
    {
        using var pool = NewPool();
        using var done = new CountdownEvent(2);
        string? first = null;
        pool.UnsafeQueueUserWorkItem<int>(_ => { first = Thread.CurrentThread.Name; done.Signal(); }, 0, WorkItemOptions.None);
        pool.UnsafeQueueUserWorkItem<int>(_ => done.Signal(), 0, WorkItemOptions.PreferLocal);
        Waits.For(done, "both items");
        Assert.Contains("#", first);
        Assert.Equal(0, pool.DedicatedThreadCount);
    }

    private sealed class SignalItem : IWorkItem
    {
        public readonly ManualResetEventSlim Ran = new();

        public void Execute() => Ran.Set();
    }
}
