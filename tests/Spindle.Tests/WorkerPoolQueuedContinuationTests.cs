using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// <c>UnsafeQueueContinuation</c>: work that continues accepted work is never refused, cancelled or held back by a
/// bound; it runs on the pool until the pool stops, then on the built-in pool, counted.
/// </summary>
public sealed class WorkerPoolQueuedContinuationTests
{
    private sealed class Probe
    {
        public readonly ManualResetEventSlim Ran = new();
        public WorkerPool? RanOn;
        public WorkerPoolLane? RanIn;
        public SynchronizationContext? Context;
    }

    private static readonly Action<Probe> s_record = static probe =>
    {
        probe.RanOn = WorkerPool.Current;
        probe.RanIn = WorkerPoolLane.Current;
        probe.Context = SynchronizationContext.Current;
        probe.Ran.Set();
    };

    private static WorkerPool NewPool(int threads = 2) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolQueuedContinuationTests),
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void AContinuation_RunsOnThePool_WithoutAContext_AndRejectsANullCallback()
    {
        using WorkerPool pool = NewPool();
        var probe = new Probe();
        pool.UnsafeQueueContinuation(s_record, probe, preferLocal: false);
        Waits.For(probe.Ran, "the continuation");
        Assert.Same(pool, probe.RanOn);
        Assert.Null(probe.Context);
        Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueContinuation<Probe>(null!, probe, preferLocal: false));
    }

    [Fact]
    public void CancelPending_RunsQueuedContinuations_AndDoesNotCountThem()
    {
        WorkerPool pool = NewPool(threads: 1);
        using var gate = new ManualResetEventSlim();
        using var blocking = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            blocking.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(blocking, "the blocking item");
        var probe = new Probe();
        pool.UnsafeQueueContinuation(s_record, probe, preferLocal: false);
        int plainRan = 0;
        pool.UnsafeQueueUserWorkItem(_ => Interlocked.Increment(ref plainRan), null);

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.CancelPending);
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the shutdown ends");
        Assert.Equal(1, shutdown.Result); // the plain item only
        Assert.True(probe.Ran.IsSet, "the continuation was dropped");
        Assert.Same(pool, probe.RanOn);
        Assert.Equal(0, Volatile.Read(ref plainRan));
    }

    [Fact]
    public void AfterThePoolStopped_AContinuationRunsOnTheBuiltInPool_AndIsCounted()
    {
        WorkerPool pool = NewPool();
        pool.Dispose();
        var probe = new Probe();
        pool.UnsafeQueueContinuation(s_record, probe, preferLocal: true); // no exception: it is not new work
        Waits.For(probe.Ran, "the continuation");
        Assert.Null(probe.RanOn);
        Assert.Equal(1, pool.RedirectedCallbackCount);
    }

    [Fact]
    public void OnAFullBoundedLane_AContinuationGoesPastTheBound_AndRunsInTheLane()
    {
        using WorkerPool pool = NewPool(threads: 1);
        using WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", QueueLimit = 1, FullMode = LaneFullMode.Reject });
        using var gate = new ManualResetEventSlim();
        using var blocking = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ =>
        {
            blocking.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(blocking, "the blocking item");
        lane.QueueUserWorkItem(_ => { }); // the lane is now full
        Assert.False(lane.TryQueueUserWorkItem(static (object? _) => { }, null, preferLocal: false));
        var probe = new Probe();
        lane.UnsafeQueueContinuation(s_record, probe, preferLocal: false);
        gate.Set();
        Waits.For(probe.Ran, "the continuation");
        Assert.Same(lane, probe.RanIn);
    }

    [Fact]
    public void AfterTheLaneStopped_AContinuationRunsOnThePoolsOwnQueue()
    {
        using WorkerPool pool = NewPool();
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "stopped" });
        lane.Dispose();
        var probe = new Probe();
        lane.UnsafeQueueContinuation(s_record, probe, preferLocal: false);
        Waits.For(probe.Ran, "the continuation");
        Assert.Same(pool, probe.RanOn);
        Assert.Null(probe.RanIn);
    }

    [Fact]
    public void QueueingTheSameCallbackAgain_AllocatesNothingPerItem()
    {
        const int items = 4_000;
        const int threads = 2;
        using WorkerPool pool = NewPool(threads);
        Action<CountdownEvent> signal = static countdown => countdown.Signal();
        using var done = new CountdownEvent(items);
        void Queue(int count)
        {
            done.Reset(count);
            for (int i = 0; i < count; i++)
            {
                pool.UnsafeQueueContinuation(signal, done, preferLocal: false);
            }
        }
        void Round()
        {
            Queue(items);
            Waits.For(done, "the continuations");
        }
        // Warm: the delegate's wrapper and the JIT, and the queue's segments at a depth the measured round cannot reach.
        // How far the workers fall behind the loop depends on the machine, and a round that queues deeper than any
        // before it needs a segment more; so one warm round queues twice the measured count while every worker waits on
        // a gate (the pool has no thread beyond them), and the drained segments stay on the queue's free list.
        using var gate = new ManualResetEventSlim();
        using var blocked = new CountdownEvent(threads);
        for (int i = 0; i < threads; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                blocked.Signal();
                gate.Wait();
            }, null);
        }
        try
        {
            Waits.For(blocked, "every worker to wait on the gate");
            Queue(2 * items);
        }
        finally
        {
            gate.Set();
        }
        Waits.For(done, "the continuations queued behind the gate");
        for (int warm = 0; warm < 3; warm++)
        {
            Round();
        }
        long before = GC.GetAllocatedBytesForCurrentThread();
        Round();
        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
        // A cold queue's segments come to about 30 bytes per item and a wrapper per call would be more; a warm queue and
        // a wrapped delegate need nothing (the bound, under a byte per item, leaves room for what the runtime allocates).
        Assert.True(allocated < items, $"{items:N0} continuations allocated {allocated:N0} bytes on the queueing thread.");
    }
}
