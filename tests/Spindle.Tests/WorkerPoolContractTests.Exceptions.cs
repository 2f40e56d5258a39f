using System;
using System.Collections.Concurrent;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

// Exceptions under the Report policy: each is reported once and loses no worker, and a throwing handler or hook does
// not stop the pool. The default FailProcess policy is tested in a child process: see WorkerPoolCrashTests.
public abstract partial class WorkerPoolContractTests
{
    private const string FailurePrefix = "work item failure #";

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowFromWorkItem(int id) => throw new InvalidOperationException(FailurePrefix + id);

    private static int FailureId(Exception exception) => int.Parse(exception.Message.AsSpan(FailurePrefix.Length), provider: null);

    // ---- A throwing item is reported once and its siblings still run ---------------------------------------

    [Fact]
    public void ThrowingItems_UnderReport_AreReportedOnceEachWithTheirStack_AndSiblingsRun()
    {
        const int siblings = 2_000;
        const int throwers = 20;
        using var ledger = new ExactlyOnceLedger(siblings);
        var reports = new ConcurrentQueue<(object? Sender, WorkItemExceptionEventArgs Args)>();
        WorkerPool pool = CreatePool(threads: 2, expectExceptions: true);
        using (pool)
        {
            pool.UnhandledException += (sender, args) => reports.Enqueue((sender, args));
            int thrower = 0;
            for (int i = 0; i < siblings; i++)
            {
                QueueAnyWay(pool, new LedgerItem(ledger, i), i);
                if (i % (siblings / throwers) == 0)
                {
                    int id = thrower++;
                    switch (id % 4)
                    {
                        case 0:
                            pool.QueueUserWorkItem(static s => ThrowFromWorkItem((int)s!), id);
                            break;
                        case 1:
                            pool.UnsafeQueueUserWorkItem(static s => ThrowFromWorkItem((int)s!), id);
                            break;
                        case 2:
                            pool.QueueUserWorkItem(ThrowFromWorkItem, id, preferLocal: false);
                            break;
                        default:
                            // From a worker, onto its local ring.
                            pool.QueueUserWorkItem(s => pool.UnsafeQueueUserWorkItem(ThrowFromWorkItem, s, preferLocal: true), id, preferLocal: false);
                            break;
                    }
                }
            }
            Assert.Equal(throwers, thrower);
            ledger.WaitForAll("siblings of throwing items");
            Waits.Until(() => reports.Count >= throwers, $"{throwers} exception reports");
            Waits.Never(() => reports.Count > throwers, "a report beyond one per throwing item");

            // The pool is still alive.
            RunOnPool(pool, safe: true, () => { });
        }
        ledger.AssertExactlyOnce();
        Assert.Equal(Enumerable.Range(0, throwers), reports.Select(r => FailureId(r.Args.Exception)).Order());
        foreach ((object? sender, WorkItemExceptionEventArgs args) in reports)
        {
            Assert.Same(pool, sender);
            Assert.Same(pool, args.Pool);
            Assert.IsType<InvalidOperationException>(args.Exception);
            Assert.Contains(nameof(ThrowFromWorkItem), args.Exception.StackTrace, StringComparison.Ordinal);
            Assert.False(args.Handled);
        }
        // Throwing items count as completed.
        Assert.Equal(siblings + throwers + throwers / 4 + 1, pool.CompletedWorkItemCount);
    }

    [Fact]
    public void ThrowingItem_UnderReport_WithNoHandler_LeavesThePoolRunning()
    {
        using WorkerPool pool = CreatePool(threads: 1, expectExceptions: true);
        int threadBefore = 0, threadAfter = 0;
        RunOnPool(pool, safe: false, () => threadBefore = Environment.CurrentManagedThreadId);
        pool.UnsafeQueueUserWorkItem(static _ => ThrowFromWorkItem(0), null);
        RunOnPool(pool, safe: false, () => threadAfter = Environment.CurrentManagedThreadId);
        Assert.Equal(threadBefore, threadAfter);
        Assert.Equal(1, pool.ThreadCount);
    }

    // ---- A throwing handler or hook loses no worker --------------------------------------------------------

    [Fact]
    public void ThrowingHandler_LosesNoWorker_DoesNotHang_AndLaterHandlersStillRun()
    {
        const int throwers = 100;
        using WorkerPool pool = CreatePool(threads: 1, expectExceptions: true);
        int firstHandler = 0, secondHandler = 0;
        pool.UnhandledException += (_, _) =>
        {
            Interlocked.Increment(ref firstHandler);
            throw new InvalidOperationException("a failing handler");
        };
        pool.UnhandledException += (_, _) => Interlocked.Increment(ref secondHandler);
        var threads = new ConcurrentDictionary<int, bool>();
        using var ledger = new ExactlyOnceLedger(throwers);
        for (int i = 0; i < throwers; i++)
        {
            pool.QueueUserWorkItem(id =>
            {
                threads[Environment.CurrentManagedThreadId] = true;
                ThrowFromWorkItem(id);
            }, i, preferLocal: false);
            pool.QueueUserWorkItem(index =>
            {
                threads[Environment.CurrentManagedThreadId] = true;
                ledger.Hit(index);
            }, i, preferLocal: false);
        }
        ledger.WaitForAll("items after throwing handlers");
        Waits.Until(() => Volatile.Read(ref secondHandler) == throwers, "the second handler for every failure");
        ledger.AssertExactlyOnce();
        Assert.Equal(throwers, Volatile.Read(ref firstHandler));
        Assert.Single(threads); // the one worker survived every failure
        Assert.Equal(1, pool.ThreadCount);
    }

    [Fact]
    public void ThrowingWorkerHooks_AreReported_AndTheWorkerStillRunsItems()
    {
        var reports = new ConcurrentQueue<string>();
        WorkerPool pool = CreatePool(threads: 1, expectExceptions: true, configure: o =>
        {
            o.OnWorkerStarted = () => throw new InvalidOperationException("started hook");
            o.OnWorkerStopping = () => throw new InvalidOperationException("stopping hook");
        });
        using (pool)
        {
            pool.UnhandledException += (_, e) => reports.Enqueue(e.Exception.Message);
            RunOnPool(pool, safe: true, () => { });
        }
        Assert.Equal(["started hook", "stopping hook"], reports);
        Assert.Equal(0, pool.ThreadCount);
    }
}
