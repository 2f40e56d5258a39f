using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using Spindle.Parking;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The behaviour every flavour of <see cref="WorkerPool"/> must have: every accepted item runs exactly once, no wake-up
/// is lost, work is shared fairly, worker state and ExecutionContext do not leak between items, exceptions lose no
/// worker, shutdown drains or cancels each item once, the counters are right and completed items are not retained.
/// One derived class per flavour: the platform blocker, the <see cref="BlockerKind.Monitor"/> fallback, and tiny rings
/// with workers that park without spinning. Split by concern like the pool itself:
/// <c>.Accounting.cs</c>, <c>.ThreadState.cs</c>, <c>.Exceptions.cs</c>, <c>.Shutdown.cs</c>, <c>.Counters.cs</c>.
/// </summary>
public abstract partial class WorkerPoolContractTests : IDisposable
{
    // Work items cannot fail a test by throwing (the Report policy swallows the exception), so every pool reports its
    // exceptions here unless the test expects some, and the test fails at its end if any arrived.
    private readonly ConcurrentQueue<Exception> _unexpected = new();

    // Every pool a test creates, disposed after the test even when it failed half-way (Dispose is idempotent).
    // Pools that have already shut down and lost their threads are dropped, so tests creating thousands stay small.
    private readonly List<WorkerPool> _pools = [];

    /// <summary>Applies the flavour to options (called after the test's own settings).</summary>
    protected virtual void ConfigureFlavor(WorkerPoolOptions options)
    {
    }

    public void Dispose()
    {
        WorkerPool[] pools;
        lock (_pools)
        {
            pools = [.. _pools];
            _pools.Clear();
        }
        foreach (WorkerPool pool in pools)
        {
            try
            {
                pool.Dispose();
            }
            catch (Exception e)
            {
                // The test itself has already failed on this (or will, on the exceptions below).
                _unexpected.Enqueue(e);
            }
        }
        GC.SuppressFinalize(this);
        Assert.True(_unexpected.IsEmpty,
            "Work items or hooks threw: " + string.Join(" | ", _unexpected.Select(e => $"{e.GetType().Name}: {e.Message}")));
    }

    /// <summary>
    /// A pool of this flavour under the Report policy (an unhandled exception in FailProcess mode would take the test
    /// host down). <paramref name="threads"/> sets both MinThreads and MaxThreads.
    /// </summary>
    protected WorkerPool CreatePool(int? threads = null, Action<WorkerPoolOptions>? configure = null, bool expectExceptions = false)
    {
        var options = new WorkerPoolOptions
        {
            Name = GetType().Name,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        if (threads is int count)
        {
            options.MinThreads = count;
            options.MaxThreads = count;
        }
        configure?.Invoke(options);
        ConfigureFlavor(options);
        var pool = new WorkerPool(options);
        lock (_pools)
        {
            _pools.RemoveAll(static p => p.IsShutdownStarted && p.ThreadCount == 0);
            _pools.Add(pool);
        }
        if (!expectExceptions)
        {
            pool.UnhandledException += (_, e) => _unexpected.Enqueue(e.Exception);
        }
        return pool;
    }

    /// <summary>A thread count that lets every worker run at once with a few more than the cores of small machines.</summary>
    protected static int SmallThreadCount => Math.Clamp(Environment.ProcessorCount, 2, 4);

    /// <summary>Counts its runs; the same object may be queued many times.</summary>
    protected sealed class CountingWorkItem : IWorkItem
    {
        private readonly CountdownEvent? _countdown;
        private int _runs;

        public CountingWorkItem(CountdownEvent? countdown = null) => _countdown = countdown;

        public int Runs => Volatile.Read(ref _runs);

        public void Execute()
        {
            Interlocked.Increment(ref _runs);
            _countdown?.Signal();
        }
    }

    /// <summary>An item that hits one slot of a ledger, usable through every queueing API.</summary>
    private protected sealed class LedgerItem : IWorkItem
    {
        public LedgerItem(ExactlyOnceLedger ledger, int index)
        {
            Ledger = ledger;
            Index = index;
        }

        public ExactlyOnceLedger Ledger { get; }

        public int Index { get; }

        public void Execute() => Ledger.Hit(Index);

        public static readonly WaitCallback Callback = static state => ((LedgerItem)state!).Execute();

        public static readonly Action<LedgerItem> Action = static item => item.Execute();

        public static readonly Action<(ExactlyOnceLedger Ledger, int Index)> ValueAction = static s => s.Ledger.Hit(s.Index);
    }

    /// <summary>
    /// Queues the item through one of the seven queueing paths, chosen by <paramref name="way"/> (any integer), so a
    /// loop over items covers every public method.
    /// </summary>
    private protected static void QueueAnyWay(WorkerPool pool, LedgerItem item, int way)
    {
        switch ((uint)way % 7)
        {
            case 0:
                pool.QueueUserWorkItem(LedgerItem.Callback, item);
                break;
            case 1:
                pool.UnsafeQueueUserWorkItem(LedgerItem.Callback, item);
                break;
            case 2:
                pool.QueueUserWorkItem(LedgerItem.Action, item, preferLocal: true);
                break;
            case 3:
                pool.UnsafeQueueUserWorkItem(LedgerItem.Action, item, preferLocal: false);
                break;
            case 4:
                pool.QueueUserWorkItem(LedgerItem.ValueAction, (item.Ledger, item.Index), preferLocal: false);
                break;
            case 5:
                pool.UnsafeQueueUserWorkItem(LedgerItem.ValueAction, (item.Ledger, item.Index), preferLocal: true);
                break;
            default:
                pool.UnsafeQueueUserWorkItem(item, preferLocal: way % 2 == 0);
                break;
        }
    }
}
