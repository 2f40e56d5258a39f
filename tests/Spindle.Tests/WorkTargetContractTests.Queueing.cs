using System;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// Queueing: every accepted item runs exactly once, on the target, through every queueing form, from several producer
// threads and from inside the target's own items.
public abstract partial class WorkTargetContractTests
{
    /// <summary>The number of queueing forms <see cref="QueueAnyWay"/> cycles through (the long-running ones come on top).</summary>
    private const int Forms = 15;

    /// <summary>An item that hits one slot of a ledger, usable through every queueing form.</summary>
    private protected sealed class LedgerItem(ExactlyOnceLedger ledger, int index, WorkTargetContractTests? placeCheck = null) : IWorkItem
    {
        public ExactlyOnceLedger Ledger => ledger;

        public int Index => index;

        public void Execute()
        {
            placeCheck?.NotePlace();
            ledger.Hit(index);
        }

        public static readonly WaitCallback Callback = static state => ((LedgerItem)state!).Execute();

        public static readonly Action<LedgerItem> Action = static item => item.Execute();

        public static readonly Action<(LedgerItem Item, int Unused)> ValueAction = static s => s.Item.Execute();
    }

    /// <summary>
    /// Queues <paramref name="item"/> through the queueing form that <paramref name="way"/> (any integer) picks, so a
    /// loop over items covers every form of <see cref="WorkTarget"/>; with <paramref name="longRunning"/>, every 97th
    /// way is one of the <see cref="WorkItemOptions.LongRunning"/> forms. The non-blocking forms must accept while the
    /// target has room; on a full bounded target they wait for room, so the item is accepted either way.
    /// </summary>
    private protected void QueueAnyWay(LedgerItem item, int way, bool longRunning = false)
    {
        WorkTarget target = Target;
        if (longRunning && way % 97 == 96)
        {
            if (way % 2 == 0)
            {
                target.QueueUserWorkItem(LedgerItem.Action, item, WorkItemOptions.LongRunning);
            }
            else
            {
                target.UnsafeQueueUserWorkItem(item, WorkItemOptions.LongRunning | WorkItemOptions.PreferLocal);
            }
            return;
        }
        switch ((uint)way % Forms)
        {
            case 0:
                Assert.True(target.QueueUserWorkItem(LedgerItem.Callback, item));
                break;
            case 1:
                Assert.True(target.UnsafeQueueUserWorkItem(LedgerItem.Callback, item));
                break;
            case 2:
                Assert.True(target.QueueUserWorkItem(LedgerItem.Action, item, preferLocal: true));
                break;
            case 3:
                Assert.True(target.UnsafeQueueUserWorkItem(LedgerItem.Action, item, preferLocal: false));
                break;
            case 4:
                Assert.True(target.QueueUserWorkItem(LedgerItem.ValueAction, (item, 0), preferLocal: false));
                break;
            case 5:
                Assert.True(target.UnsafeQueueUserWorkItem(LedgerItem.ValueAction, (item, 0), preferLocal: true));
                break;
            case 6:
                Assert.True(target.UnsafeQueueUserWorkItem(item, preferLocal: way % 2 == 0));
                break;
            case 7:
                Assert.True(target.QueueUserWorkItem(LedgerItem.Action, item, WorkItemOptions.PreferLocal));
                break;
            case 8:
                Assert.True(target.UnsafeQueueUserWorkItem(LedgerItem.ValueAction, (item, 0), WorkItemOptions.None));
                break;
            case 9:
                Assert.True(target.UnsafeQueueUserWorkItem(item, WorkItemOptions.PreferLocal));
                break;
            case 10:
                if (!target.TryQueueUserWorkItem(LedgerItem.Action, item, preferLocal: way % 2 == 0))
                {
                    Assert.True(IsBounded, "TryQueueUserWorkItem refused an item, but the target has no bound.");
                    target.QueueUserWorkItem(LedgerItem.Action, item, preferLocal: false);
                }
                break;
            case 11:
                if (!target.TryQueueUserWorkItem(item, preferLocal: way % 2 == 1))
                {
                    Assert.True(IsBounded, "TryQueueUserWorkItem refused an item, but the target has no bound.");
                    target.UnsafeQueueUserWorkItem(item, preferLocal: false);
                }
                break;
            case 12:
                AwaitQueued(target.QueueUserWorkItemAsync(LedgerItem.Action, item));
                break;
            case 13:
                AwaitQueued(target.QueueUserWorkItemAsync(item));
                break;
            default:
                Assert.True(target.QueueUserWorkItem(_ => item.Execute()));
                break;
        }
    }

