using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// Tasks: Run and RunAsValueTask give results, exceptions and cancellation; the target's TaskScheduler and
// SynchronizationContext run work on the target, and awaits inside come back to it.
public abstract partial class WorkTargetContractTests
{
    public static TheoryData<bool> CancellableTokens() => [false, true];

    [Theory]
    [MemberData(nameof(CancellableTokens))]
    public async Task Run_EveryShape_RunsOnTheTarget_WithItsResult(bool cancellableToken)
    {
        using var cts = new CancellationTokenSource();
        CancellationToken token = cancellableToken ? cts.Token : CancellationToken.None;
        bool onTarget = false;

        await Target.Run(() => { onTarget = IsOnTarget(); }, token).WaitAsync(Waits.MustHappen);
        Assert.True(onTarget, "Run(Action) ran off the target.");
        Assert.Equal(42, await Target.Run(() => IsOnTarget() ? 42 : -1, token).WaitAsync(Waits.MustHappen));
        await Target.Run(async () =>
        {
            bool before = IsOnTarget();
            await Task.Delay(1);
            onTarget = before && IsOnTarget();
        }, token).WaitAsync(Waits.MustHappen);
        Assert.True(onTarget, "Run(Func<Task>) ran, or resumed after its await, off the target.");
        Assert.Equal("resumed", await Target.Run(async () =>
        {
            await Task.Yield();
            return IsOnTarget() ? "resumed" : "off the target";
        }, token).WaitAsync(Waits.MustHappen));
        await Target.RunAsValueTask(() => { onTarget = IsOnTarget(); }, token).AsTask().WaitAsync(Waits.MustHappen);
        Assert.True(onTarget, "RunAsValueTask(Action) ran off the target.");
        Assert.Equal(7, await Target.RunAsValueTask(() => IsOnTarget() ? 7 : -1, token).AsTask().WaitAsync(Waits.MustHappen));
        await Assert.ThrowsAsync<InvalidOperationException>(
            () => Target.Run((Func<Task>)(() => null!), token).WaitAsync(Waits.MustHappen));
    }

    [Fact]
    public async Task RunAsValueTask_ManyInARow_EachGivesItsOwnResult()
    {
        long sum = 0;
        for (int i = 0; i < 500; i++)
        {
            int value = i;
            sum += await Target.RunAsValueTask(() => value);
            await Target.RunAsValueTask(() => { });
        }
        Assert.Equal(499 * 500 / 2, sum);
    }

    [Theory]
    [MemberData(nameof(CancellableTokens))]
    public async Task Run_ExceptionsFaultTheTask_AndNeverReachThePoolsPolicy(bool cancellableToken)
    {
        using var cts = new CancellationTokenSource();
        CancellationToken token = cancellableToken ? cts.Token : CancellationToken.None;
        await Assert.ThrowsAsync<InvalidOperationException>(() => Target.Run(() => throw new InvalidOperationException("a"), token));
        await Assert.ThrowsAsync<InvalidOperationException>(() => Target.Run((Func<int>)(() => throw new InvalidOperationException("b")), token));
        await Assert.ThrowsAsync<InvalidOperationException>(() => Target.Run(async () =>
        {
            await Task.Yield();
            throw new InvalidOperationException("c");
        }, token));
        await Assert.ThrowsAsync<InvalidOperationException>(() => Target.Run<int>(async () =>
        {
            await Task.Yield();
            throw new InvalidOperationException("d");
        }, token));
        await Assert.ThrowsAsync<InvalidOperationException>(async () => await Target.RunAsValueTask(() => throw new InvalidOperationException("e"), token));
        await Assert.ThrowsAsync<InvalidOperationException>(async () => await Target.RunAsValueTask((Func<int>)(() => throw new InvalidOperationException("f")), token));
        // The base's pool handler turns anything that reached the policy into a failure at the end of the test.
    }

