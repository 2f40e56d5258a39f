using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A work item that implements <see cref="ICancellableWorkItem"/>: each queueing ends in exactly one of Execute and
/// OnCancelled; a cancelling shutdown of the pool or of the lane calls OnCancelled (on the shutting-down thread, before
/// the call returns), and what OnCancelled throws meets the pool's exception policy.
/// </summary>
public sealed class CancellableWorkItemTests
{
    private sealed class Recorder(Action? onCancelled = null) : ICancellableWorkItem
    {
        public int Executed;
        public int Cancelled;
        public int CancelledOnThread;

        public void Execute() => Interlocked.Increment(ref Executed);

        public void OnCancelled()
        {
            CancelledOnThread = Environment.CurrentManagedThreadId;
            Interlocked.Increment(ref Cancelled);
            onCancelled?.Invoke();
        }
    }

    private static WorkerPool NewPool(string name, int threads = 1) => new(new WorkerPoolOptions
    {
        Name = $"{name}-{Guid.NewGuid():N}",
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void AnItemThatRuns_IsNotToldItWasCancelled()
    {
        using WorkerPool pool = NewPool(nameof(AnItemThatRuns_IsNotToldItWasCancelled));
        var item = new Recorder();
        Assert.True(pool.UnsafeQueueUserWorkItem(item, preferLocal: false));
        Waits.Until(() => Volatile.Read(ref item.Executed) == 1, "the item to run");
        pool.Shutdown(ShutdownMode.CancelPending);
        Assert.Equal(1, item.Executed);
        Assert.Equal(0, item.Cancelled);
    }

    [Fact]
    public void APoolsCancellingShutdown_TellsEachQueueingItDropped_BeforeItReturns()
    {
        WorkerPool pool = NewPool(nameof(APoolsCancellingShutdown_TellsEachQueueingItDropped_BeforeItReturns));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var item = new Recorder();
        Assert.True(pool.UnsafeQueueUserWorkItem(item, preferLocal: false));
        Assert.True(pool.UnsafeQueueUserWorkItem(item, preferLocal: false)); // the same object twice: two queueings
        int shutdownThread = 0;
        Task<int> shutdown = Task.Run(() =>
        {
            shutdownThread = Environment.CurrentManagedThreadId;
            return pool.Shutdown(ShutdownMode.CancelPending);
        });
        Waits.Until(() => Volatile.Read(ref item.Cancelled) == 2, "both queueings to be told");
        Assert.Equal(shutdownThread, item.CancelledOnThread);
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the shutdown did not return");
        Assert.Equal(2, shutdown.Result);
        Assert.Equal(0, item.Executed);
        Assert.Equal(2, item.Cancelled);
    }

    [Fact]
    public void ALanesCancellingShutdown_TellsTheItemItDropped()
    {
        using WorkerPool pool = NewPool(nameof(ALanesCancellingShutdown_TellsTheItemItDropped), threads: 2);
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "capped", MaxConcurrency = 1 });
        using var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(started, "the item holding the lane's slot");
        var item = new Recorder();
        Assert.True(lane.UnsafeQueueUserWorkItem(item, preferLocal: false));
        Task<int> shutdown = lane.ShutdownAsync(ShutdownMode.CancelPending);
        Waits.Until(() => Volatile.Read(ref item.Cancelled) == 1, "the dropped item to be told");
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the lane did not stop");
        Assert.Equal(1, shutdown.Result);
        Assert.Equal(0, item.Executed);
    }

    [Fact]
    public void WhatOnCancelledThrows_IsReportedAsAWorkItemsException_AndTheOthersAreStillTold()
    {
        WorkerPool pool = NewPool(nameof(WhatOnCancelledThrows_IsReportedAsAWorkItemsException_AndTheOthersAreStillTold));
        var reported = new ConcurrentQueue<Exception>();
        pool.UnhandledException += (_, e) => reported.Enqueue(e.Exception);
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var failure = new InvalidOperationException("OnCancelled failed");
        var throwing = new Recorder(() => throw failure);
        var quiet = new Recorder();
        Assert.True(pool.UnsafeQueueUserWorkItem(throwing, preferLocal: false));
        Assert.True(pool.UnsafeQueueUserWorkItem(quiet, preferLocal: false));
        Task<int> shutdown = Task.Run(() => pool.Shutdown(ShutdownMode.CancelPending));
        Waits.Until(() => Volatile.Read(ref quiet.Cancelled) == 1, "the second item to be told");
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the shutdown did not return");
        Assert.Equal(1, throwing.Cancelled);
        Assert.Same(failure, Assert.Single(reported));
        pool.Dispose();
    }
}