    /// <summary>Waits for an asynchronous queueing call: at once unless the target is bounded and full.</summary>
    private void AwaitQueued(ValueTask queued)
    {
        if (queued.IsCompletedSuccessfully)
        {
            return;
        }
        Assert.True(IsBounded, "QueueUserWorkItemAsync waited, but the target has no bound.");
        try
        {
            Assert.True(queued.AsTask().Wait(Waits.MustHappen), "QueueUserWorkItemAsync waited for room in vain.");
        }
        catch (AggregateException e) when (e.InnerException is ObjectDisposedException refused)
        {
            ExceptionDispatchInfo.Throw(refused); // the target shut down during the wait: refused, as the other forms are
        }
    }

    [Fact]
    public void TheCapabilityFlags_DescribeTheTarget()
    {
        Assert.Equal(IsLane, Target is WorkerPoolLane);
        Assert.Same(Pool, TargetLane?.Pool ?? Target);
        if (TargetLane is WorkerPoolLane lane)
        {
            Assert.Equal(IsSerial, lane.MaxConcurrency == 1);
            Assert.Equal(QueueLimit, lane.QueueLimit);
            Assert.Contains(lane, Pool.Lanes);
        }
        else
        {
            Assert.False(IsSerial);
            Assert.False(IsBounded);
        }
        Assert.False(IsShutdownStarted);
    }

    [Fact]
    public void EveryQueueingForm_RunsEachItemExactlyOnce_OnTheTarget()
    {
        const int items = 40 * Forms;
        using var ledger = new ExactlyOnceLedger(items);
        for (int i = 0; i < items; i++)
        {
            QueueAnyWay(new LedgerItem(ledger, i, this), i, longRunning: true);
        }
        ledger.WaitForAll("items queued through every form");
        ledger.AssertExactlyOnce();
        AssertEveryItemRanOnTarget();
    }

    [Fact]
    public void SeveralProducerThreads_EachItemRunsExactlyOnce()
    {
        const int producers = 4;
        const int perProducer = 1_500;
        using var ledger = new ExactlyOnceLedger(producers * perProducer);
        using var go = new ManualResetEventSlim();
        var threads = new TestThread[producers];
        for (int p = 0; p < producers; p++)
        {
            int first = p * perProducer;
            threads[p] = Waits.Start(() =>
            {
                go.Wait();
                for (int i = 0; i < perProducer; i++)
                {
                    QueueAnyWay(new LedgerItem(ledger, first + i, this), first + i, longRunning: true);
                }
            }, $"producer {p}");
        }
        go.Set();
        foreach (TestThread thread in threads)
        {
            thread.Join();
        }
        ledger.WaitForAll("items from several producers");
        ledger.AssertExactlyOnce();
        AssertEveryItemRanOnTarget();
    }

    [Fact]
    public void ItemsQueuedFromInsideTheTargetsItems_EachRunExactlyOnce()
    {
        // Within the bound of a bounded target: an item of the target never waits for room here.
        const int seeds = 16;
        const int children = 2 * Forms;
        using var ledger = new ExactlyOnceLedger(seeds * (children + 1));
        for (int s = 0; s < seeds; s++)
        {
            int seed = s;
            Target.QueueUserWorkItem(_ =>
            {
                NotePlace();
                int first = seeds + seed * children;
                for (int i = 0; i < children; i++)
                {
                    QueueAnyWay(new LedgerItem(ledger, first + i, this), seed + i);
                }
                ledger.Hit(seed);
            });
        }
        ledger.WaitForAll("items queued from inside items");
        ledger.AssertExactlyOnce();
        AssertEveryItemRanOnTarget();
    }

    [Fact]
    public void ASelfRequeueingItem_RunsOncePerQueueing()
    {
        const int links = 500;
        using var ledger = new ExactlyOnceLedger(links);
        var chain = new Requeuer(this, ledger);
        Target.UnsafeQueueUserWorkItem(chain, preferLocal: false);
        ledger.WaitForAll("a chain of requeued items");
        ledger.AssertExactlyOnce();
        AssertEveryItemRanOnTarget();
    }

