using System;
using System.Linq;
using System.Threading.Tasks;
using Akka.Actor;
using Akka.Actor.Setup;
using Akka.Configuration;
using Akka.Event;
using Xunit;

namespace Spindle.Akka.Tests;

/// <summary>Akka.NET dispatchers on Spindle: where mailboxes run, pools shared and created, lanes, lifetimes, settings.</summary>
public sealed class SpindleDispatcherTests
{
    private static readonly TimeSpan s_mustHappen = TimeSpan.FromSeconds(30);

    private const string Executor = "\"Spindle.Akka.SpindleExecutorServiceConfigurator, Spindle.Akka\"";

    private static ActorSystem NewSystem(string hocon, SpindleSetup? setup = null)
    {
        Config config = ConfigurationFactory.ParseString(hocon + "\nakka.loglevel = WARNING\nakka.stdout-loglevel = WARNING");
        BootstrapSetup bootstrap = BootstrapSetup.Create().WithConfig(config);
        ActorSystemSetup all = setup is null ? ActorSystemSetup.Create(bootstrap) : ActorSystemSetup.Create(bootstrap, setup);
        return ActorSystem.Create("spindle-" + Guid.NewGuid().ToString("N")[..8], all);
    }

    private static async Task<Where> AskWhere(ActorSystem system, string dispatcher)
    {
        IActorRef actor = system.ActorOf(Props.Create<WhereActor>().WithDispatcher(dispatcher));
        return await actor.Ask<Where>("where", s_mustHappen);
    }

    [Fact]
    public async Task DefaultDispatcher_RunsMailboxesOnAPoolTheSystemCreates_AndShutsItDownWhenTheSystemTerminates()
    {
        ActorSystem system = NewSystem($"akka.actor.default-dispatcher.executor = {Executor}");
        Where where = await AskWhere(system, "akka.actor.default-dispatcher");
        Assert.NotNull(where.Pool);
        Assert.Equal($"{system.Name}/akka", where.Pool!.Name);
        Assert.Null(where.Lane);
        Assert.False(where.Pool.IsShutdownStarted);
        await system.Terminate().WaitAsync(s_mustHappen);
        Assert.True(SpinUntil(() => where.Pool.IsShutdownStarted), "the created pool was not shut down after the system terminated");
    }

