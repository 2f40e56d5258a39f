using System;
using System.Threading;
using Akka.Actor;

namespace Spindle.Akka.Tests;

/// <summary>Replies to any message with where it ran: the pool and lane of the thread that processed it.</summary>
internal sealed class WhereActor : ReceiveActor
{
    public WhereActor() => ReceiveAny(_ => Sender.Tell(new Where(WorkerPool.Current, WorkerPoolLane.Current, Environment.CurrentManagedThreadId)));
}

internal sealed record Where(WorkerPool? Pool, WorkerPoolLane? Lane, int ThreadId);

/// <summary>Counts how many of its kind process a message at once, holding each message for a while.</summary>
internal sealed class OverlapActor : ReceiveActor
{
    public OverlapActor(OverlapProbe probe) => ReceiveAny(_ =>
    {
        probe.Enter();
        Thread.Sleep(2);
        probe.Exit();
        Sender.Tell("done");
    });
}

internal sealed class OverlapProbe
{
    private int _now;
    private int _max;

    public int Max => Volatile.Read(ref _max);

    public void Enter()
    {
        int now = Interlocked.Increment(ref _now);
        int max;
        while (now > (max = Volatile.Read(ref _max)) && Interlocked.CompareExchange(ref _max, now, max) != max)
        {
        }
    }

    public void Exit() => Interlocked.Decrement(ref _now);
}

/// <summary>Sends <c>Ping</c> to its partner until it has had the given number of replies, then tells whoever started it.</summary>
internal sealed class PingActor : ReceiveActor
{
    private int _left;
    private IActorRef? _requester;

    public PingActor(IActorRef ponger)
    {
        Receive<int>(rounds =>
        {
            _left = rounds;
            _requester = Sender;
            ponger.Tell("ping");
        });
        Receive<string>(_ =>
        {
            if (--_left == 0)
            {
                _requester!.Tell("finished");
            }
            else
            {
                Sender.Tell("ping");
            }
        });
    }
}

internal sealed class PongActor : ReceiveActor
{
    public PongActor() => Receive<string>(_ => Sender.Tell("pong"));
}

/// <summary>Appends its name to a shared log for every message, and tells the sender when it has had its last one.</summary>
internal sealed class LoggingActor : ReceiveActor
{
    public LoggingActor(char name, System.Collections.Concurrent.ConcurrentQueue<char> log, int expected)
    {
        int seen = 0;
        Receive<int>(_ =>
        {
            log.Enqueue(name);
            if (++seen == expected)
            {
                Sender.Tell("done");
            }
        });
    }
}
