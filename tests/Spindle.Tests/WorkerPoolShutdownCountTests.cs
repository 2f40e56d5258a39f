using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// <see cref="WorkerPool.Shutdown(ShutdownMode)"/> with <see cref="ShutdownMode.CancelPending"/> returns exactly the
/// accepted work items and Run items that will now never run: not the Run items their own token cancelled already, not
/// firings of timers that were disposed, and not callbacks that shutdown runs anyway (continuations, scheduler tasks,
/// timer callbacks).
/// </summary>
public sealed class WorkerPoolShutdownCountTests
{
    /// <summary>Starts Shutdown(CancelPending) on another thread, releases the blocked worker once it has begun, returns the count.</summary>
    private static int CancelPendingWhileBlocked(WorkerPool pool, ManualResetEventSlim gate)
    {
        Task<int> shutdown = Task.Factory.StartNew(() => pool.Shutdown(ShutdownMode.CancelPending), TaskCreationOptions.LongRunning);
        Waits.Until(() => pool.IsShutdownStarted, "shutdown begins");
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "Shutdown(CancelPending) returns");
        return shutdown.Result;
    }

    [Fact]
    public void CancelPending_DoesNotCountRunItemsTheirTokenCancelledAlready()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownCountTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        using var cts = new CancellationTokenSource();
        var runs = new List<Task>();
        int ran = 0;
        for (int i = 0; i < 10; i++)
        {
            runs.Add(pool.Run(() => Interlocked.Increment(ref ran), cts.Token));
        }
        cts.Cancel();
        for (int i = 0; i < 5; i++)
        {
            pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }

        Assert.Equal(5, CancelPendingWhileBlocked(pool, gate));
        Assert.Equal(0, ran);
        foreach (Task run in runs)
        {
            Assert.Equal(TaskStatus.Canceled, run.Status);
        }
    }

    [Fact]
    public void CancelPending_CountsRunItemsItCancels_OnceEach()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownCountTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        using var cts = new CancellationTokenSource();
        var runs = new List<Task>
        {
            pool.Run(() => { }),
            pool.Run(() => 1),
            pool.Run(async () => await Task.Yield()),
            pool.Run(async () => { await Task.Yield(); return 1; }),
            pool.Run(() => { }, cts.Token),
            pool.RunAsValueTask(() => { }).AsTask(),
            pool.RunAsValueTask(() => 2, cts.Token).AsTask(),
        };
        pool.QueueUserWorkItem(_ => { });

        Assert.Equal(runs.Count + 1, CancelPendingWhileBlocked(pool, gate));
        foreach (Task run in runs)
        {
            Assert.True(((IAsyncResult)run).AsyncWaitHandle.WaitOne(Waits.MustHappen), "the run completes");
            Assert.True(run.IsCanceled, $"a run cancelled by shutdown is reported cancelled ({run.Status})");
        }
    }

    [Fact]
    public void CancelPending_DoesNotCountFiringsOfTimersDisposedBeforeTheyRan()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownCountTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        int fired = 0;
        var timers = new List<ITimer>();
        for (int i = 0; i < 7; i++)
        {
            timers.Add(pool.CreateTimer(_ => Interlocked.Increment(ref fired), null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan));
        }
        // The only worker is blocked, so the firings wait in the pool's ready list.
        Waits.Until(() => pool.PendingWorkItemCount == 7, "the seven firings are pending");
        foreach (ITimer timer in timers)
        {
            timer.Dispose();
        }

        Assert.Equal(0, CancelPendingWhileBlocked(pool, gate));
        Assert.Equal(0, fired);
    }

    [Fact]
    public void CancelPending_DoesNotCountWaitFirings_WhichEndWithTheirRegistrations()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownCountTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var signal = new PoolSignal(initialState: false, PoolSignalMode.ManualReset);
        int called = 0;
        RegisteredWait registration = pool.RegisterWait(signal, (_, _) => Interlocked.Increment(ref called), null,
            Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        signal.Set(); // queues the firing behind the blocked worker
        Waits.Until(() => pool.PendingWorkItemCount == 1, "the firing is pending");
        pool.QueueUserWorkItem(_ => Interlocked.Increment(ref called));

        Assert.Equal(1, CancelPendingWhileBlocked(pool, gate)); // the work item, not the firing
        Assert.Equal(0, called);
        Assert.True(registration.IsUnregistered); // shutdown ended it already
        Assert.True(registration.Unregister(null)); // the owner's first call still succeeds
        Assert.False(registration.Unregister(null));
    }

    [Fact]
    public void CancelPending_RunsTimerCallbacksOfLiveTimers_WithoutCountingThem()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownCountTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        int fired = 0;
        using ITimer timer = pool.CreateTimer(_ => Interlocked.Increment(ref fired), null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);
        Waits.Until(() => pool.PendingWorkItemCount == 1, "the firing is pending");

        Assert.Equal(0, CancelPendingWhileBlocked(pool, gate));
        Assert.Equal(1, fired); // a Task.Delay or CancelAfter on the pool's TimeProvider must still complete
    }

    [Fact]
    public void CancelPending_CancelsAndCountsUserItemsWhoseStateIsALibraryObject()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownCountTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var signal = new PoolSignal(initialState: false, PoolSignalMode.ManualReset);
        RegisteredWait registration = pool.RegisterWait(signal, (_, _) => { }, null, Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        using ITimer timer = pool.CreateTimer(_ => { }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        int ran = 0;
        // Plain work items that merely carry the pool's own objects as their state, or are bound to one: shutdown must
        // not mistake them for the wait firings, timer firings and scheduler tasks it runs anyway.
        pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), registration);
        pool.UnsafeQueueUserWorkItem(_ => Interlocked.Increment(ref ran), timer);
        var bound = new StrongBox<int>();
        pool.QueueUserWorkItem(new WaitCallback(pool.TaskScheduler.CountInto), bound);
        pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), pool.TaskScheduler);

        Assert.Equal(4, CancelPendingWhileBlocked(pool, gate));
        Assert.Equal(0, ran);
        Assert.Equal(0, bound.Value);
    }
}

/// <summary>Binds a work item's delegate to a library object, as an extension method can.</summary>
internal static class LibraryObjectBinding
{
    public static void CountInto(this WorkerPoolTaskScheduler scheduler, object? state)
    {
        GC.KeepAlive(scheduler);
        Interlocked.Increment(ref ((StrongBox<int>)state!).Value);
    }
}
