using System;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Akka.Actor;
using Akka.Actor.Setup;
using Akka.Cluster;
using Akka.Configuration;

namespace Spindle.Akka.ClusterSample;

/// <summary>What the failure detectors of a two-node run saw.</summary>
/// <param name="Mode">Where the actors ran.</param>
/// <param name="Unreachable">How many times a node was marked unreachable during the load.</param>
/// <param name="MaxGap">The longest gap between two heartbeats any node received during the load.</param>
/// <param name="Beats">Heartbeats received during the load, both nodes together.</param>
/// <param name="AcceptablePause">The failure detector's acceptable heartbeat pause.</param>
/// <param name="RoundTrips">Ping-pong round trips the ordinary actors completed during the load.</param>
public sealed record HeartbeatReport(string Mode, int Unreachable, TimeSpan MaxGap, int Beats, TimeSpan AcceptablePause, long RoundTrips)
{
    /// <inheritdoc/>
    public override string ToString() =>
        $"{Mode}: unreachable events {Unreachable}, longest heartbeat gap {MaxGap.TotalMilliseconds:N0} ms (acceptable pause {AcceptablePause.TotalMilliseconds:N0} ms), "
        + $"heartbeats {Beats}, ping-pong round trips {RoundTrips:N0}";
}

/// <summary>
/// Two cluster nodes on loopback in one process, loaded on both nodes with ping-pong pairs of ordinary actors and with
/// actors that block (a synchronous 100 ms wait per message), while each node's failure detector records the
/// heartbeats it gets from the other.
/// </summary>
public static class HeartbeatRun
{
    /// <summary>The failure detector's heartbeat interval in these runs (Akka.NET's default).</summary>
    public static readonly TimeSpan HeartbeatInterval = TimeSpan.FromSeconds(1);

    /// <summary>The failure detector's acceptable pause in these runs (Akka.NET's default).</summary>
    public static readonly TimeSpan AcceptablePause = TimeSpan.FromSeconds(3);

    private const string Executor = "\"Spindle.Akka.SpindleExecutorServiceConfigurator, Spindle.Akka\"";

    private static readonly string s_common = $$"""
        akka {
          loglevel = WARNING
          stdout-loglevel = WARNING
          actor.provider = cluster
          remote.dot-netty.tcp { hostname = 127.0.0.1, port = 0 }
          cluster.failure-detector {
            implementation-class = "{{typeof(RecordingFailureDetector).AssemblyQualifiedName}}"
            heartbeat-interval = {{HeartbeatInterval.TotalMilliseconds}}ms
            acceptable-heartbeat-pause = {{AcceptablePause.TotalMilliseconds}}ms
          }
        }
        """;

    // Spindle: the ordinary actors on a normal-priority lane of one pool; Akka.NET's own internal and remoting
    // dispatchers (cluster membership, heartbeats, the transport's actors) on high-priority lanes of the same pool; the
    // blocking actors on a pool of their own.
    private static readonly string s_spindle = $$"""
        akka.actor.default-dispatcher { executor = {{Executor}}, spindle { pool = actors, lane.priority = normal } }
        akka.actor.internal-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle { pool = actors, lane.priority = high } }
        akka.remote.default-remote-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle { pool = actors, lane.priority = high } }
        blocking-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle.pool = blocking }
        """;

    // Akka.NET's defaults: the ordinary and the blocking actors on the default dispatcher (the built-in thread pool);
    // the internal and remoting dispatchers keep their own defaults.
    private const string BuiltInBlockingDispatcher = "akka.actor.default-dispatcher";

