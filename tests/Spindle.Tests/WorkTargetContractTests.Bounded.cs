using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// A bounded target: it holds at most its limit of queued items; the non-blocking forms refuse beyond it, the waiting
// forms wait for room and never drop an item, continuations pass the bound, and every shutdown releases the producers
// that wait for room.
public abstract partial class WorkTargetContractTests
{
    /// <summary>
    /// Holds every worker and fills the target to its limit with ledger items <c>0..limit-1</c>; returns the hold, still
    /// in place.
    /// </summary>
    private WorkerHold FillToTheLimit(ExactlyOnceLedger ledger)
    {
        int limit = QueueLimit!.Value;
        WorkerHold hold = HoldWorkers();
        for (int i = 0; i < limit; i++)
        {
            Assert.True(Target.TryQueueUserWorkItem(new LedgerItem(ledger, i, this), preferLocal: false), $"item {i} of {limit} refused");
        }
        Assert.Equal(limit, PendingCount);
        return hold;
    }

    [Fact]
    public async Task ABoundedTarget_RefusesTryQueueWhenFull_AndHoldsWaitingProducersUntilThereIsRoom()
    {
        if (!IsBounded)
        {
            return;
        }
        int limit = QueueLimit!.Value;
        using var ledger = new ExactlyOnceLedger(limit + 3);
        using var posted = new ManualResetEventSlim();
        ValueTask waitingAsync;
        TestThread waitingCall;
        Task<Task> waitingRun;
        using (FillToTheLimit(ledger))
        {
            Assert.False(Target.TryQueueUserWorkItem(LedgerItem.Action, new LedgerItem(ledger, limit), preferLocal: false));
            Assert.False(Target.TryQueueUserWorkItem(new LedgerItem(ledger, limit), preferLocal: true));
            waitingAsync = Target.QueueUserWorkItemAsync(new LedgerItem(ledger, limit, this));
            waitingCall = Waits.Start(() => Target.QueueUserWorkItem(LedgerItem.Callback, new LedgerItem(ledger, limit + 1, this)), "a plain queueing call");
            waitingRun = Task.Factory.StartNew(() => Target.Run(() => new LedgerItem(ledger, limit + 2, this).Execute()),
                CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
            Waits.Never(() => waitingAsync.IsCompleted || waitingRun.IsCompleted, "a queueing call on a full target went through");
            Assert.Equal(limit, PendingCount);

            // Continuations of accepted work pass the bound at once.
            Waits.RunBounded(() => Target.SynchronizationContext.Post(_ => posted.Set(), null), "a post to a full target");
        }
        await waitingAsync.AsTask().WaitAsync(Waits.MustHappen);
        waitingCall.Join();
        await (await waitingRun.WaitAsync(Waits.MustHappen)).WaitAsync(Waits.MustHappen);
        Waits.For(posted, "the post that passed the bound");
        ledger.WaitForAll("every item the full target accepted in the end");
        ledger.AssertExactlyOnce();
        AssertEveryItemRanOnTarget();
    }

    [Fact]
    public async Task ABoundedTarget_QueueUserWorkItemAsync_CancelledWhileWaiting_QueuesNothing()
    {
        if (!IsBounded)
        {
            return;
        }
        int limit = QueueLimit!.Value;
        using var ledger = new ExactlyOnceLedger(limit + 1);
        using var cts = new CancellationTokenSource();
        ValueTask waiting;
        Task<int> run;
        using (FillToTheLimit(ledger))
        {
            waiting = Target.QueueUserWorkItemAsync(LedgerItem.Action, new LedgerItem(ledger, limit), cts.Token);
            run = Task.Factory.StartNew(() => Target.Run(() => 1, cts.Token),
                CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default).Unwrap();
            Waits.Never(() => waiting.IsCompleted || run.IsCompleted, "a queueing call on a full target went through");
            cts.Cancel();
            await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting.AsTask().WaitAsync(Waits.MustHappen));
            await Assert.ThrowsAnyAsync<OperationCanceledException>(() => run.WaitAsync(Waits.MustHappen));
            Assert.Equal(limit, PendingCount);
        }
        // The accepted items run once the hold ends; on a lane without a cap two workers run them side by side, so a
        // later item can complete before the last of them: wait for the count, not for a later item.
        Waits.Until(() => ledger.Total == limit, "every item the full target had accepted");
        await Target.Run(() => { }).WaitAsync(Waits.MustHappen);
        Assert.Equal(0, PendingCount);
        Assert.Equal(limit, ledger.Total);
        Assert.Equal(0, ledger.HitsOf(limit));
    }

    [Theory]
    [MemberData(nameof(ShutdownModes))]
    public Task ShutdownOfABoundedTarget_ReleasesTheProducersWaitingForRoom(ShutdownMode mode) =>
        ReleaseWaitingProducers(mode, () => ShutdownAsync(mode));

    [Theory]
    [MemberData(nameof(ShutdownModes))]
    public Task ShutdownOfABoundedTargetsPool_ReleasesTheProducersWaitingForRoom(ShutdownMode mode) =>
        ReleaseWaitingProducers(mode, () => Pool.ShutdownAsync(mode));

    /// <summary>
    /// Fills the target, parks producers waiting for room (a plain call, a <c>Run</c> and an asynchronous call), and
    /// shuts down with every worker still held: the producers are refused before any room appears, and the accepted
    /// items are run or cancelled once.
    /// </summary>
    private async Task ReleaseWaitingProducers(ShutdownMode mode, Func<Task<int>> shutDown)
    {
        if (!IsBounded)
        {
            return;
        }
        int limit = QueueLimit!.Value;
        using var ledger = new ExactlyOnceLedger(limit + 3);
        Task<int> shutdown;
        using (FillToTheLimit(ledger))
        {
            ValueTask waitingAsync = Target.QueueUserWorkItemAsync(new LedgerItem(ledger, limit));
            Task waitingCall = Task.Factory.StartNew(() => Target.QueueUserWorkItem(LedgerItem.Callback, new LedgerItem(ledger, limit + 1)),
                CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
            Task waitingRun = Task.Factory.StartNew(() => Target.Run(() => ledger.Hit(limit + 2)),
                CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default).Unwrap();
            Waits.Never(() => waitingAsync.IsCompleted || waitingCall.IsCompleted || waitingRun.IsCompleted,
                "a queueing call on a full target went through");

            shutdown = shutDown();
            await Assert.ThrowsAsync<ObjectDisposedException>(() => waitingAsync.AsTask().WaitAsync(Waits.MustHappen));
            await Assert.ThrowsAsync<ObjectDisposedException>(() => waitingCall.WaitAsync(Waits.MustHappen));
            await Assert.ThrowsAsync<ObjectDisposedException>(() => waitingRun.WaitAsync(Waits.MustHappen));
        }
        int cancelled = await shutdown.WaitAsync(Waits.MustHappen);
        Assert.Equal(limit, ledger.AssertAtMostOnce() + cancelled);
        Assert.Equal(mode == ShutdownMode.Drain ? 0 : limit, cancelled);
        for (int i = limit; i < ledger.Count; i++)
        {
            Assert.Equal(0, ledger.HitsOf(i));
        }
    }
}
