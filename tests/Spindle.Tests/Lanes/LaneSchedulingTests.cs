using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// How workers choose between lanes: priority classes, shares within a class, caps (exact under blocking, with items
/// waiting for a slot holding no worker), FIFO order of serial lanes, and the minimum share that keeps lower classes
/// from starving.
/// </summary>
public sealed class LaneSchedulingTests
{
    /// <summary>One worker, and a starvation interval long enough that ordering tests see the plain dispatch rule.</summary>
    private static WorkerPool NewSingleWorkerPool(string name, int starvationIntervalMs = 600_000) => new(new WorkerPoolOptions
    {
        Name = name,
        MinThreads = 1,
        MaxThreads = 1,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
        LaneStarvationIntervalMs = starvationIntervalMs,
    });

    [Fact]
    public void ATurnOfLongItems_EndsSoonAfterLowerWorkArrives_NotAfterAFixedNumberOfItems()
    {
        // One worker; a High lane with 20 items of 10 ms queued behind an occupied worker, then one Low item. The Low
        // class's minimum share (10 ms here) is served at a dispatch, so it depends on the High lane's turn ending:
        // the turn ends about a millisecond after it sees lower work waiting, so the Low item runs after a few High
        // items, not after a fixed count of them.
        using WorkerPool pool = NewSingleWorkerPool(nameof(ATurnOfLongItems_EndsSoonAfterLowerWorkArrives_NotAfterAFixedNumberOfItems), starvationIntervalMs: 10);
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "high", Priority = LanePriority.High });
        WorkerPoolLane low = pool.CreateLane(new LaneOptions { Name = "low", Priority = LanePriority.Low });
        int highRan = 0;
        int highBeforeLow = -1;
        using var done = new CountdownEvent(21);
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        for (int i = 0; i < 20; i++)
        {
            high.QueueUserWorkItem(_ =>
            {
                Thread.Sleep(10);
                Interlocked.Increment(ref highRan);
                done.Signal();
            });
        }
        low.QueueUserWorkItem(_ =>
        {
            highBeforeLow = Volatile.Read(ref highRan);
            done.Signal();
        });
        gate.Set();
        Waits.For(done, "every item");
        Assert.InRange(highBeforeLow, 0, 10);
    }

    [Fact]
    public void AtEveryDispatch_TheHighestClassWithWorkRunsFirst()
    {
        using WorkerPool pool = NewSingleWorkerPool(nameof(AtEveryDispatch_TheHighestClassWithWorkRunsFirst));
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "high", Priority = LanePriority.High });
        WorkerPoolLane low = pool.CreateLane(new LaneOptions { Name = "low", Priority = LanePriority.Low });
        var order = new ConcurrentQueue<string>();
        using var done = new CountdownEvent(15);
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);

        for (int i = 0; i < 5; i++)
        {
            low.QueueUserWorkItem(_ => { order.Enqueue("low"); done.Signal(); });
            pool.QueueUserWorkItem(_ => { order.Enqueue("normal"); done.Signal(); });
            high.QueueUserWorkItem(_ => { order.Enqueue("high"); done.Signal(); });
        }
        gate.Set();
        Waits.For(done, "every item");

        string[] expected = [.. Enumerable.Repeat("high", 5), .. Enumerable.Repeat("normal", 5), .. Enumerable.Repeat("low", 5)];
        Assert.Equal(expected, order.ToArray());
    }

    [Fact]
    public void HighWorkQueuedByAnItem_RunsBeforeTheLocalWorkItQueuedEarlier()
    {
        // The default lane's items queued from a worker sit in its local queue; a High item queued after them still runs
        // first, because lane items are looked at before local work at every dispatch.
        using WorkerPool pool = NewSingleWorkerPool(nameof(HighWorkQueuedByAnItem_RunsBeforeTheLocalWorkItQueuedEarlier));
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "high", Priority = LanePriority.High });
        var order = new ConcurrentQueue<string>();
        using var done = new CountdownEvent(4);

        pool.QueueUserWorkItem(_ =>
        {
            for (int i = 0; i < 3; i++)
            {
                pool.QueueUserWorkItem(_ => { order.Enqueue("local"); done.Signal(); }, 0, preferLocal: true);
            }
            high.QueueUserWorkItem(_ => { order.Enqueue("high"); done.Signal(); });
        });
        Waits.For(done, "every item");

        Assert.Equal(["high", "local", "local", "local"], order.ToArray());
    }

    [Fact]
    public void WithinAClass_LanesTakeTurnsByShare()
    {
        using WorkerPool pool = NewSingleWorkerPool(nameof(WithinAClass_LanesTakeTurnsByShare));
        WorkerPoolLane heavy = pool.CreateLane(new LaneOptions { Name = "heavy", Share = 3 });
        WorkerPoolLane light = pool.CreateLane(new LaneOptions { Name = "light", Share = 1 });
        var order = new ConcurrentQueue<char>();
        using var done = new CountdownEvent(40);
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);

        for (int i = 0; i < 30; i++)
        {
            heavy.QueueUserWorkItem(_ => { order.Enqueue('h'); done.Signal(); });
        }
        for (int i = 0; i < 10; i++)
        {
            light.QueueUserWorkItem(_ => { order.Enqueue('l'); done.Signal(); });
        }
        gate.Set();
        Waits.For(done, "every item");

        // While both have work, every window of four consecutive dispatches holds three of the heavy lane's items and
        // one of the light lane's, give or take the turn that was in progress.
        char[] run = order.ToArray();
        int lightInFirst32 = run.Take(32).Count(c => c == 'l');
        Assert.InRange(lightInFirst32, 7, 9);
    }

    [Fact]
    public void ASerialLane_RunsItsItemsOneAtATime_InQueueOrder_PerProducer()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(ASerialLane_RunsItsItemsOneAtATime_InQueueOrder_PerProducer), MinThreads = 4 });
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "strand", MaxConcurrency = 1 });
        const int PerProducer = 20_000;
        int running = 0;
        int overlaps = 0;
        int outOfOrder = 0;
        var next = new int[2]; // plain fields: a serial lane's items see each other's writes
        long total = 0;
        using var done = new CountdownEvent(2 * PerProducer);

        Parallel.For(0, 2, producer =>
        {
            for (int i = 0; i < PerProducer; i++)
            {
                int expected = i;
                serial.UnsafeQueueUserWorkItem(_ =>
                {
                    if (Interlocked.Increment(ref running) != 1)
                    {
                        Interlocked.Increment(ref overlaps);
                    }
                    if (next[producer] != expected)
                    {
                        Interlocked.Increment(ref outOfOrder);
                    }
                    next[producer] = expected + 1;
                    total++;
                    Interlocked.Decrement(ref running);
                    done.Signal();
                }, null);
            }
        });
        Waits.For(done, "every item of the serial lane");

        Assert.Equal(0, overlaps);
        Assert.Equal(0, outOfOrder);
        Waits.Until(() => serial.CompletedWorkItemCount == 2 * PerProducer, "the lane's completed count");
        Assert.Equal(2 * PerProducer, Volatile.Read(ref total));
        Assert.Equal(0, serial.PendingWorkItemCount);
    }

    [Fact]
    public void ASerialLane_FedInSmallBurstsWithPauses_RunsEveryItemOnce_InOrder()
    {
        // Bursts of 1 to 11 items, some with a pause after them and some without: a turn meets its producer's heels, a
        // queue with fewer items than it looks ahead for, an empty queue it waits on briefly, and one it gives up on.
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(ASerialLane_FedInSmallBurstsWithPauses_RunsEveryItemOnce_InOrder), MinThreads = 2 });
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "strand", MaxConcurrency = 1 });
        const int Items = 20_000;
        int next = 0;
        int outOfOrder = 0;
        int running = 0;
        int overlaps = 0;
        using var done = new CountdownEvent(Items);

        var random = new Random(7);
        int queued = 0;
        while (queued < Items)
        {
            int burst = Math.Min(random.Next(1, 12), Items - queued);
            for (int i = 0; i < burst; i++)
            {
                int expected = queued++;
                serial.QueueUserWorkItem(_ =>
                {
                    if (Interlocked.Increment(ref running) != 1)
                    {
                        Interlocked.Increment(ref overlaps);
                    }
                    if (next != expected)
                    {
                        outOfOrder++;
                    }
                    next = expected + 1;
                    Interlocked.Decrement(ref running);
                    done.Signal();
                });
            }
            switch (random.Next(4))
            {
                case 0:
                    Thread.SpinWait(random.Next(1, 200));
                    break;
                case 1 when queued % 64 < 11:
                    Thread.Sleep(1); // long enough for the turn to end and the lane to go idle
                    break;
            }
        }
        Waits.For(done, "every item of the strand");

        Assert.Equal(0, overlaps);
        Assert.Equal(0, outOfOrder);
        Assert.Equal(Items, Volatile.Read(ref next));
        Waits.Until(() => serial.CompletedWorkItemCount == Items, "the lane's completed count");
    }

    [Fact]
    public void ACap_HoldsWhileItemsBlockInsideBlockingRegions_AndWaitingItemsHoldNoWorker()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(ACap_HoldsWhileItemsBlockInsideBlockingRegions_AndWaitingItemsHoldNoWorker), MinThreads = 2, MaxThreads = 16 });
        WorkerPoolLane capped = pool.CreateLane(new LaneOptions { Name = "capped", MaxConcurrency = 3 });
        using var gate = new ManualResetEventSlim();
        int running = 0;
        int maxRunning = 0;
        using var done = new CountdownEvent(10);

        for (int i = 0; i < 10; i++)
        {
            capped.QueueUserWorkItem(_ =>
            {
                int now = Interlocked.Increment(ref running);
                InterlockedMax(ref maxRunning, now);
                using (WorkerPool.EnterBlockingRegion())
                {
                    gate.Wait(Waits.MustHappen);
                }
                Interlocked.Decrement(ref running);
                done.Signal();
            });
        }

        Waits.Until(() => Volatile.Read(ref running) == 3, "three items of the lane running");
        Waits.Never(() => Volatile.Read(ref running) > 3, "a fourth item of the lane starting");
        Assert.Equal(3, capped.RunningWorkItemCount);
        Assert.Equal(7, capped.PendingWorkItemCount);
        // The seven waiting items hold no worker: the pool still runs its own work.
        Task<int> poolWork = pool.Run(() => 42);
        Assert.True(poolWork.Wait(Waits.MustHappen), "the pool's own work ran while the lane's items waited for a slot");
        Assert.Equal(42, poolWork.Result);

        gate.Set();
        Waits.For(done, "every item of the capped lane");
        Assert.Equal(3, maxRunning);
        Waits.Until(() => capped.CompletedWorkItemCount == 10, "the lane's completed count");
        Assert.Equal(0, capped.RunningWorkItemCount);
    }

    [Fact]
    public void ACap_HoldsForTasksAndItemsQueuedFromInsideTheLane()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(ACap_HoldsForTasksAndItemsQueuedFromInsideTheLane), MinThreads = 4 });
        WorkerPoolLane capped = pool.CreateLane(new LaneOptions { Name = "capped", MaxConcurrency = 2 });
        int running = 0;
        int maxRunning = 0;
        const int Parents = 50;
        using var done = new CountdownEvent(Parents * 4);

        void Body()
        {
            int now = Interlocked.Increment(ref running);
            InterlockedMax(ref maxRunning, now);
            Thread.SpinWait(2_000);
            Interlocked.Decrement(ref running);
            done.Signal();
        }

        for (int i = 0; i < Parents; i++)
        {
            capped.QueueUserWorkItem(_ =>
            {
                Body();
                // Queued from inside: the local-queue hint is ignored for a lane, and the children stay in it.
                capped.QueueUserWorkItem(static body => body(), (Action)Body, preferLocal: true);
                Task.Factory.StartNew(Body, CancellationToken.None, TaskCreationOptions.None, capped.TaskScheduler);
                Task.Factory.StartNew(Body, CancellationToken.None, TaskCreationOptions.LongRunning, capped.TaskScheduler);
            });
        }
        Waits.For(done, "every item and task of the capped lane");

        Assert.InRange(maxRunning, 1, 2);
    }

    [Fact]
    public void UnderAHighFlood_LowAndDefaultWorkStillRun()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(UnderAHighFlood_LowAndDefaultWorkStillRun),
            MinThreads = 2,
            MaxThreads = 2,
            LaneStarvationIntervalMs = 10,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "flood", Priority = LanePriority.High });
        WorkerPoolLane low = pool.CreateLane(new LaneOptions { Name = "background", Priority = LanePriority.Low });
        using var stop = new CancellationTokenSource();
        long highRuns = 0;

        void Flood(object? _)
        {
            Thread.SpinWait(500);
            Interlocked.Increment(ref highRuns);
            if (!stop.IsCancellationRequested)
            {
                try
                {
                    high.QueueUserWorkItem(Flood);
                }
                catch (ObjectDisposedException)
                {
                    // The test has ended and disposed the pool while this item ran.
                }
            }
        }

        for (int i = 0; i < 8; i++)
        {
            high.QueueUserWorkItem(Flood);
        }
        Waits.Until(() => Interlocked.Read(ref highRuns) > 1_000, "the flood running");

        using var lowDone = new CountdownEvent(20);
        using var defaultDone = new CountdownEvent(20);
        for (int i = 0; i < 20; i++)
        {
            low.QueueUserWorkItem(_ => lowDone.Signal());
            pool.QueueUserWorkItem(_ => defaultDone.Signal());
        }
        long floodBefore = Interlocked.Read(ref highRuns);
        Waits.For(lowDone, "the Low items, during the High flood");
        Waits.For(defaultDone, "the pool's own items, during the High flood");
        long floodDuring = Interlocked.Read(ref highRuns) - floodBefore;
        stop.Cancel();

        Assert.True(floodDuring > 0, "the flood kept running while the lower classes were served");
    }

    [Fact]
    public void AThreadAddedWhileLanesWait_TakesTheHighLaneFirst()
    {
        // The only worker is blocked with a Low and a High item queued behind it; when the pool may add a thread, that
        // thread serves the High lane before the Low one, whatever the order they were queued in.
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(AThreadAddedWhileLanesWait_TakesTheHighLaneFirst),
            MinThreads = 1,
            MaxThreads = 1,
            LaneStarvationIntervalMs = 600_000,
        });
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "high", Priority = LanePriority.High });
        WorkerPoolLane low = pool.CreateLane(new LaneOptions { Name = "low", Priority = LanePriority.Low });
        ManualResetEventSlim gate = SingleWorker.Occupy(pool);
        var order = new ConcurrentQueue<string>();
        using var done = new CountdownEvent(2);
        try
        {
            low.QueueUserWorkItem(_ => { order.Enqueue("low"); done.Signal(); });
            high.QueueUserWorkItem(_ => { order.Enqueue("high"); done.Signal(); });
            pool.SetThreadLimits(1, 2);
            Waits.For(done, "both items, on the added thread");
        }
        finally
        {
            gate.Set();
        }

        Assert.Equal(["high", "low"], order.ToArray());
    }

    [Fact]
    public void Counters_TrackPendingRunningAndCompleted_AndThePoolCountsLaneWork()
    {
        using WorkerPool pool = NewSingleWorkerPool(nameof(Counters_TrackPendingRunningAndCompleted_AndThePoolCountsLaneWork));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "counted" });
        using var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        lane.QueueUserWorkItem(_ => { started.Set(); gate.Wait(Waits.MustHappen); });
        Waits.For(started, "the first item");
        for (int i = 0; i < 5; i++)
        {
            lane.QueueUserWorkItem(_ => { });
        }

        Assert.Equal(1, lane.RunningWorkItemCount);
        Assert.Equal(5, lane.PendingWorkItemCount);
        Assert.Equal(5, pool.PendingWorkItemCount);
        Assert.Contains("pending 5", lane.ToString(), StringComparison.Ordinal);

        long poolCompletedBefore = pool.CompletedWorkItemCount;
        gate.Set();
        Waits.Until(() => lane.CompletedWorkItemCount == 6, "the lane's items");
        Waits.Until(() => pool.CompletedWorkItemCount - poolCompletedBefore == 6, "the pool's count of them");
        Assert.Equal(0, lane.PendingWorkItemCount);
        Assert.Equal(0, lane.RunningWorkItemCount);
        Assert.Equal(0, lane.CancelledWorkItemCount);
    }

    [Fact]
    public void LongRunningItemsOfALane_WaitForItsCap_AndRunInABlockingRegion()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(LongRunningItemsOfALane_WaitForItsCap_AndRunInABlockingRegion), MinThreads = 1, MaxThreads = 8 });
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        using var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        int running = 0;
        int maxRunning = 0;
        using var done = new CountdownEvent(3);
        for (int i = 0; i < 3; i++)
        {
            serial.QueueUserWorkItem(_ =>
            {
                InterlockedMax(ref maxRunning, Interlocked.Increment(ref running));
                started.Set();
                gate.Wait(Waits.MustHappen);
                Interlocked.Decrement(ref running);
                done.Signal();
            }, 0, WorkItemOptions.LongRunning);
        }
        Waits.For(started, "the first long-running item");
        // The item blocks in a blocking region: the pool's own work still gets a thread.
        Assert.True(pool.Run(() => { }).Wait(Waits.MustHappen));
        Assert.Equal(0, pool.DedicatedThreadCount);

        gate.Set();
        Waits.For(done, "the long-running items");
        Assert.Equal(1, maxRunning);
    }

    private static void InterlockedMax(ref int target, int value)
    {
        int current = Volatile.Read(ref target);
        while (value > current)
        {
            int seen = Interlocked.CompareExchange(ref target, value, current);
            if (seen == current)
            {
                return;
            }
            current = seen;
        }
    }
}