    /// <summary>Runs the two nodes under load for <paramref name="load"/> and reports what their failure detectors saw.</summary>
    /// <param name="onSpindle">Run the actors on Spindle (see the class remarks) instead of the default dispatcher.</param>
    /// <param name="load">How long the load lasts.</param>
    /// <param name="blockingActors">Blocking actors per node, each kept busy for the whole load.</param>
    /// <param name="cancellationToken">Ends the wait for the cluster to form.</param>
    /// <returns>The report.</returns>
    public static async Task<HeartbeatReport> RunAsync(bool onSpindle, TimeSpan load, int blockingActors, CancellationToken cancellationToken = default)
    {
        Config config = ConfigurationFactory.ParseString((onSpindle ? s_spindle : "") + "\n" + s_common);
        string blockingDispatcher = onSpindle ? "blocking-dispatcher" : BuiltInBlockingDispatcher;
        int detectorsBefore = RecordingFailureDetector.All.Length;
        ActorSystem first = ActorSystem.Create("heartbeat", ActorSystemSetup.Create(BootstrapSetup.Create().WithConfig(config), new SpindleSetup()));
        ActorSystem second = ActorSystem.Create("heartbeat", ActorSystemSetup.Create(BootstrapSetup.Create().WithConfig(config), new SpindleSetup()));
        var stop = new CancellationTokenSource();
        try
        {
            Address seed = Cluster.Get(first).SelfAddress;
            using var joining = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            joining.CancelAfter(TimeSpan.FromSeconds(60));
            await Task.WhenAll(Cluster.Get(first).JoinAsync(seed, joining.Token), Cluster.Get(second).JoinAsync(seed, joining.Token));
            // Both nodes' detectors made (one per node, for the other) and each with a heartbeat, before the load.
            long formed = Environment.TickCount64;
            while (RecordingFailureDetector.All.Skip(detectorsBefore).Count(d => d.Beats > 0) < 2)
            {
                if (Environment.TickCount64 - formed > 60_000)
                {
                    throw new TimeoutException("The two nodes' failure detectors did not both get a heartbeat within 60 s of the cluster forming.");
                }
                await Task.Delay(50, cancellationToken);
            }

            var unreachable = new Counter();
            var roundTrips = new Counter();
            foreach (ActorSystem node in new[] { first, second })
            {
                IActorRef watcher = node.ActorOf(Props.Create(() => new UnreachableWatcher(unreachable)));
                Cluster.Get(node).Subscribe(watcher, ClusterEvent.SubscriptionInitialStateMode.InitialStateAsEvents, typeof(ClusterEvent.UnreachableMember));
            }
            RecordingFailureDetector[] detectors = [.. RecordingFailureDetector.All.Skip(detectorsBefore)];
            foreach (RecordingFailureDetector detector in detectors)
            {
                detector.Reset();
            }
            int beatsBefore = detectors.Sum(d => d.Beats);

            int messagesPerBlocker = (int)Math.Ceiling(load.TotalMilliseconds / BlockingActor.WaitMilliseconds);
            foreach (ActorSystem node in new[] { first, second })
            {
                for (int i = 0; i < blockingActors; i++)
                {
                    IActorRef blocker = node.ActorOf(Props.Create<BlockingActor>().WithDispatcher(blockingDispatcher));
                    for (int m = 0; m < messagesPerBlocker; m++)
                    {
                        blocker.Tell(m);
                    }
                }
                for (int i = 0; i < 2 * Environment.ProcessorCount; i++)
                {
                    IActorRef ponger = node.ActorOf(Props.Create<PongActor>());
                    IActorRef pinger = node.ActorOf(Props.Create(() => new PingActor(ponger, roundTrips, stop.Token)));
                    pinger.Tell("start");
                }
            }
            await Task.Delay(load, cancellationToken);
            stop.Cancel();

            TimeSpan maxGap = detectors.Length == 0 ? TimeSpan.Zero : detectors.Max(d => d.MaxGap);
            return new HeartbeatReport(onSpindle ? "Spindle" : "default dispatcher", unreachable.Value, maxGap,
                detectors.Sum(d => d.Beats) - beatsBefore, AcceptablePause, roundTrips.Value);
        }
        finally
        {
            stop.Cancel();
            stop.Dispose();
            await Task.WhenAll(second.Terminate(), first.Terminate()).WaitAsync(TimeSpan.FromSeconds(60), CancellationToken.None);
        }
    }

    private sealed class Counter
    {
        private long _value;

        public int Value => (int)Interlocked.Read(ref _value);

        public void Increment() => Interlocked.Increment(ref _value);
    }

    private sealed class UnreachableWatcher : ReceiveActor
    {
        public UnreachableWatcher(Counter unreachable) => Receive<ClusterEvent.UnreachableMember>(_ => unreachable.Increment());
    }

    private sealed class BlockingActor : ReceiveActor
    {
        public const int WaitMilliseconds = 100;

        public BlockingActor() => Receive<int>(_ => Thread.Sleep(WaitMilliseconds));
    }

    private sealed class PongActor : ReceiveActor
    {
        public PongActor() => Receive<string>(_ => Sender.Tell("pong"));
    }

    private sealed class PingActor : ReceiveActor
    {
        public PingActor(IActorRef ponger, Counter roundTrips, CancellationToken stop)
        {
            Receive<string>(message =>
            {
                if (message == "pong")
                {
                    roundTrips.Increment();
                }
                if (!stop.IsCancellationRequested)
                {
                    ponger.Tell("ping");
                }
            });
        }
    }
}
