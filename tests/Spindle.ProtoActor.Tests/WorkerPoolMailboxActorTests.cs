using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Proto;
using Xunit;

namespace Spindle.ProtoActor.Tests;

/// <summary>
/// Actors spawned with <see cref="PropsExtensions.WithWorkerPool"/> in a real actor system: their messages cost the
/// pool's worker no allocation, a failing actor is restarted by its supervisor and goes on, awaits keep the order of an
/// actor's messages, and stopping an actor cancels its token and delivers its lifecycle messages.
/// </summary>
public sealed class WorkerPoolMailboxActorTests
{
    private sealed record Partner(PID Pid);

    private static readonly object s_ball = new();

    /// <summary>Counts the ball's passes down and signals when the warm-up and the measured passes are over.</summary>
    private sealed class BallCounter(long passes, long measured)
    {
        private long _remaining = passes;

        public ManualResetEventSlim Done { get; } = new();

        /// <summary>The passing thread's allocation counter when the measured passes began and when they ended.</summary>
        public long Before { get; private set; } = -1;

        public long After { get; private set; } = -1;

        /// <summary>Counts one pass; false once the last has been made.</summary>
        public bool Pass()
        {
            long left = Interlocked.Decrement(ref _remaining);
            if (left == measured)
            {
                Before = GC.GetAllocatedBytesForCurrentThread();
            }
            if (left > 0)
            {
                return true;
            }
            After = GC.GetAllocatedBytesForCurrentThread();
            Done.Set();
            return false;
        }
    }

    /// <summary>Passes the ball back to its partner; allocates nothing per message.</summary>
    private sealed class PingPong(BallCounter counter) : IActor
    {
        private PID? _partner;

        public Task ReceiveAsync(IContext context)
        {
            if (context.Message is Partner partner)
            {
                _partner = partner.Pid;
            }
            else if (ReferenceEquals(context.Message, s_ball) && counter.Pass())
            {
                context.Send(_partner!, s_ball);
            }
            return Task.CompletedTask;
        }
    }

    [Fact]
    public void WithWorkerPool_SetsTheDispatcherAndAWorkerPoolMailbox()
    {
        using WorkerPool pool = Pools.Fixed(1, "with-worker-pool");
        var dispatcher = new WorkerPoolDispatcher(pool);
        Props props = Props.FromFunc(_ => Task.CompletedTask).WithWorkerPool(dispatcher);
        Assert.Same(dispatcher, props.Dispatcher);
        Assert.IsType<WorkerPoolMailbox>(props.MailboxProducer());
        Assert.NotSame(props.MailboxProducer(), props.MailboxProducer());
        Assert.Throws<ArgumentNullException>("props", () => PropsExtensions.WithWorkerPool(null!, dispatcher));
        Assert.Throws<ArgumentNullException>("dispatcher", () => props.WithWorkerPool(null!));
    }

    [Fact]
    public async Task PingPong_AllocatesNothingPerMessageOnTheWorker()
    {
        // One worker runs both actors, so its own allocation counter sees every byte the round trips cost there.
        const int Warmup = 2_000;
        const int Measured = 40_000;
        using WorkerPool pool = Pools.Fixed(1, "mailbox-alloc");
        await using var system = new ActorSystem();
        var dispatcher = new WorkerPoolDispatcher(pool);
        var run = new BallCounter(Warmup + Measured, Measured);
        Props props = Props.FromProducer(() => new PingPong(run)).WithWorkerPool(dispatcher);
        PID a = system.Root.Spawn(props);
        PID b = system.Root.Spawn(props);
        // An actor handles its messages in order: each knows its partner before the ball arrives.
        system.Root.Send(a, new Partner(b));
        system.Root.Send(b, new Partner(a));
        system.Root.Send(a, s_ball);
        Waits.For(run.Done, "the round trips");

        // Both readings were taken by the actors, on the pool's only worker, at the first and the last measured pass.
        // Proto.Actor's own mailbox on this dispatcher allocates a 64-byte delegate per message (2.5 MB here); the bound
        // leaves room for what the runtime allocates now and then on a thread.
        Assert.True(run.Before >= 0 && run.After >= 0, "Both allocation readings were taken.");
        long allocated = run.After - run.Before;
        Assert.True(allocated < Measured, $"{Measured:N0} messages allocated {allocated:N0} bytes on the worker.");
    }

