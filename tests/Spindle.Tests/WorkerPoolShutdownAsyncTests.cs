using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// <see cref="WorkerPool.ShutdownAsync(ShutdownMode, CancellationToken)"/> and <see cref="WorkerPool.DisposeAsync"/>:
/// they complete only once the pool has stopped, without a thread waiting for them; a token that fires first ends the
/// wait and (unless told otherwise) cancels what has not started, counted in <see cref="WorkerPool.CancelledWorkItemCount"/>.
/// </summary>
public sealed class WorkerPoolShutdownAsyncTests
{
    private static int QueueCounted(WorkerPool pool, int count, StrongBoxCounter ran)
    {
        for (int i = 0; i < count; i++)
        {
            pool.QueueUserWorkItem(static state => ((StrongBoxCounter)state!).Increment(), ran);
        }
        return count;
    }

    [Fact]
    public async Task ShutdownAsync_CompletesOnlyOnceEveryAcceptedItemHasRun()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var ran = new StrongBoxCounter();
        int queued = QueueCounted(pool, 10, ran);

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain);
        Assert.True(pool.IsShutdownStarted);
        Assert.False(shutdown.Wait(Waits.MustNotHappen), "the pool cannot stop while its worker is blocked in an item");
        Assert.Throws<ObjectDisposedException>(() => pool.QueueUserWorkItem(_ => { }));

        gate.Set();
        Assert.Equal(0, await shutdown.WaitAsync(Waits.MustHappen));
        Assert.Equal(queued, ran.Value);
        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(0, pool.CancelledWorkItemCount);
    }

    [Fact]
    public async Task DisposeAsync_CompletesOnlyOnceEveryAcceptedItemHasRun()
    {
        WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var ran = new StrongBoxCounter();
        int queued = QueueCounted(pool, 10, ran);

        Task dispose = pool.DisposeAsync().AsTask();
        Assert.False(dispose.Wait(Waits.MustNotHappen), "the pool cannot stop while its worker is blocked in an item");
        gate.Set();
        await dispose.WaitAsync(Waits.MustHappen);
        Assert.Equal(queued, ran.Value);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Fact]
    public async Task ShutdownAsync_WhenTheTokenFires_StopsWaitingAndCancelsWhatHasNotStarted()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var ran = new StrongBoxCounter();
        QueueCounted(pool, 5, ran);
        var runs = new List<Task>();
        for (int i = 0; i < 3; i++)
        {
            runs.Add(pool.Run(ran.Increment));
        }
        using var timeout = new CancellationTokenSource();

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain, timeout.Token);
        Assert.False(shutdown.IsCompleted);
        timeout.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => shutdown.WaitAsync(Waits.MustHappen));
        Assert.Equal(8, pool.CancelledWorkItemCount);
        foreach (Task run in runs)
        {
            Assert.Equal(TaskStatus.Canceled, run.Status);
        }
        // The running item was not interrupted; once it returns the pool stops with nothing else run.
        gate.Set();
        Assert.Equal(8, await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen));
        Assert.Equal(0, ran.Value);
    }

    [Fact]
    public async Task ShutdownAsync_WhenTheTokenFires_WithDrainWhenCancelled_OnlyStopsWaiting()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var ran = new StrongBoxCounter();
        int queued = QueueCounted(pool, 5, ran);
        using var timeout = new CancellationTokenSource();

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain, ShutdownMode.Drain, timeout.Token);
        timeout.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => shutdown.WaitAsync(Waits.MustHappen));
        Assert.Equal(0, pool.CancelledWorkItemCount);
        gate.Set();
        Assert.Equal(0, await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen));
        Assert.Equal(queued, ran.Value);
    }

    [Fact]
    public async Task ShutdownAsync_WithATokenCancelledAlready_CancelsPendingAndReturnsACancelledTask()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var ran = new StrongBoxCounter();
        QueueCounted(pool, 4, ran);

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain, new CancellationToken(canceled: true));

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => shutdown.WaitAsync(Waits.MustHappen));
        Assert.Equal(4, pool.CancelledWorkItemCount);
        gate.Set();
        Assert.Equal(4, await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen));
        Assert.Equal(0, ran.Value);
    }

    [Fact]
    public async Task ShutdownAsync_FromThePoolsOwnItem_CompletesAtOnce_AndThePoolStillDrains()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        var ran = new StrongBoxCounter();
        var inner = new TaskCompletionSource<Task<int>>(TaskCreationOptions.RunContinuationsAsynchronously);
        pool.QueueUserWorkItem(_ =>
        {
            QueueCounted(pool, 3, ran);
            inner.SetResult(pool.ShutdownAsync(ShutdownMode.Drain));
        });

        Task<int> fromInside = await inner.Task.WaitAsync(Waits.MustHappen);
        Assert.True(fromInside.IsCompletedSuccessfully, "waiting from the pool's own item would wait for itself");
        Assert.Equal(0, await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen));
        Assert.Equal(3, ran.Value);
    }

    [Fact]
    public async Task ShutdownAsync_OfAStoppedPool_CompletesWithTheSameFigure()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        pool.Shutdown(ShutdownMode.Drain);
        Assert.Equal(0, await pool.ShutdownAsync(ShutdownMode.CancelPending).WaitAsync(Waits.MustHappen));
        await pool.DisposeAsync();
    }

    [Fact]
    public void ShutdownAsync_RejectsUnknownModes_BeforeAnythingChanges()
    {
        using WorkerPool pool = SingleWorker.NewPool(nameof(WorkerPoolShutdownAsyncTests));
        // Thrown by the call itself, not through the task.
        Assert.Throws<ArgumentOutOfRangeException>("mode", () => { _ = pool.ShutdownAsync((ShutdownMode)7); });
        Assert.Throws<ArgumentOutOfRangeException>("whenCancelled", () => { _ = pool.ShutdownAsync(ShutdownMode.Drain, (ShutdownMode)7, default); });
        Assert.False(pool.IsShutdownStarted);
    }

    /// <summary>A counter items can share without a closure.</summary>
    private sealed class StrongBoxCounter
    {
        private int _value;

        public int Value => Volatile.Read(ref _value);

        public void Increment() => Interlocked.Increment(ref _value);
    }
}
