using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Allocation of queueing once a pool is warm: an <see cref="IWorkItem"/> queued from outside the pool costs no
/// allocation, however deep the backlog it joins. Measured process-wide, so the class runs in the collection that xUnit
/// runs alone.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolAllocationTests
{
    [Fact]
    public void DeepBacklogQueuedFromOutside_OnceWarm_AllocatesNothingPerItem()
    {
        const int items = 20_000; // about twenty of the global queue's segments
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolAllocationTests),
            MinThreads = 1,
            MaxThreads = 1,
            FlowExecutionContext = false,
        });
        var round = new BacklogRound(items);
        for (int warm = 0; warm < 4; warm++)
        {
            round.Run(pool);
        }

        // The count is process-wide: threads that earlier tests' pools left finishing (or the runtime) may allocate
        // during one round, so the least of three rounds is judged. What the pool allocates per item it allocates in
        // every round.
        long allocated = long.MaxValue;
        for (int measured = 0; measured < 3; measured++)
        {
            long before = GC.GetTotalAllocatedBytes(precise: true);
            round.Run(pool);
            allocated = Math.Min(allocated, GC.GetTotalAllocatedBytes(precise: true) - before);
        }

        // The segments a cold queue needs for this backlog come to about 30 bytes per item; a warm one needs none. The
        // bound leaves room for whatever the runtime allocates meanwhile (far below one byte per item).
        Assert.True(allocated < items,
            $"Queueing a backlog of {items:N0} items on a warm pool allocated {allocated:N0} bytes ({(double)allocated / items:F2} B/item).");
    }

    /// <summary>
    /// One round: the pool's only worker blocks on a gate, the test thread (not a pool thread) queues the backlog
    /// behind it, then opens the gate and waits until every item has run. Everything it uses is allocated once.
    /// </summary>
    private sealed class BacklogRound(int items) : IWorkItem
    {
        private readonly ManualResetEventSlim _gate = new();
        private readonly ManualResetEventSlim _gateTaken = new();
        private readonly ManualResetEventSlim _done = new();
        private readonly GateItem _gateItem = new();
        private int _remaining;

        public void Run(WorkerPool pool)
        {
            _gate.Reset();
            _gateTaken.Reset();
            _done.Reset();
            _remaining = items;
            _gateItem.Round = this;
            pool.UnsafeQueueUserWorkItem(_gateItem, preferLocal: false);
            Waits.For(_gateTaken, "the worker to take the gate item");
            for (int i = 0; i < items; i++)
            {
                pool.UnsafeQueueUserWorkItem(this, preferLocal: false);
            }
            _gate.Set();
            Waits.For(_done, "every queued item to run");
        }

        public void Execute()
        {
            if (Interlocked.Decrement(ref _remaining) == 0)
            {
                _done.Set();
            }
        }

        private sealed class GateItem : IWorkItem
        {
            public BacklogRound? Round;

            public void Execute()
            {
                BacklogRound round = Round!;
                round._gateTaken.Set();
                round._gate.Wait();
            }
        }
    }
}