    [Fact]
    public void AnItemThatThrows_IsReportedOnce_AndTheTargetGoesOn()
    {
        ExpectExceptions();
        Target.QueueUserWorkItem(_ => throw new InvalidOperationException("thrown by an item"));
        Target.UnsafeQueueUserWorkItem(new ThrowingItem(), preferLocal: false);
        Waits.Until(() => ExpectedExceptions.Length == 2, "both exceptions reported to the pool's handlers");
        Assert.All(ExpectedExceptions, e => Assert.IsType<InvalidOperationException>(e));
        using var ledger = new ExactlyOnceLedger(10 * Threads);
        for (int i = 0; i < ledger.Count; i++)
        {
            Target.UnsafeQueueUserWorkItem(new LedgerItem(ledger, i, this), preferLocal: false);
        }
        ledger.WaitForAll("items after the ones that threw");
        ledger.AssertExactlyOnce();
        Waits.Until(() => CompletedCount == ledger.Count + 2, "items that threw count as completed");
        Assert.Equal(2, ExpectedExceptions.Length);
    }

    private sealed class ThrowingItem : IWorkItem
    {
        public void Execute() => throw new InvalidOperationException("thrown by an IWorkItem");
    }

    [Fact]
    public async Task Run_WithATokenCancelledAtTheCall_IsCancelled_AndQueuesNothing()
    {
        var token = new CancellationToken(canceled: true);
        bool ran = false;
        Assert.True(Target.Run(() => { ran = true; }, token).IsCanceled);
        Assert.True(Target.Run(() => 1, token).IsCanceled);
        Assert.True(Target.Run(() => Task.CompletedTask, token).IsCanceled);
        Assert.True(Target.Run(() => Task.FromResult(1), token).IsCanceled);
        Assert.True(Target.RunAsValueTask(() => { ran = true; }, token).IsCanceled);
        Assert.True(Target.RunAsValueTask(() => 1, token).IsCanceled);
        Assert.True(Target.QueueUserWorkItemAsync(_ => ran = true, 0, token).IsCanceled);
        Assert.Equal(0, PendingCount);
        await Target.Run(() => { }).WaitAsync(Waits.MustHappen); // the queue behind is empty
        Assert.False(ran);
    }

    [Fact]
    public async Task QueuedRunsCancelledBeforeTheyStart_EndCancelled_AndNeverRun()
    {
        int ran = 0;
        using var cts = new CancellationTokenSource();
        Task action, function, asyncAction, asyncFunction;
        ValueTask valueAction;
        ValueTask<int> valueFunction;
        using (HoldWorkers())
        {
            action = Target.Run(() => { Interlocked.Increment(ref ran); }, cts.Token);
            function = Target.Run(() => Interlocked.Increment(ref ran), cts.Token);
            asyncAction = Target.Run(() => { Interlocked.Increment(ref ran); return Task.CompletedTask; }, cts.Token);
            asyncFunction = Target.Run(() => Task.FromResult(Interlocked.Increment(ref ran)), cts.Token);
            valueAction = Target.RunAsValueTask(() => { Interlocked.Increment(ref ran); }, cts.Token);
            valueFunction = Target.RunAsValueTask(() => Interlocked.Increment(ref ran), cts.Token);
            Assert.False(action.IsCompleted, "a Run behind held workers completed");
            cts.Cancel();
            foreach (Task task in new[] { action, function, asyncAction, asyncFunction, valueAction.AsTask(), valueFunction.AsTask() })
            {
                await Assert.ThrowsAnyAsync<OperationCanceledException>(() => task.WaitAsync(Waits.MustHappen));
                Assert.True(task.IsCanceled, $"status {task.Status}");
            }
        }
        await Target.Run(() => { }).WaitAsync(Waits.MustHappen); // everything queued before it has been taken
        Assert.Equal(0, Volatile.Read(ref ran));
    }

