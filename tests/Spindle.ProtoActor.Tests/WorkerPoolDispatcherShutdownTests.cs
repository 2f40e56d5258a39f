using System.Threading;
using System.Threading.Tasks;
using Proto;
using Xunit;

namespace Spindle.ProtoActor.Tests;

/// <summary>
/// A mailbox scheduled after its target began shutting down is never refused and never stranded: it runs on the pool
/// while the pool drains, in the pool's own queue once its lane has stopped, and on the built-in thread pool once the
/// pool has stopped (counted by the pool); and a cancelling shutdown does not drop a queued mailbox run.
/// </summary>
public sealed class WorkerPoolDispatcherShutdownTests
{
    [Fact]
    public async Task AfterThePoolHasStopped_MessagesAreProcessedOnTheBuiltInThreadPool_AndCounted()
    {
        const int Messages = 10;
        WorkerPool pool = Pools.Fixed(2, "stopped");
        await using var system = new ActorSystem();
        var dispatcher = new WorkerPoolDispatcher(pool);
        int onPool = 0;
        using var started = new ManualResetEventSlim();
        using var received = new CountdownEvent(Messages);
        PID actor = system.Root.Spawn(Props.FromFunc(context =>
        {
            switch (context.Message)
            {
                case Started:
                    started.Set();
                    break;
                case int:
                    if (WorkerPool.Current is not null)
                    {
                        Interlocked.Increment(ref onPool);
                    }
                    received.Signal();
                    break;
            }
            return Task.CompletedTask;
        }).WithDispatcher(dispatcher));
        Waits.For(started, "the actor started");
        Waits.Until(() => pool.PendingWorkItemCount == 0, "the Started run finished");
        pool.Dispose(); // drains, and waits for the workers to exit

        for (int i = 0; i < Messages; i++)
        {
            system.Root.Send(actor, i);
        }

        Waits.For(received, "every message received after the pool stopped");
        Assert.Equal(0, Volatile.Read(ref onPool));
        Assert.True(pool.RedirectedCallbackCount >= 1);
    }

    [Fact]
    public async Task DuringTheDrain_AMailboxScheduledRunsOnThePool()
    {
        using WorkerPool pool = Pools.Fixed(1, "draining");
        await using var system = new ActorSystem();
        var dispatcher = new WorkerPoolDispatcher(pool);
        (PID actor, Task<bool> receivedOnPool) = SpawnStarted(system, dispatcher, pool);
        ManualResetEventSlim release = Pools.Block(pool);
        Task<int> drain = pool.ShutdownAsync(ShutdownMode.Drain);
        Assert.True(pool.IsShutdownStarted);

        system.Root.Send(actor, 1); // the pool refuses new work now
        release.Set();

        Assert.True(await Waits.For(receivedOnPool, "the message received"), "the message was processed off the pool");
        await Waits.For(drain, "the drain");
        release.Dispose();
        Assert.Equal(0, pool.RedirectedCallbackCount);
    }

    [Fact]
    public async Task AfterTheLaneHasStopped_MessagesAreProcessedOnThePoolsOwnQueue()
    {
        using WorkerPool pool = Pools.Fixed(2, "lane-stopped");
        WorkerPoolLane lane = pool.CreateLane(new LaneOptions { Name = "actors" });
        await using var system = new ActorSystem();
        var dispatcher = new WorkerPoolDispatcher(lane);
        using var started = new ManualResetEventSlim();
        var where = new TaskCompletionSource<(bool OnPool, bool InLane)>(TaskCreationOptions.RunContinuationsAsynchronously);
        PID actor = system.Root.Spawn(Props.FromFunc(context =>
        {
            switch (context.Message)
            {
                case Started:
                    started.Set();
                    break;
                case int:
                    where.TrySetResult((WorkerPool.Current == pool, WorkerPoolLane.Current == lane));
                    break;
            }
            return Task.CompletedTask;
        }).WithDispatcher(dispatcher));
        Waits.For(started, "the actor started");
        Waits.Until(() => lane.PendingWorkItemCount == 0 && lane.RunningWorkItemCount == 0, "the Started run finished");
        lane.Dispose();

        system.Root.Send(actor, 1);

        (bool onPool, bool inLane) = await Waits.For(where.Task, "the message received");
        Assert.True(onPool, "the message was processed off the pool");
        Assert.False(inLane, "the message was processed in the stopped lane");
    }

    [Fact]
    public async Task ACancellingShutdown_RunsAQueuedMailbox_InsteadOfDroppingIt()
    {
        WorkerPool pool = Pools.Fixed(1, "cancelling");
        await using var system = new ActorSystem();
        var dispatcher = new WorkerPoolDispatcher(pool);
        (PID actor, Task<bool> received) = SpawnStarted(system, dispatcher, pool);
        ManualResetEventSlim release = Pools.Block(pool);
        system.Root.Send(actor, 1); // its mailbox run waits behind the blocked worker
        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.CancelPending);
        release.Set();

        Assert.True(await Waits.For(received, "the message received"), "the message was processed off the pool");
        Assert.Equal(0, await Waits.For(shutdown, "the shutdown"));
        release.Dispose();
    }

    /// <summary>
    /// Spawns an actor on <paramref name="dispatcher"/> and waits until it has started; the task says whether its first
    /// <c>int</c> message was processed on <paramref name="pool"/>.
    /// </summary>
    private static (PID Actor, Task<bool> ReceivedOnPool) SpawnStarted(ActorSystem system, WorkerPoolDispatcher dispatcher, WorkerPool pool)
    {
        var started = new ManualResetEventSlim(); // not disposed: the actor may still be inside Set when the wait returns
        var received = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        PID actor = system.Root.Spawn(Props.FromFunc(context =>
        {
            switch (context.Message)
            {
                case Started:
                    started.Set();
                    break;
                case int:
                    received.TrySetResult(WorkerPool.Current == pool);
                    break;
            }
            return Task.CompletedTask;
        }).WithDispatcher(dispatcher));
        Waits.For(started, "the actor started");
        return (actor, received.Task);
    }
}