    /// <summary>Queues itself again through the next form after each run, until the ledger is full.</summary>
    private sealed class Requeuer(WorkTargetContractTests owner, ExactlyOnceLedger ledger) : IWorkItem
    {
        private int _next; // links run one after another; the queue publishes the write to the next link

        public void Execute()
        {
            int step = _next++;
            owner.NotePlace();
            ledger.Hit(step);
            if (step + 1 < ledger.Count)
            {
                switch (step % 3)
                {
                    case 0:
                        owner.Target.UnsafeQueueUserWorkItem(this, preferLocal: true);
                        break;
                    case 1:
                        Assert.True(owner.Target.TryQueueUserWorkItem(this, preferLocal: true));
                        break;
                    default:
                        owner.Target.UnsafeQueueUserWorkItem(this, WorkItemOptions.PreferLocal);
                        break;
                }
            }
        }
    }

    [Fact]
    public void AnUnboundedTarget_AcceptsEveryNonBlockingQueueing_AtOnce()
    {
        if (IsBounded)
        {
            return; // a bounded target's room is the subject of the bound's own tests
        }
        using var ledger = new ExactlyOnceLedger(400);
        using (HoldWorkers())
        {
            for (int i = 0; i < ledger.Count; i += 4)
            {
                Assert.True(Target.TryQueueUserWorkItem(LedgerItem.Action, new LedgerItem(ledger, i), preferLocal: false));
                Assert.True(Target.TryQueueUserWorkItem(new LedgerItem(ledger, i + 1), preferLocal: true));
                Assert.True(Target.QueueUserWorkItemAsync(LedgerItem.Action, new LedgerItem(ledger, i + 2)).IsCompletedSuccessfully);
                Assert.True(Target.QueueUserWorkItemAsync(new LedgerItem(ledger, i + 3)).IsCompletedSuccessfully);
            }
            Assert.Equal(ledger.Count, PendingCount);
        }
        ledger.WaitForAll("the items accepted at once");
        ledger.AssertExactlyOnce();
    }

    [Fact]
    public void NullWorkAndUndefinedOptions_AreRefused_AndQueueNothing()
    {
        WorkTarget target = Target;
        Assert.Throws<ArgumentNullException>(() => target.QueueUserWorkItem(null!));
        Assert.Throws<ArgumentNullException>(() => target.QueueUserWorkItem(null!, null));
        Assert.Throws<ArgumentNullException>(() => target.UnsafeQueueUserWorkItem((WaitCallback)null!, null));
        Assert.Throws<ArgumentNullException>(() => target.QueueUserWorkItem<int>(null!, 1, preferLocal: false));
        Assert.Throws<ArgumentNullException>(() => target.UnsafeQueueUserWorkItem((IWorkItem)null!, preferLocal: false));
        Assert.Throws<ArgumentNullException>(() => target.TryQueueUserWorkItem((IWorkItem)null!, preferLocal: false));
        Assert.Throws<ArgumentNullException>(() => { _ = target.QueueUserWorkItemAsync((IWorkItem)null!); });
        Assert.Throws<ArgumentOutOfRangeException>(() => target.QueueUserWorkItem(static _ => { }, 1, (WorkItemOptions)8));
        Assert.Throws<ArgumentOutOfRangeException>(() => target.UnsafeQueueUserWorkItem(new CountingItem(), (WorkItemOptions)4));
        Assert.Equal(0, PendingCount);
        Assert.Equal(0, CompletedCount);
    }

    [Fact]
    public void ItemsOfAnUnserialTarget_RunAtTheSameTime()
    {
        if (IsSerial)
        {
            return; // a serial target's contract is the opposite (.Serial.cs)
        }
        // Two items that each wait for the other finish only if they run at once.
        using var both = new CountdownEvent(2);
        int met = 0;
        for (int i = 0; i < 2; i++)
        {
            Target.QueueUserWorkItem(_ =>
            {
                both.Signal();
                if (both.Wait(Waits.MustHappen))
                {
                    Interlocked.Increment(ref met);
                }
            });
        }
        Waits.Until(() => Volatile.Read(ref met) == 2, "two items of the target running at once");
    }

    /// <summary>Counts its runs; the same object may be queued many times.</summary>
    private protected sealed class CountingItem : IWorkItem
    {
        private int _runs;

        public int Runs => Volatile.Read(ref _runs);

        public void Execute() => Interlocked.Increment(ref _runs);
    }
}
