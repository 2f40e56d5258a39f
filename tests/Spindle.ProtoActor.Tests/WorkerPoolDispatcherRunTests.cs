using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.ProtoActor.Tests;

/// <summary>
/// A run, scheduled directly as Proto.Actor's mailbox schedules it: it executes with the target's synchronization
/// context installed and put back afterwards, and a run that throws or faults is reported by the dispatcher, never by
/// the pool's exception policy (which by default fails the process).
/// </summary>
public sealed class WorkerPoolDispatcherRunTests
{
    [Fact]
    public void Run_HasTheTargetsSynchronizationContext_AndPutsThePreviousOneBack()
    {
        using WorkerPool pool = Pools.Fixed(1, "run-context");
        var dispatcher = new WorkerPoolDispatcher(pool);
        SynchronizationContext? baseline = null;
        SynchronizationContext? duringRun = null;
        SynchronizationContext? afterRun = null;
        using var done = new CountdownEvent(3);

        // One worker: the three items run one after another on the same thread, in this order.
        pool.UnsafeQueueUserWorkItem(_ => { baseline = SynchronizationContext.Current; done.Signal(); }, 0, preferLocal: false);
        dispatcher.Schedule(() =>
        {
            duringRun = SynchronizationContext.Current;
            done.Signal();
            return Task.CompletedTask;
        });
        pool.UnsafeQueueUserWorkItem(_ => { afterRun = SynchronizationContext.Current; done.Signal(); }, 0, preferLocal: false);

        Waits.For(done, "the three items ran");
        Assert.Same(pool.SynchronizationContext, duringRun);
        Assert.Same(baseline, afterRun);
        Assert.NotSame(pool.SynchronizationContext, afterRun);
    }

    [Fact]
    public async Task FaultedRuns_AreCountedAndRaised_AndNeverReachThePoolsPolicy()
    {
        using WorkerPool pool = Pools.Fixed(2, "faulted-runs"); // the default policy: FailProcess
        var dispatcher = new WorkerPoolDispatcher(pool);
        int poolExceptions = 0;
        pool.UnhandledException += (_, _) => Interlocked.Increment(ref poolExceptions);
        var raised = new ConcurrentQueue<(object? Sender, Exception Exception, bool Terminating)>();
        using var reported = new CountdownEvent(5);
        dispatcher.RunFaulted += (sender, args) =>
        {
            raised.Enqueue((sender, (Exception)args.ExceptionObject, args.IsTerminating));
            reported.Signal();
        };
        var thrown = new InvalidOperationException("thrown");
        var returned = new InvalidOperationException("returned faulted");
        var later = new InvalidOperationException("faulted later");
        var pending = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var pendingCancel = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);

        dispatcher.Schedule(() => throw thrown);
        dispatcher.Schedule(() => Task.FromException(returned));
        dispatcher.Schedule(() => pending.Task);
        dispatcher.Schedule(() => pendingCancel.Task);
        dispatcher.Schedule(() => null!);
        Waits.Until(() => pool.CompletedWorkItemCount >= 5, "the five runs ran");
        pending.SetException(later);
        pendingCancel.SetCanceled();

        Waits.For(reported, "every faulted run reported");
        Assert.Equal(5, dispatcher.FaultedRunCount);
        Assert.All(raised, r => Assert.Same(dispatcher, r.Sender));
        Assert.All(raised, r => Assert.False(r.Terminating));
        Assert.Contains(raised, r => ReferenceEquals(r.Exception, thrown));
        Assert.Contains(raised, r => ReferenceEquals(r.Exception, returned));
        Assert.Contains(raised, r => ReferenceEquals(r.Exception, later));
        Assert.Contains(raised, r => r.Exception is OperationCanceledException);
        Assert.Contains(raised, r => r.Exception is InvalidOperationException && r.Exception.Message.Contains("null", StringComparison.Ordinal));
        Assert.Equal(0, Volatile.Read(ref poolExceptions));
        Assert.Equal(42, await Waits.For(pool.Run(() => 42), "an item after the faults")); // the pool still runs work
    }

    [Fact]
    public void RunFaulted_AHandlerThatThrows_DoesNotStopTheOthers()
    {
        using WorkerPool pool = Pools.Fixed(1, "throwing-handler");
        var dispatcher = new WorkerPoolDispatcher(pool);
        using var second = new ManualResetEventSlim();
        dispatcher.RunFaulted += (_, _) => throw new InvalidOperationException("handler");
        dispatcher.RunFaulted += (_, _) => second.Set();

        dispatcher.Schedule(() => Task.FromException(new InvalidOperationException("run")));

        Waits.For(second, "the second handler ran");
        Assert.Equal(1, dispatcher.FaultedRunCount);
    }

    [Fact]
    public async Task FaultedRun_WithNoHandler_IsCounted()
    {
        using WorkerPool pool = Pools.Fixed(1, "no-handler");
        var dispatcher = new WorkerPoolDispatcher(pool);

        dispatcher.Schedule(() => throw new InvalidOperationException("run"));

        Waits.Until(() => dispatcher.FaultedRunCount == 1, "the fault counted");
        Assert.Equal(42, await Waits.For(pool.Run(() => 42), "an item after the fault"));
    }
}
