using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Akka.Actor;
using Akka.Actor.Setup;
using Akka.Configuration;
using Proto;
using ActorSystem = Akka.Actor.ActorSystem;
using Props = Akka.Actor.Props;
using Spindle.Akka;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;
using Spindle.ProtoActor;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Actor systems on their dispatchers: 2 x cores pairs of actors ping-ponging one message each (the classic ping-pong
/// benchmark), for 500 ms (3 s with --full) after a second of warm-up rounds on the same actors. On Spindle the actors'
/// dispatcher runs on the run's pool: Akka.NET's default dispatcher with <c>SpindleExecutorServiceConfigurator</c> (the
/// pool handed in by <c>SpindleSetup</c>, Akka.NET's default throughput of 30), Proto.Actor's actors with a
/// <c>WorkerPoolDispatcher</c> (Proto.Actor's default throughput of 300) and a <c>WorkerPoolMailbox</c> (Proto.Actor's own
/// mailbox allocates a delegate per schedule on any dispatcher but its default one). On the built-in side each system keeps its own
/// default dispatcher on the built-in pool, except in the <c>-fj</c> variant, where Akka.NET's actors run on its
/// fork-join dispatcher (a dedicated thread pool of one thread per core): there the second column is that dispatcher,
/// not the built-in pool. Variants: <c>akka-pingpong</c>, <c>akka-pingpong-fj</c>, <c>akka-work</c> (each message
/// also spins 2 us), <c>proto-pingpong</c>. Metrics: messages per second; bytes allocated per
/// message (the actor system's own allocation included, so the dispatcher's is the difference between the columns).
/// </summary>
internal sealed class ActorsScenario : IScenario
{
    private static readonly TimeSpan s_quick = TimeSpan.FromMilliseconds(500);
    private static readonly TimeSpan s_full = TimeSpan.FromSeconds(3);
    private static readonly TimeSpan s_warmup = TimeSpan.FromMilliseconds(150);
    private static readonly long s_workTicks = Pacer.TicksFromMicroseconds(2);

    public string Id => "actors";

    public string Description =>
        $"Akka.NET and Proto.Actor ping-pong (2 x cores pairs, 1 message each; akka-work: 2 us per message) for {s_quick.TotalMilliseconds:N0} ms "
        + $"({s_full.TotalSeconds:N0} s with --full): Spindle's dispatchers against the default ones (-fj: Akka.NET's fork-join dispatcher)";

    public IReadOnlyList<string> Variants { get; } = ["akka-pingpong", "akka-pingpong-fj", "akka-work", "proto-pingpong"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "msgs/s", Better.Higher),
        new("alloc", "B/msg", Better.Lower, NoiseFloor: 0.5),
    ];

    public string HeadlineMetric => "throughput";

    // Each run starts an actor system (about a second per process): two runs keep the quick comparison in its budget.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        TimeSpan duration = full ? s_full : s_quick;
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        return variant switch
        {
            "akka-pingpong" => RunAkka(pool, forkJoin: false, work: false, duration),
            "akka-pingpong-fj" => RunAkka(pool, forkJoin: true, work: false, duration),
            "akka-work" => RunAkka(pool, forkJoin: false, work: true, duration),
            "proto-pingpong" => RunProto(pool, duration),
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
    }

    private static int Pairs => 2 * Environment.ProcessorCount;

    // ---- Akka.NET ---------------------------------------------------------------------------------------------------

    private static Measurement RunAkka(IPoolUnderTest pool, bool forkJoin, bool work, TimeSpan duration)
    {
        string dispatcher = "akka.actor.default-dispatcher";
        string hocon = "akka.loglevel = WARNING\nakka.stdout-loglevel = WARNING\n";
        var setup = new SpindleSetup();
        if (pool.SpindleTarget is WorkerPool spindle)
        {
            hocon += "akka.actor.default-dispatcher { executor = \"Spindle.Akka.SpindleExecutorServiceConfigurator, Spindle.Akka\", spindle.pool = bench }\n";
            setup = setup.WithTarget("bench", spindle);
        }
        else if (forkJoin)
        {
            int cores = Environment.ProcessorCount;
            hocon += $"fj-dispatcher {{ type = Dispatcher, executor = fork-join-executor, throughput = 30, "
                + $"fork-join-executor {{ parallelism-min = {cores}, parallelism-factor = 1.0, parallelism-max = {cores} }} }}\n";
            dispatcher = "fj-dispatcher";
        }
        Config config = ConfigurationFactory.ParseString(hocon);
        using ActorSystem system = ActorSystem.Create("actors", ActorSystemSetup.Create(BootstrapSetup.Create().WithConfig(config), setup));
        try
        {
            return AkkaPairs(system, dispatcher, work, duration);
        }
        finally
        {
            system.Terminate().Wait(TimeSpan.FromSeconds(30));
        }
    }

    private static Measurement AkkaPairs(ActorSystem system, string dispatcher, bool work, TimeSpan duration)
    {
        var run = new PairRun(Pairs);
        var actors = new IActorRef[2 * Pairs];
        for (int i = 0; i < actors.Length; i++)
        {
            int pair = i / 2;
            actors[i] = system.ActorOf(Props.Create(() => new AkkaPingPong(run, pair, work)).WithDispatcher(dispatcher));
        }
        for (int p = 0; p < Pairs; p++)
        {
            actors[2 * p].Tell(actors[2 * p + 1]);
            actors[2 * p + 1].Tell(actors[2 * p]);
        }
        // The partners are set before the first message: an actor handles its mailbox in order.
        Measurement measured = run.WarmUpAndMeasure(duration, () =>
        {
            for (int p = 0; p < Pairs; p++)
            {
                actors[2 * p].Tell(PairRun.Ball);
            }
        });
        foreach (IActorRef actor in actors)
        {
            system.Stop(actor);
        }
        return measured;
    }

    /// <summary>One side of a pair: passes the ball back to its partner until the run stops.</summary>
    private sealed class AkkaPingPong : UntypedActor
    {
        private readonly PairRun _run;
        private readonly int _pair;
        private readonly bool _work;
        private IActorRef? _partner;

        public AkkaPingPong(PairRun run, int pair, bool work)
        {
            _run = run;
            _pair = pair;
            _work = work;
        }

        protected override void OnReceive(object message)
        {
            if (message is IActorRef partner)
            {
                _partner = partner;
                return;
            }
            if (_run.Handle(_pair, _work))
            {
                _partner!.Tell(message, Self);
            }
        }
    }

    // ---- Proto.Actor ------------------------------------------------------------------------------------------------

    private static Measurement RunProto(IPoolUnderTest pool, TimeSpan duration)
    {
        WorkerPoolDispatcher? dispatcher = pool.SpindleTarget is WorkerPool spindle ? new WorkerPoolDispatcher(spindle) : null;
        var system = new global::Proto.ActorSystem();
        try
        {
            return ProtoPairs(system, dispatcher, duration);
        }
        finally
        {
            system.DisposeAsync().AsTask().Wait(TimeSpan.FromSeconds(30));
        }
    }

    private static Measurement ProtoPairs(global::Proto.ActorSystem system, WorkerPoolDispatcher? dispatcher, TimeSpan duration)
    {
        var run = new PairRun(Pairs);
        var actors = new global::Proto.PID[2 * Pairs];
        for (int i = 0; i < actors.Length; i++)
        {
            int pair = i / 2;
            global::Proto.Props props = global::Proto.Props.FromProducer(() => new ProtoPingPong(run, pair));
            if (dispatcher is not null)
            {
                props = props.WithWorkerPool(dispatcher);
            }
            actors[i] = system.Root.Spawn(props);
        }
        for (int p = 0; p < Pairs; p++)
        {
            system.Root.Send(actors[2 * p], actors[2 * p + 1]);
            system.Root.Send(actors[2 * p + 1], actors[2 * p]);
        }
        Measurement measured = run.WarmUpAndMeasure(duration, () =>
        {
            for (int p = 0; p < Pairs; p++)
            {
                system.Root.Send(actors[2 * p], PairRun.Ball);
            }
        });
        foreach (global::Proto.PID actor in actors)
        {
            system.Root.Stop(actor);
        }
        return measured;
    }

    private sealed class ProtoPingPong(PairRun run, int pair) : global::Proto.IActor
    {
        private global::Proto.PID? _partner;

        public Task ReceiveAsync(global::Proto.IContext context)
        {
            object? message = context.Message;
            if (message is global::Proto.PID partner)
            {
                _partner = partner;
            }
            else if (ReferenceEquals(message, PairRun.Ball) && run.Handle(pair, work: false))
            {
                context.Send(_partner!, message);
            }
            return Task.CompletedTask;
        }
    }

    // ---- Shared --------------------------------------------------------------------------------------------------------

    /// <summary>
    /// Rounds of ping-pong on one set of pairs: a round serves one ball per pair, counts handled messages, and after the
    /// stop flag retires each pair's ball once it arrives (the round ends when every ball is retired). The warm-up is
    /// rounds on the same actors, so the measured round runs code the warm-up has already compiled and tiered up.
    /// </summary>
    /// <remarks>
    /// <para>Each pair counts on a cache line of its own, with plain increments: a pair has one ball, so its two actors
    /// never handle a message at the same time, and each pass is ordered after the one before by the message's
    /// hand-over. A single counter shared by every pair cost a cache-line transfer between cores on most messages (about
    /// 250 ns each way on the 2-core VM), as much as a whole ping-pong message, on both pools alike.</para>
    /// <para>Warming up on new actors per round (as this scenario first did) kept the JIT busy: each actor system
    /// compiles code per new actor, and the runtime waits for a quiet spell in compilation before it promotes hot
    /// methods to optimised code, so a measured round could run most of the actor system's code unoptimised. Single runs
    /// then spread over 1-14M messages/s on either pool.</para>
    /// </remarks>
    private sealed class PairRun(int pairs)
    {
        public static readonly object Ball = new();

        // Longs per pair: 128 bytes, so that no two pairs' counts share a cache line (or an adjacent-line prefetch).
        private const int Stride = 16;

        private readonly ManualResetEventSlim _done = new(false);
        private readonly long[] _handled = new long[(pairs + 1) * Stride];
        private readonly int _pairs = pairs;
        private bool _stopping;
        private int _live;

        /// <summary>An actor of <paramref name="pair"/> got the ball: counts it and says whether to pass it on.</summary>
        public bool Handle(int pair, bool work)
        {
            _handled[(pair + 1) * Stride]++;
            if (work)
            {
                long until = Stopwatch.GetTimestamp() + s_workTicks;
                while (Stopwatch.GetTimestamp() < until)
                {
                }
            }
            if (!Volatile.Read(ref _stopping))
            {
                return true;
            }
            if (Interlocked.Decrement(ref _live) == 0)
            {
                _done.Set();
            }
            return false;
        }

        /// <summary>Warm-up rounds for a second, then the measured round.</summary>
        public Measurement WarmUpAndMeasure(TimeSpan duration, Action serve)
        {
            Warmup.Repeat(() => Round(s_warmup, serve), TimeSpan.FromSeconds(1));
            GcSnapshot.CollectFully();
            GcSnapshot before = GcSnapshot.Take();
            (long handled, double seconds) = Round(duration, serve);
            GcSnapshot used = GcSnapshot.Take() - before;
            return new Measurement { Items = handled }
                .Set("throughput", handled / seconds)
                .Set("alloc", (double)used.AllocatedBytes / Math.Max(1, handled));
        }

        private (long Handled, double Seconds) Round(TimeSpan duration, Action serve)
        {
            // Between rounds no ball is in play, so nothing reads or writes these fields now; the start's sends publish
            // them to the actors.
            Array.Clear(_handled);
            _done.Reset();
            Volatile.Write(ref _live, _pairs);
            Volatile.Write(ref _stopping, false);
            long begin = Stopwatch.GetTimestamp();
            serve();
            Thread.Sleep(duration);
            Volatile.Write(ref _stopping, true);
            Waits.OrThrow(_done, "every pair's ball to come back after the stop");
            long end = Stopwatch.GetTimestamp();
            // Every ball has been retired (the done event orders each pair's last pass before these reads).
            long handled = 0;
            for (int pair = 1; pair <= _pairs; pair++)
            {
                handled += _handled[pair * Stride];
            }
            return (handled, (end - begin) / (double)Stopwatch.Frequency);
        }
    }
}
