using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Tests.Telemetry;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// Lanes at the edges of shutdown: producers waiting for room, bounds at their limit, serial lanes after the stop, the
/// pool's list of lanes, and what runs elsewhere after the pool has stopped.
/// </summary>
public sealed class LaneShutdownEdgeTests
{
    private static WorkerPool NewPool(string name, int threads = 2) => new(new WorkerPoolOptions
    {
        Name = $"{name}-{Guid.NewGuid():N}",
        MinThreads = threads,
        MaxThreads = threads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    /// <summary>
    /// Occupies the only slot of a serial lane until the returned gate is set (or for four times the must-happen bound,
    /// so that what a test waits for with that bound cannot be the slot's release).
    /// </summary>
    private static ManualResetEventSlim OccupySlot(WorkerPoolLane serial)
    {
        var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        serial.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(4 * Waits.MustHappen);
        });
        Waits.For(started, "the item holding the lane's slot");
        return gate;
    }

    private sealed class NoOpItem : IWorkItem
    {
        public void Execute()
        {
        }
    }

    /// <summary>A producer on its own thread: the task ends with whatever the queueing call ended with.</summary>
    private static Task Producer(Func<Task> call) =>
        Task.Factory.StartNew(() => call(), CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default).Unwrap();

    [Theory]
    [InlineData(ShutdownMode.Drain)]
    [InlineData(ShutdownMode.CancelPending)]
    public void PoolShutdown_ReleasesEveryProducerWaitingForRoom_WhileAnItemStillRuns(ShutdownMode mode)
    {
        // Synchronous on purpose: the slot holder's item waits at most 4 x MustHappen, and an async test's continuations
        // wait for a thread of the test runner, which the stress form's long tests can hold for minutes (a run of the
        // whole suite with SPINDLE_STRESS=1 reached the check that the shutdown is still pending two minutes late).
        using WorkerPool pool = NewPool(nameof(PoolShutdown_ReleasesEveryProducerWaitingForRoom_WhileAnItemStillRuns));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "bounded", MaxConcurrency = 1, QueueLimit = 1, FullMode = LaneFullMode.Wait });
        ManualResetEventSlim gate = OccupySlot(lane);
        int ran = 0;
        lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran)); // fills the bound
        Task[] producers =
        [
            Producer(() => { lane.QueueUserWorkItem(_ => Interlocked.Increment(ref ran)); return Task.CompletedTask; }),
            Producer(() => { lane.UnsafeQueueUserWorkItem(new NoOpItem(), preferLocal: false); return Task.CompletedTask; }),
            Producer(() => lane.Run(() => Interlocked.Increment(ref ran))),
            Producer(() => lane.RunAsValueTask(() => { Interlocked.Increment(ref ran); }).AsTask()),
            Producer(() => lane.QueueUserWorkItemAsync(static _ => { }, 0).AsTask()),
        ];
        Assert.False(Task.WhenAny(producers).Wait(Waits.MustNotHappen), "a producer got room in a full lane");

        Task<int> shutdown = pool.ShutdownAsync(mode);
        try
        {
            // The running item still holds the slot (it could be waiting for one of these producers): they end anyway.
            foreach (Task producer in producers)
            {
                AggregateException error = Assert.Throws<AggregateException>(() => producer.Wait(Waits.MustHappen));
                Assert.IsType<ObjectDisposedException>(error.InnerException);
            }
            Assert.False(shutdown.IsCompleted);
        }
        finally
        {
            gate.Set();
        }
        Assert.True(shutdown.Wait(Waits.MustHappen), "the shutdown did not complete once the slot's item ended");
        Assert.Equal(mode == ShutdownMode.Drain ? 1 : 0, Volatile.Read(ref ran));
    }

    [Theory]
    [InlineData(LaneFullMode.Wait)]
    [InlineData(LaneFullMode.Reject)]
    public async Task ABoundOfIntMaxValue_ShutsDownAndStops_LaneAndPool(LaneFullMode fullMode)
    {
        WorkerPool pool = NewPool(nameof(ABoundOfIntMaxValue_ShutsDownAndStops_LaneAndPool));
        var options = new LaneOptions { Name = "huge", QueueLimit = int.MaxValue, FullMode = fullMode };
        WorkerPoolLane first = pool.CreateLane(options);
        WorkerPoolLane second = pool.CreateLane(new LaneOptions { Name = "huge-2", QueueLimit = int.MaxValue, FullMode = fullMode, MaxConcurrency = 1 });
        int ran = 0;
        for (int i = 0; i < 100; i++)
        {
            first.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
            second.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
        }

        first.Dispose();
        Assert.True(first.LaneCore!.HasStopped, "the lane stopped");
        await second.Run(() => Interlocked.Increment(ref ran)).WaitAsync(Waits.MustHappen);
        Waits.RunBounded(pool.Dispose, "the pool's dispose");
        Assert.True(second.LaneCore!.HasStopped, "the pool's lane stopped with it");
        Assert.Equal(201, Volatile.Read(ref ran));
        Assert.Throws<ObjectDisposedException>(() => second.QueueUserWorkItem(_ => { }));
    }

    /// <summary>
    /// Posts <paramref name="count"/> callbacks that each take a while and record whether another one was running, and
    /// waits for all of them: the overlaps seen and the order they ran in.
    /// </summary>
    private static (int Overlaps, int[] Order) PostAndWatch(Action<SendOrPostCallback, object?> post, int count)
    {
        int inside = 0;
        int overlaps = 0;
        var order = new ConcurrentQueue<int>();
        using var done = new CountdownEvent(count);
        for (int i = 0; i < count; i++)
        {
            post(state =>
            {
                if (Interlocked.Increment(ref inside) != 1)
                {
                    Interlocked.Increment(ref overlaps);
                }
                order.Enqueue((int)state!);
                Thread.Sleep(1); // long enough for a second callback to start, were it allowed to
                Interlocked.Decrement(ref inside);
                done.Signal();
            }, i);
        }
        Waits.For(done, "every posted callback");
        return (Volatile.Read(ref overlaps), order.ToArray());
    }

    [Fact]
    public void ASerialLanesPosts_AfterThePoolStopped_RunOneAtATimeInOrder_AndAreCountedAndReported()
    {
        WorkerPool pool = NewPool(nameof(ASerialLanesPosts_AfterThePoolStopped_RunOneAtATimeInOrder_AndAreCountedAndReported));
        using var listener = new EventSourceTests.Listener(pool.Name);
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        SynchronizationContext context = serial.SynchronizationContext;
        pool.Dispose();
        Assert.Empty(pool.Lanes);

        (int overlaps, int[] order) = PostAndWatch(context.Post, 40);

        Assert.Equal(0, overlaps);
        Assert.Equal(Enumerable.Range(0, 40), order);
        Waits.Until(() => pool.RedirectedCallbackCount == 40, "every post counted as redirected");
        Waits.Until(() => listener.Events.Count(e => e.EventName == "CallbackRedirected") == 40, "every post reported");
    }

    [Fact]
    public void ASendToASerialLane_AfterThePoolStopped_WaitsForThePostThatHoldsTheSlot()
    {
        // After the pool's stop a post to a serial lane runs elsewhere holding the lane's only slot; a Send from an
        // outside thread must wait for it, as it would wait for the lane's running item before the stop.
        WorkerPool pool = NewPool(nameof(ASendToASerialLane_AfterThePoolStopped_WaitsForThePostThatHoldsTheSlot));
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        SynchronizationContext context = serial.SynchronizationContext;
        pool.Dispose();
        int inside = 0;
        int overlaps = 0;
        void Enter()
        {
            if (Interlocked.Increment(ref inside) != 1)
            {
                Interlocked.Increment(ref overlaps);
            }
        }
        using var postStarted = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        context.Post(_ =>
        {
            Enter();
            postStarted.Set();
            gate.Wait(Waits.MustHappen);
            Interlocked.Decrement(ref inside);
        }, null);
        Waits.For(postStarted, "the post that holds the serial lane's slot");
        bool sent = false;

        TestThread sender = Waits.Start(() => context.Send(_ =>
        {
            Enter();
            Volatile.Write(ref sent, true);
            Interlocked.Decrement(ref inside);
        }, null), "the sender");
        Waits.Never(() => Volatile.Read(ref sent), "the sent callback runs while the post holds the slot");
        gate.Set();
        sender.Join();

        Assert.True(Volatile.Read(ref sent));
        Assert.Equal(0, Volatile.Read(ref overlaps));
    }

    [Fact]
    public void ASerialLanesPostsAndTasks_AfterItsOwnStop_RunOnThePoolOneAtATimeInOrder()
    {
        using WorkerPool pool = NewPool(nameof(ASerialLanesPostsAndTasks_AfterItsOwnStop_RunOnThePoolOneAtATimeInOrder), threads: 4);
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1 });
        SynchronizationContext context = serial.SynchronizationContext;
        TaskScheduler scheduler = serial.TaskScheduler;
        serial.Dispose();
        Assert.DoesNotContain(serial, pool.Lanes);
        var pools = new ConcurrentBag<WorkerPool?>();

        (int overlaps, int[] order) = PostAndWatch((callback, state) =>
        {
            if ((int)state! % 2 == 0)
            {
                context.Post(s => { pools.Add(WorkerPool.Current); callback(s); }, state);
            }
            else
            {
                _ = Task.Factory.StartNew(s => { pools.Add(WorkerPool.Current); callback(s); }, state, CancellationToken.None, TaskCreationOptions.None, scheduler);
            }
        }, 40);

        Assert.Equal(0, overlaps);
        Assert.Equal(Enumerable.Range(0, 40), order);
        Assert.All(pools, p => Assert.Same(pool, p));
        Assert.Equal(0, pool.RedirectedCallbackCount);
    }

    [Fact]
    public void ASerialLanesLeftoversAndLaterPosts_AfterThePoolStopped_RunOneAtATime()
    {
        // A pool that never gets a worker (thread creation refused) leaves its lane's items to the stop's sweep; posts
        // arriving after the stop queue behind them, and run one at a time on the built-in pool (which has a thread
        // per core at least, so two of them would overlap if they were allowed to).
        int refused = 0;
        WorkerPool pool = new(new WorkerPoolOptions
        {
            Name = $"{nameof(ASerialLanesLeftoversAndLaterPosts_AfterThePoolStopped_RunOneAtATime)}-{Guid.NewGuid():N}",
            MinThreads = 0,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            ThreadFactory = (_, _) =>
            {
                Interlocked.Increment(ref refused);
                throw new OutOfMemoryException("refused by the test");
            },
        });
        WorkerPoolLane capped = pool.CreateLane(new LaneOptions { Name = "capped", MaxConcurrency = 1 });
        int inside = 0;
        int most = 0;
        int ran = 0;
        void Body()
        {
            int now = Interlocked.Increment(ref inside);
            int seen;
            while ((seen = Volatile.Read(ref most)) < now && Interlocked.CompareExchange(ref most, now, seen) != seen)
            {
            }
            Thread.Sleep(1);
            Interlocked.Decrement(ref inside);
            Interlocked.Increment(ref ran);
        }
        for (int i = 0; i < 10; i++)
        {
            capped.QueueUserWorkItem(_ => Body());
        }
        Waits.Until(() => Volatile.Read(ref refused) > 0, "a refused thread");
        SynchronizationContext context = capped.SynchronizationContext;
        pool.ShutdownAsync(ShutdownMode.Drain).Wait(Waits.MustHappen);
        for (int i = 0; i < 40; i++)
        {
            context.Post(_ => Body(), null);
        }

        Waits.Until(() => Volatile.Read(ref ran) == 50, "the leftovers and the posts");
        Assert.Equal(1, Volatile.Read(ref most));
    }

    [Fact]
    public async Task Lanes_ListsOnlyLanesThatHaveNotStopped()
    {
        WorkerPool pool = NewPool(nameof(Lanes_ListsOnlyLanesThatHaveNotStopped));
        WorkerPoolLane a = pool.CreateLane(new LaneOptions { Name = "a" });
        WorkerPoolLane b = pool.CreateLane(new LaneOptions { Name = "b", MaxConcurrency = 1 });
        Assert.Equal(new HashSet<WorkerPoolLane> { a, b }, pool.Lanes.ToHashSet());

        await a.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen);
        Assert.Equal([b], pool.Lanes);

        await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Waits.MustHappen);
        Assert.Empty(pool.Lanes);
    }

    [Fact]
    public void NewTasksAndPosts_AfterThePoolStopped_RunElsewhere_CountedAndReportedWhenTheyRun()
    {
        WorkerPool pool = NewPool(nameof(NewTasksAndPosts_AfterThePoolStopped_RunElsewhere_CountedAndReportedWhenTheyRun));
        using var listener = new EventSourceTests.Listener(pool.Name);
        TaskScheduler scheduler = pool.TaskScheduler;
        SynchronizationContext context = pool.SynchronizationContext;
        pool.Dispose();

        Task started = Task.Factory.StartNew(() => Assert.Null(WorkerPool.Current), CancellationToken.None, TaskCreationOptions.None, scheduler);
        using var posted = new ManualResetEventSlim();
        context.Post(_ => posted.Set(), null);

        Assert.True(started.Wait(Waits.MustHappen), "the new task ran");
        Waits.For(posted, "the post");
        Waits.Until(() => pool.RedirectedCallbackCount == 2, "both counted");
        Waits.Until(() => listener.Events.Count(e => e.EventName == "CallbackRedirected") == 2, "both reported");
        Assert.Contains(listener.Events, e => e.EventName == "CallbackRedirected" && e.Level == System.Diagnostics.Tracing.EventLevel.Warning);
    }

    [Fact]
    public void TheLanesClock_ResolvesWellBelowAMillisecond()
    {
        // The minimum share's bound is a few milliseconds: a clock that steps by milliseconds would stretch it.
        long smallestStep = long.MaxValue;
        for (int i = 0; i < 100; i++)
        {
            long start = LaneClock.Now;
            long next;
            while ((next = LaneClock.Now) == start)
            {
            }
            smallestStep = Math.Min(smallestStep, next - start);
        }
        Assert.True(smallestStep < LaneClock.FromMilliseconds(1) / 10, $"smallest step {smallestStep} ticks");
    }

    /// <summary>
    /// A serial lane's cancel sweep runs while an item of the lane holds its slot, and that item ends as the sweep lets go
    /// (the sweep cancels a queued Run item, whose task's synchronous continuation, run once the sweep has let go,
    /// releases the item and waits a moment): both posts, which the sweep took out and queued again, still run one at a
    /// time, in the order they were posted.
    /// </summary>
    [Fact]
    public void ASerialLanesCancelSweep_KeepsThePostsInOrder_WhenTheRunningItemEndsDuringTheSweep()
    {
        using WorkerPool pool = NewPool(nameof(ASerialLanesCancelSweep_KeepsThePostsInOrder_WhenTheRunningItemEndsDuringTheSweep));
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "strand", MaxConcurrency = 1 });
        ManualResetEventSlim gate = OccupySlot(lane);
        var order = new ConcurrentQueue<int>();
        lane.SynchronizationContext.Post(_ => order.Enqueue(1), null);
        using var source = new CancellationTokenSource();
        Task cancelled = lane.Run(() => order.Enqueue(-1), source.Token);
        lane.SynchronizationContext.Post(_ => order.Enqueue(2), null);
        // Runs on the sweeping thread, right after the sweep.
        cancelled.ContinueWith(_ =>
        {
            gate.Set();
            Waits.Poll(() => !order.IsEmpty, TimeSpan.FromMilliseconds(300));
        }, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);

        Assert.True(lane.ShutdownAsync(ShutdownMode.CancelPending).Wait(Waits.MustHappen), "the lane did not stop");
        Assert.True(cancelled.IsCanceled);
        Assert.Equal([1, 2], order.ToArray());
    }

    /// <summary>
    /// After a serial lane's own stop (the pool running on), a post to its context runs on its after-stop path, holding
    /// the lane's only slot. A Send to the same context from inside it runs inline, as from an item of the running lane,
    /// instead of queueing behind the slot it holds and waiting for ever; so does a wait on a task of the lane's scheduler.
    /// The post still runs as the pool's work (no current lane).
    /// </summary>
    [Fact]
    public void ASendOrTaskWaitFromAPostAfterASerialLanesStop_RunsInline()
    {
        WorkerPool pool = NewPool(nameof(ASendOrTaskWaitFromAPostAfterASerialLanesStop_RunsInline));
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "strand", MaxConcurrency = 1 });
        SynchronizationContext context = serial.SynchronizationContext;
        TaskScheduler scheduler = serial.TaskScheduler;
        serial.Dispose();
        Assert.False(pool.HasStopped);

        using var sent = new ManualResetEventSlim();
        using var postDone = new ManualResetEventSlim();
        WorkerPoolLane? laneInPost = serial;
        bool taskRan = false;
        context.Post(_ =>
        {
            laneInPost = WorkerPoolLane.Current;
            context.Send(_ => sent.Set(), null);
            Task task = Task.Factory.StartNew(() => taskRan = true, CancellationToken.None, TaskCreationOptions.None, scheduler);
            task.Wait(); // an untimed wait without a token is the one Task.Wait tries to run inline
            taskRan &= task.IsCompletedSuccessfully;
            postDone.Set();
        }, null);

        bool ran = sent.Wait(Waits.MustHappen) && postDone.Wait(Waits.MustHappen);
        if (ran)
        {
            pool.Dispose();
        }
        // Otherwise a worker is blocked for good in Send or Wait: the pool is left undisposed (its Dispose would wait for it).
        Assert.True(ran, "a Send or a task wait from an after-stop post of a serial lane to the lane itself never ran");
        Assert.True(taskRan, "the task queued to the stopped lane's scheduler did not run inline");
        Assert.Null(laneInPost);
    }
}