    [Fact]
    public async Task AnActorThatThrows_IsRestartedBySupervision_AndGoesOnWithItsMessages()
    {
        using WorkerPool pool = Pools.Fixed(2, "mailbox-restart");
        await using var system = new ActorSystem();
        var handled = new ConcurrentQueue<int>();
        int restarts = 0;
        using var received = new CountdownEvent(9);
        PID actor = system.Root.Spawn(Props.FromFunc(context =>
        {
            switch (context.Message)
            {
                case Restarting:
                    Interlocked.Increment(ref restarts);
                    break;
                case int n when n == 4 && handled.All(h => h != -4):
                    handled.Enqueue(-4);
                    throw new InvalidOperationException("the fourth message fails once");
                case int n:
                    handled.Enqueue(n);
                    received.Signal();
                    break;
            }
            return Task.CompletedTask;
        }).WithWorkerPool(new WorkerPoolDispatcher(pool)));

        for (int i = 0; i < 10; i++)
        {
            system.Root.Send(actor, i);
        }

        Waits.For(received, "every message but the failed one");
        Assert.Equal(1, Volatile.Read(ref restarts));
        // The failed message is not retried (the default strategy restarts the actor and moves on).
        Assert.Equal([0, 1, 2, 3, -4, 5, 6, 7, 8, 9], handled.ToArray());
    }

    [Fact]
    public async Task AwaitsInAnActor_KeepItsMessagesInOrder_OnThePool()
    {
        const int Messages = 200;
        using WorkerPool pool = Pools.Fixed(2, "mailbox-await");
        await using var system = new ActorSystem();
        var order = new List<int>();
        int offPool = 0;
        var done = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        PID actor = system.Root.Spawn(Props.FromFunc(async context =>
        {
            if (context.Message is int n)
            {
                if (n % 3 == 0)
                {
                    await Task.Yield();
                }
                else if (n % 3 == 1)
                {
                    await Task.Delay(1);
                }
                if (WorkerPool.Current != pool)
                {
                    Interlocked.Increment(ref offPool);
                }
                order.Add(n); // one message at a time: the mailbox holds the next until this one's task ends
                if (order.Count == Messages)
                {
                    done.SetResult();
                }
            }
        }).WithWorkerPool(new WorkerPoolDispatcher(pool)));

        for (int i = 0; i < Messages; i++)
        {
            system.Root.Send(actor, i);
        }

        await Waits.For(done.Task.ContinueWith(static _ => true, TaskScheduler.Default), "every message");
        Assert.Equal(Enumerable.Range(0, Messages), order);
        Assert.Equal(0, offPool);
    }

    [Fact]
    public async Task StoppingAnActor_CancelsItsToken_AndDeliversItsLifecycle()
    {
        using WorkerPool pool = Pools.Fixed(2, "mailbox-stop");
        await using var system = new ActorSystem();
        var lifecycle = new ConcurrentQueue<string>();
        CancellationToken token = default;
        using var started = new ManualResetEventSlim();
        PID actor = system.Root.Spawn(Props.FromFunc(context =>
        {
            switch (context.Message)
            {
                case Started:
                    token = context.CancellationToken;
                    lifecycle.Enqueue("started");
                    started.Set();
                    break;
                case Stopping:
                    lifecycle.Enqueue("stopping");
                    break;
                case Stopped:
                    lifecycle.Enqueue("stopped");
                    break;
            }
            return Task.CompletedTask;
        }).WithWorkerPool(new WorkerPoolDispatcher(pool)));

        Waits.For(started, "the actor started");
        await Waits.For(system.Root.StopAsync(actor).ContinueWith(static _ => true, TaskScheduler.Default), "the actor stopped");
        Assert.True(token.IsCancellationRequested);
        Assert.Equal(["started", "stopping", "stopped"], lifecycle.ToArray());
    }

    [Fact]
    public async Task ManyThreadsPostingToOneActor_EveryMessageRunsOnce()
    {
        const int Threads = 4;
        const int PerThread = 20_000;
        using WorkerPool pool = Pools.Fixed(2, "mailbox-posters");
        await using var system = new ActorSystem();
        var seen = new int[Threads * PerThread];
        int duplicates = 0;
        using var received = new CountdownEvent(seen.Length);
        // Throughput 1: every message ends a run, so posts race the end of runs as often as they can.
        PID actor = system.Root.Spawn(Props.FromFunc(context =>
        {
            if (context.Message is int n)
            {
                if (Interlocked.Exchange(ref seen[n], 1) != 0)
                {
                    Interlocked.Increment(ref duplicates);
                }
                received.Signal();
            }
            return Task.CompletedTask;
        }).WithWorkerPool(new WorkerPoolDispatcher(pool, throughput: 1)));

        var posters = new Thread[Threads];
        for (int t = 0; t < Threads; t++)
        {
            int first = t * PerThread;
            posters[t] = new Thread(() =>
            {
                for (int i = 0; i < PerThread; i++)
                {
                    system.Root.Send(actor, first + i);
                }
            });
            posters[t].Start();
        }
        foreach (Thread poster in posters)
        {
            Assert.True(poster.Join(Waits.MustHappen), "A posting thread finished.");
        }

        Waits.For(received, "every posted message");
        Assert.Equal(0, Volatile.Read(ref duplicates));
    }
}
