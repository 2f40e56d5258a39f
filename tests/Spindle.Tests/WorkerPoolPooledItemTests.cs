using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The pooled completion sources behind <see cref="WorkTarget.RunAsValueTask(Action, CancellationToken)"/> are reused only
/// when no queue can still reach them: an item never runs on, and is never cancelled by, a pool it was not queued to.
/// </summary>
public sealed class WorkerPoolPooledItemTests
{
    /// <summary>Reads a completed value task synchronously on this thread (so the pooled source returns to this thread's slots).</summary>
    private static void ReadCancelled(ValueTask task)
    {
        Waits.Until(() => task.IsCompleted, "the cancelled value task completes");
        Assert.ThrowsAny<OperationCanceledException>(() => task.GetAwaiter().GetResult());
    }

    private static void ReadCancelled(ValueTask<int> task)
    {
        Waits.Until(() => task.IsCompleted, "the cancelled value task completes");
        Assert.ThrowsAny<OperationCanceledException>(() => task.GetAwaiter().GetResult());
    }

    [Fact]
    public void CancelledValueTaskItem_ReadByItsCaller_IsNotReusedWhileItsQueueStillHoldsIt()
    {
        using var a = SingleWorker.NewPool("pooled-a");
        using var b = SingleWorker.NewPool("pooled-b");
        ManualResetEventSlim gateA = SingleWorker.Occupy(a);
        ManualResetEventSlim gateB = SingleWorker.Occupy(b);
        // Several rounds, so that every cache slot this thread looks at has been exercised.
        const int Rounds = 16;
        var onB = new ValueTask[Rounds];
        var ranOn = new WorkerPool?[Rounds];
        bool cancelledRan = false;
        for (int i = 0; i < Rounds; i++)
        {
            using var cts = new CancellationTokenSource();
            ValueTask cancelled = a.RunAsValueTask(() => { cancelledRan = true; }, cts.Token);
            cts.Cancel();
            ReadCancelled(cancelled); // the caller is done with it, but A's queue still holds its entry
            int index = i;
            onB[i] = b.RunAsValueTask(() => { ranOn[index] = WorkerPool.Current; });
        }
        gateA.Set(); // A's worker now pops the stale entries
        Waits.Never(() => Array.Exists(ranOn, pool => pool is not null), "an item queued to B ran while B's only worker is blocked");
        gateB.Set();
        for (int i = 0; i < Rounds; i++)
        {
            Assert.True(onB[i].AsTask().Wait(Waits.MustHappen), "B's item completes");
            Assert.Same(b, ranOn[i]);
        }
        Assert.False(cancelledRan);
    }

    [Fact]
    public void CancelledValueTaskItem_IsNotCancelledAgainByTheShutdownOfItsFirstPool()
    {
        using var a = SingleWorker.NewPool("pooled-a");
        using var b = SingleWorker.NewPool("pooled-b");
        ManualResetEventSlim gateA = SingleWorker.Occupy(a);
        ManualResetEventSlim gateB = SingleWorker.Occupy(b);
        const int Rounds = 16;
        var onB = new ValueTask<int>[Rounds];
        for (int i = 0; i < Rounds; i++)
        {
            using var cts = new CancellationTokenSource();
            ValueTask<int> cancelled = a.RunAsValueTask(() => -1, cts.Token);
            cts.Cancel();
            ReadCancelled(cancelled);
            int value = i;
            onB[i] = b.RunAsValueTask(() => value);
        }
        Task<int> shutdown = Task.Run(() => a.Shutdown(ShutdownMode.CancelPending));
        Waits.Until(() => a.IsShutdownStarted, "A's shutdown starts");
        gateA.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "A shuts down");
        Assert.Equal(0, shutdown.Result); // the stale entries had been cancelled by their tokens already
        gateB.Set();
        for (int i = 0; i < Rounds; i++)
        {
            Task<int> result = onB[i].AsTask();
            Assert.True(((IAsyncResult)result).AsyncWaitHandle.WaitOne(Waits.MustHappen), "B's item completes");
            Assert.Equal(TaskStatus.RanToCompletion, result.Status);
            Assert.Equal(i, result.Result);
        }
    }

    [Fact]
    public void ValueTaskItems_AreReusedOnceBothTheQueueAndTheCallerAreDoneWithThem()
    {
        // Reuse still happens (the cache is not simply switched off): a long run of completed items allocates only
        // the delegates. Behaviour, not speed: the results stay right across thousands of reuses on two pools.
        using var a = SingleWorker.NewPool("pooled-a");
        using var b = SingleWorker.NewPool("pooled-b");
        for (int i = 0; i < 2_000; i++)
        {
            WorkerPool target = (i & 1) == 0 ? a : b;
            int value = i;
            ValueTask<(int, WorkerPool?)> run = target.RunAsValueTask(() => (value, WorkerPool.Current));
            (int got, WorkerPool? ranOn) = run.IsCompleted ? run.Result : run.AsTask().GetAwaiter().GetResult();
            Assert.Equal(i, got);
            Assert.Same(target, ranOn);
        }
    }
}