    [Fact]
    public async Task APoolTheApplicationSupplies_RunsTheDispatcher_AndOutlivesTheSystem()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "app-pool", MinThreads = 2, MaxThreads = 4 });
        ActorSystem system = NewSystem($$"""
            app-dispatcher {
              type = Dispatcher
              executor = {{Executor}}
              spindle.pool = app
            }
            """, new SpindleSetup().WithTarget("app", pool));
        Where where = await AskWhere(system, "app-dispatcher");
        Assert.Same(pool, where.Pool);
        await system.Terminate().WaitAsync(s_mustHappen);
        Assert.False(pool.IsShutdownStarted);
        Assert.Equal(42, await pool.Run(() => 42).WaitAsync(s_mustHappen));
    }

    [Fact]
    public async Task DispatchersNamingOnePool_ShareIt_AndPingPongCompletes()
    {
        ActorSystem system = NewSystem($$"""
            first { type = Dispatcher, executor = {{Executor}}, throughput = 30, spindle { pool = shared, max-threads = 8 } }
            second { type = Dispatcher, executor = {{Executor}}, throughput = 5, spindle { pool = shared } }
            """);
        try
        {
            Where first = await AskWhere(system, "first");
            Where second = await AskWhere(system, "second");
            Assert.NotNull(first.Pool);
            Assert.Same(first.Pool, second.Pool);
            Assert.Equal(8, first.Pool!.MaxThreads);

            IActorRef ponger = system.ActorOf(Props.Create<PongActor>().WithDispatcher("second"));
            IActorRef pinger = system.ActorOf(Props.Create(() => new PingActor(ponger)).WithDispatcher("first"));
            Assert.Equal("finished", await pinger.Ask<string>(10_000, s_mustHappen));
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Fact]
    public async Task ALaneSection_RunsTheDispatcherInItsOwnLane_WithTheLanesCap()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "lanes", MinThreads = 4, MaxThreads = 8 });
        ActorSystem system = NewSystem($$"""
            capped {
              type = Dispatcher
              executor = {{Executor}}
              spindle { pool = app, lane { priority = high, share = 3, max-concurrency = 1 } }
            }
            """, new SpindleSetup().WithTarget("app", pool));
        Where where = await AskWhere(system, "capped");
        try
        {
            Assert.Same(pool, where.Pool);
            Assert.NotNull(where.Lane);
            Assert.Equal("capped", where.Lane!.Name);
            Assert.Equal(LanePriority.High, where.Lane.Priority);
            Assert.Equal(3, where.Lane.Share);
            Assert.Equal(1, where.Lane.MaxConcurrency);

            // Eight actors on a capped lane of a four-thread pool: their messages never overlap.
            var probe = new OverlapProbe();
            IActorRef[] actors = [.. Enumerable.Range(0, 8).Select(_ => system.ActorOf(Props.Create(() => new OverlapActor(probe)).WithDispatcher("capped")))];
            Task[] replies = [.. Enumerable.Range(0, 80).Select(i => actors[i % actors.Length].Ask<string>("go", s_mustHappen))];
            await Task.WhenAll(replies);
            Assert.Equal(1, probe.Max);
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
        WorkerPoolLane lane = where.Lane;
        Assert.True(SpinUntil(() => lane.IsShutdownStarted), "the dispatcher's lane was not shut down after the system terminated");
        Assert.False(pool.IsShutdownStarted);
    }

    [Fact]
    public async Task AMailboxScheduledAfterItsPoolShutDown_RunsOnTheBuiltInPool_WithAWarning()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = "early", MinThreads = 1, MaxThreads = 2 });
        ActorSystem system = NewSystem($$"""
            early-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle.pool = early }
            """, new SpindleSetup().WithTarget("early", pool));
        try
        {
            var warnings = new System.Collections.Concurrent.ConcurrentQueue<string>();
            IActorRef listener = system.ActorOf(Props.Create(() => new WarningCollector(warnings)));
            system.EventStream.Subscribe(listener, typeof(Warning));
            IActorRef actor = system.ActorOf(Props.Create<WhereActor>().WithDispatcher("early-dispatcher"));
            Assert.Same(pool, (await actor.Ask<Where>("where", s_mustHappen)).Pool);

            pool.Dispose(); // the application's mistake: the pool goes before the actor system
            Where after = await actor.Ask<Where>("where", s_mustHappen);
            Assert.Null(after.Pool);
            Assert.True(SpinUntil(() => warnings.Any(w => w.Contains("early", StringComparison.Ordinal))), "no warning on the event stream");
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Fact]
    public async Task AMailboxThatUsedItsThroughput_GoesBehindTheWaitingMailboxes()
    {
        // One worker, throughput 3, two flooded actors: each run takes 3 messages, and the mailbox that still has some
        // queues itself behind the other one, so the runs alternate (a reschedule to the worker's own queue, newest
        // first, would run the same mailbox again at once).
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "turns", MinThreads = 1, MaxThreads = 1 });
        ActorSystem system = NewSystem($$"""
            turns { type = Dispatcher, executor = {{Executor}}, throughput = 3, spindle.pool = turns }
            """, new SpindleSetup().WithTarget("turns", pool));
        try
        {
            var log = new System.Collections.Concurrent.ConcurrentQueue<char>();
            IActorRef a = system.ActorOf(Props.Create(() => new LoggingActor('A', log, 12)).WithDispatcher("turns"));
            IActorRef b = system.ActorOf(Props.Create(() => new LoggingActor('B', log, 12)).WithDispatcher("turns"));
            await AskWhere(system, "turns"); // both actors started
            using System.Threading.ManualResetEventSlim gate = HoldTheOnlyWorker(pool);
            for (int i = 0; i < 11; i++)
            {
                a.Tell(i, ActorRefs.NoSender);
                b.Tell(i, ActorRefs.NoSender);
            }
            Task<string> aDone = a.Ask<string>(11, s_mustHappen); // the last message: its sender gets the answer
            Task<string> bDone = b.Ask<string>(11, s_mustHappen);
            gate.Set();
            await Task.WhenAll(aDone, bDone);
            // The mailboxes' messages interleave: a reschedule to the worker's own queue (newest first) would run all of
            // A before any of B. The exact turns are not asserted: a worker's periodic look at the shared queue may take
            // the rescheduled mailbox ahead of the other one it had already taken into its own queue, once in a while.
            string order = new([.. log]);
            Assert.True(order.IndexOf('B', StringComparison.Ordinal) < order.LastIndexOf('A')
                && order.Split('A', StringSplitOptions.RemoveEmptyEntries).Length >= 2, $"the mailboxes did not take turns: {order}");
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Theory]
    [InlineData("spindle.lane.priority = urgent", "spindle.lane.priority")]
    [InlineData("spindle.lane.share = 0", "spindle.lane.share")]
    [InlineData("spindle.lane.max-concurrency = -1", "spindle.lane.max-concurrency")]
    [InlineData("spindle { min-threads = 8, max-threads = 4 }", "spindle.min-threads")]
    [InlineData("spindle.max-threads = lots", "spindle.max-threads")]
    [InlineData("spindle = 5", "spindle")]
    [InlineData("spindle.lane = fast", "spindle.lane")]
    public async Task BadSettings_AreRefusedWithTheSettingNamed(string setting, string named)
    {
        ActorSystem system = NewSystem($$"""
            bad { type = Dispatcher, executor = {{Executor}}, {{setting}} }
            """);
        try
        {
            Exception error = Assert.ThrowsAny<Exception>(() => system.Dispatchers.Lookup("bad"));
            Assert.Contains(named, Flatten(error), StringComparison.Ordinal);
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Fact]
    public async Task DispatchersGivingASharedPoolDifferentLimits_AreRefusedWhenLookedUp()
    {
        ActorSystem system = NewSystem($$"""
            one { type = Dispatcher, executor = {{Executor}}, spindle { pool = p, max-threads = 4 } }
            two { type = Dispatcher, executor = {{Executor}}, spindle { pool = p, max-threads = 6 } }
            three { type = Dispatcher, executor = {{Executor}}, spindle { pool = p } }
            """);
        try
        {
            Where one = await AskWhere(system, "one");
            Exception error = Assert.ThrowsAny<Exception>(() => system.Dispatchers.Lookup("two"));
            Assert.Contains("must agree on its limits", Flatten(error), StringComparison.Ordinal);
            Where three = await AskWhere(system, "three"); // no limits of its own: shares the pool as it is
            Assert.Same(one.Pool, three.Pool);
            Assert.Equal(4, three.Pool!.MaxThreads);
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Fact]
    public async Task TheDefaultDispatchersSpindleSection_IsNotInheritedByOtherDispatchers()
    {
        using var blocking = new WorkerPool(new WorkerPoolOptions { Name = "blocking", MinThreads = 1, MaxThreads = 8 });
        ActorSystem system = NewSystem($$"""
            akka.actor.default-dispatcher {
              executor = {{Executor}}
              spindle { pool = actors, max-threads = 16, lane.priority = normal }
            }
            blocking-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle.pool = blocking }
            plain-dispatcher { type = Dispatcher, executor = {{Executor}} }
            """, new SpindleSetup().WithTarget("blocking", blocking));
        try
        {
            Where actors = await AskWhere(system, "akka.actor.default-dispatcher");
            Assert.Equal($"{system.Name}/actors", actors.Pool!.Name);
            Assert.Equal(16, actors.Pool.MaxThreads);
            Assert.Equal(LanePriority.Normal, actors.Lane!.Priority);

            Where onBlocking = await AskWhere(system, "blocking-dispatcher");
            Assert.Same(blocking, onBlocking.Pool);
            Assert.Null(onBlocking.Lane);

            Where plain = await AskWhere(system, "plain-dispatcher");
            Assert.Equal($"{system.Name}/akka", plain.Pool!.Name);
            Assert.Null(plain.Lane);
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Fact]
    public async Task ACancellingShutdownOfTheApplicationsPool_StrandsNoMailbox()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = "cancelled", MinThreads = 1, MaxThreads = 1 });
        ActorSystem system = NewSystem($$"""
            cancelled-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle.pool = cancelled }
            """, new SpindleSetup().WithTarget("cancelled", pool));
        try
        {
            IActorRef actor = system.ActorOf(Props.Create<WhereActor>().WithDispatcher("cancelled-dispatcher"));
            Assert.Same(pool, (await actor.Ask<Where>("where", s_mustHappen)).Pool);

            // The pool's only worker is held while the actor's mailbox is queued behind it; then the pool is shut down
            // cancelling what has not started. The mailbox holds a message: it must still run.
            using System.Threading.ManualResetEventSlim gate = HoldTheOnlyWorker(pool);
            Task<Where> reply = actor.Ask<Where>("where", s_mustHappen);
            Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.CancelPending);
            gate.Set();
            await shutdown.WaitAsync(s_mustHappen);
            await reply.WaitAsync(s_mustHappen);
            Assert.Null((await actor.Ask<Where>("where", s_mustHappen)).Pool); // after the stop: the built-in pool
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
            pool.Dispose();
        }
    }

    [Fact]
    public async Task ATargetThatCannotBeHad_FallsBackToTheBuiltInPool_WithAnError()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = "gone", MinThreads = 1, MaxThreads = 1 });
        ActorSystem system = NewSystem($$"""
            gone-dispatcher { type = Dispatcher, executor = {{Executor}}, spindle { pool = gone, lane.priority = high } }
            """, new SpindleSetup().WithTarget("gone", pool));
        try
        {
            var errors = new System.Collections.Concurrent.ConcurrentQueue<string>();
            IActorRef listener = system.ActorOf(Props.Create(() => new ErrorCollector(errors)));
            system.EventStream.Subscribe(listener, typeof(Error));
            pool.Dispose(); // before the dispatcher's first mailbox: its lane cannot be made any more
            IActorRef actor = system.ActorOf(Props.Create<WhereActor>().WithDispatcher("gone-dispatcher"));
            Where where = await actor.Ask<Where>("where", s_mustHappen);
            Assert.Null(where.Pool);
            Assert.True(SpinUntil(() => errors.Any(e => e.Contains("gone-dispatcher", StringComparison.Ordinal))), "no error on the event stream");
        }
        finally
        {
            await system.Terminate().WaitAsync(s_mustHappen);
        }
    }

    [Fact]
    public void Setup_RejectsBadTargets()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "setup", MinThreads = 1, MaxThreads = 1 });
        using WorkerPoolLane bounded = pool.CreateLane(new LaneOptions { Name = "bounded", QueueLimit = 10 });
        var setup = new SpindleSetup().WithTarget("a", pool);
        Assert.Throws<ArgumentException>(() => setup.WithTarget("a", pool));
        Assert.Throws<ArgumentException>(() => setup.WithTarget(" ", pool));
        Assert.Throws<ArgumentNullException>(() => setup.WithTarget("b", null!));
        Assert.Contains("queue limit", Assert.Throws<ArgumentException>(() => setup.WithTarget("b", bounded)).Message, StringComparison.Ordinal);
        Assert.Single(setup.Targets);
    }

    /// <summary>Occupies the one worker of <paramref name="pool"/> until the returned gate is set.</summary>
    private static System.Threading.ManualResetEventSlim HoldTheOnlyWorker(WorkerPool pool)
    {
        var gate = new System.Threading.ManualResetEventSlim();
        // Not disposed here: the holding item may still be inside Set when the wait below returns.
        var held = new System.Threading.ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            held.Set();
            gate.Wait(s_mustHappen);
        });
        Assert.True(held.Wait(s_mustHappen), "the pool's worker did not start the holding item");
        return gate;
    }

    private static string Flatten(Exception error)
    {
        string all = "";
        for (Exception? e = error; e is not null; e = e.InnerException)
        {
            all += e.Message + "\n";
        }
        return all;
    }

    private static bool SpinUntil(Func<bool> condition) => System.Threading.SpinWait.SpinUntil(condition, s_mustHappen);

    private sealed class ErrorCollector : ReceiveActor
    {
        public ErrorCollector(System.Collections.Concurrent.ConcurrentQueue<string> errors) =>
            Receive<Error>(e => errors.Enqueue(e.Message?.ToString() ?? ""));
    }

    private sealed class WarningCollector : ReceiveActor
    {
        public WarningCollector(System.Collections.Concurrent.ConcurrentQueue<string> warnings) =>
            Receive<Warning>(w => warnings.Enqueue(w.Message?.ToString() ?? ""));
    }
}