    [Fact]
    public async Task ARunningDelegateThatObservesItsToken_EndsCancelled()
    {
        using var cts = new CancellationTokenSource();
        using var started = new ManualResetEventSlim();
        Task task = Target.Run(() =>
        {
            started.Set();
            cts.Token.WaitHandle.WaitOne(Waits.MustHappen);
            cts.Token.ThrowIfCancellationRequested();
        }, cts.Token);
        Waits.For(started, "the delegate to start");
        cts.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => task.WaitAsync(Waits.MustHappen));
        Assert.True(task.IsCanceled);
    }

    [Fact]
    public async Task TheTargetsTaskScheduler_RunsTasksAndTheirChildrenAndContinuations_OnTheTarget()
    {
        WorkerPoolTaskScheduler scheduler = Target.TaskScheduler;
        Assert.Same(Pool, scheduler.Pool);
        Assert.Same(TargetLane, scheduler.Lane);
        Assert.InRange(scheduler.MaximumConcurrencyLevel, 1, IsSerial ? 1 : Threads);
        var factory = new TaskFactory(scheduler);

        (bool Parent, bool Current, bool Child, bool AfterYield, bool AfterDelay) seen = await factory.StartNew(async () =>
        {
            bool parent = IsOnTarget();
            bool current = TaskScheduler.Current == scheduler;
            bool child = await Task.Factory.StartNew(IsOnTarget); // TaskScheduler.Current is the target's
            await Task.Yield();
            bool afterYield = IsOnTarget();
            await Task.Delay(1);
            return (parent, current, child, afterYield, IsOnTarget());
        }).Unwrap().WaitAsync(Waits.MustHappen);
        Assert.Equal((true, true, true, true, true), seen);

        bool continued = await factory.StartNew(() => { })
            .ContinueWith(_ => IsOnTarget(), scheduler)
            .WaitAsync(Waits.MustHappen);
        Assert.True(continued, "a continuation on the target's scheduler ran off the target");
    }

    [Fact]
    public void TheTargetsSynchronizationContext_RunsPostsAndSendsOnTheTarget_WithItselfInstalled()
    {
        WorkerPoolSynchronizationContext context = Target.SynchronizationContext;
        Assert.Same(Pool, context.Pool);
        Assert.Same(TargetLane, context.Lane);
        bool postedOnTarget = false;
        SynchronizationContext? postedContext = null;
        using var posted = new ManualResetEventSlim();
        context.Post(_ =>
        {
            postedOnTarget = IsOnTarget();
            postedContext = SynchronizationContext.Current;
            posted.Set();
        }, null);
        Waits.For(posted, "the post");
        Assert.True(postedOnTarget, "a post ran off the target");
        Assert.Same(context, postedContext);

        bool sentOnTarget = false;
        Waits.RunBounded(() => context.Send(_ => sentOnTarget = IsOnTarget(), null), "a send from outside");
        Assert.True(sentOnTarget, "a send from outside ran off the target");
        var thrown = Assert.Throws<InvalidOperationException>(() =>
            Waits.RunBounded(() => context.Send(_ => throw new InvalidOperationException("sent"), null), "a send that throws"));
        Assert.IsType<InvalidOperationException>(thrown.InnerException);
    }

    [Fact]
    public async Task AwaitsUnderTheTargetsContext_ResumeOnTheTarget()
    {
        var resumed = new TaskCompletionSource<(bool OnTarget, bool SameContext)>(TaskCreationOptions.RunContinuationsAsynchronously);
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        Target.SynchronizationContext.Post(async _ =>
        {
            try
            {
                await release.Task; // completed from a foreign thread: the continuation is posted back to the context
                resumed.SetResult((IsOnTarget(), SynchronizationContext.Current == Target.SynchronizationContext));
            }
            catch (Exception e)
            {
                resumed.SetException(e);
            }
        }, null);
        Waits.RunBounded(release.SetResult, "completing the awaited task from outside");
        Assert.Equal((true, true), await resumed.Task.WaitAsync(Waits.MustHappen));
    }
}
