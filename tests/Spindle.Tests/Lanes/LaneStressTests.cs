using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests.Lanes;

/// <summary>
/// Lanes under racing producers, blocking items, bounded queues and shutdowns of every form: each accepted item runs
/// exactly once or is counted cancelled, each refused one is reported to its caller, and no lane ever runs more than
/// its cap. The stress form (<c>SPINDLE_STRESS=1</c>) runs more rounds with more items.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)] // its stress form keeps every core busy for minutes
public sealed class LaneStressTests
{
    private sealed class LaneUnderTest(WorkerPoolLane lane)
    {
        public readonly WorkerPoolLane Lane = lane;
        public int Running;
        public int MaxRunning;
        public int Accepted;
        public int Refused;
        public int Ran;
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void RacingProducersAndShutdowns_LoseNothing_AndCapsHold(int seed)
    {
        int rounds = Stress.Scale(3, 20);
        int perProducer = Stress.Scale(2_000, 20_000);
        for (int round = 0; round < rounds; round++)
        {
            RunRound(new Random(seed * 1_000 + round), perProducer);
        }
    }

    private static void RunRound(Random random, int perProducer)
    {
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(LaneStressTests),
            MinThreads = 2,
            MaxThreads = 8,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            LaneStarvationIntervalMs = random.Next(1, 20),
        });
        var lanes = new List<LaneUnderTest>();
        for (int i = 0; i < 5; i++)
        {
            int? cap = random.Next(3) switch { 0 => 1, 1 => random.Next(2, 4), _ => null };
            int? limit = random.Next(2) == 0 ? random.Next(1, 64) : null;
            lanes.Add(new LaneUnderTest(pool.CreateLane(new LaneOptions
            {
                Name = $"lane{i}",
                Priority = (LanePriority)random.Next(3),
                Share = random.Next(1, 5),
                MaxConcurrency = cap,
                QueueLimit = limit,
                FullMode = random.Next(2) == 0 ? LaneFullMode.Wait : LaneFullMode.Reject,
            })));
        }
        int producers = 3;
        var seeds = new int[producers];
        for (int p = 0; p < producers; p++)
        {
            seeds[p] = random.Next();
        }
        int shutdownLane = random.Next(lanes.Count);
        ShutdownMode laneMode = random.Next(2) == 0 ? ShutdownMode.Drain : ShutdownMode.CancelPending;
        ShutdownMode poolMode = random.Next(2) == 0 ? ShutdownMode.Drain : ShutdownMode.CancelPending;

        Task[] running = new Task[producers];
        for (int p = 0; p < producers; p++)
        {
            int producerSeed = seeds[p];
            running[p] = Task.Factory.StartNew(() => Produce(new Random(producerSeed), lanes, perProducer), TaskCreationOptions.LongRunning);
        }
        Thread.Sleep(random.Next(1, 30));
        int laneCancelled = lanes[shutdownLane].Lane.Shutdown(laneMode);
        Assert.True(Task.WaitAll(running, Waits.MustHappen), $"the producers finished; {Describe(pool, lanes, shutdownLane, laneMode)}");
        int poolCancelled = pool.Shutdown(poolMode);

        long cancelledByLanes = 0;
        foreach (LaneUnderTest lane in lanes)
        {
            int cap = lane.Lane.MaxConcurrency ?? int.MaxValue;
            Assert.True(lane.MaxRunning <= cap, $"{lane.Lane.Name}: {lane.MaxRunning} items ran at once, cap {cap}");
            long cancelled = lane.Lane.CancelledWorkItemCount;
            cancelledByLanes += cancelled;
            Assert.Equal(lane.Accepted, lane.Ran + cancelled);
            Assert.Equal(lane.Ran, lane.Lane.CompletedWorkItemCount);
            Assert.Equal(0, lane.Lane.PendingWorkItemCount);
            Assert.Equal(0, lane.Lane.RunningWorkItemCount);
            Assert.True(lane.Lane.IsShutdownStarted);
        }
        Assert.True(laneCancelled <= lanes[shutdownLane].Lane.CancelledWorkItemCount);
        // The pool counts what its own shutdown cancelled, lanes included; a lane counts what either shutdown cancelled.
        Assert.Equal(poolCancelled, pool.CancelledWorkItemCount);
        Assert.True(cancelledByLanes >= poolCancelled);
    }

    /// <summary>The state a stuck round leaves, for its failure message.</summary>
    private static string Describe(WorkerPool pool, List<LaneUnderTest> lanes, int shutdownLane, ShutdownMode laneMode)
    {
        var text = new System.Text.StringBuilder();
        text.Append(System.Globalization.CultureInfo.InvariantCulture, $"pool: {pool.ThreadCount} threads, target {pool.ThreadTarget}, {pool.PendingWorkItemCount} pending; ");
        text.Append(System.Globalization.CultureInfo.InvariantCulture, $"lane {shutdownLane} was shut down ({laneMode}); ");
        foreach (LaneUnderTest lane in lanes)
        {
            text.Append(System.Globalization.CultureInfo.InvariantCulture, $"{lane.Lane.Name} (cap {lane.Lane.MaxConcurrency?.ToString(System.Globalization.CultureInfo.InvariantCulture) ?? "none"}, ");
            text.Append(System.Globalization.CultureInfo.InvariantCulture, $"shut down {lane.Lane.IsShutdownStarted}): accepted {Volatile.Read(ref lane.Accepted)}, ran {Volatile.Read(ref lane.Ran)}, ");
            text.Append(System.Globalization.CultureInfo.InvariantCulture, $"pending {lane.Lane.PendingWorkItemCount}, running {lane.Lane.RunningWorkItemCount}, cancelled {lane.Lane.CancelledWorkItemCount}; ");
        }
        return text.ToString();
    }

    private static void Produce(Random random, List<LaneUnderTest> lanes, int count)
    {
        for (int i = 0; i < count; i++)
        {
            LaneUnderTest target = lanes[random.Next(lanes.Count)];
            bool blocks = random.Next(100) == 0;
            Action<LaneUnderTest> body = lane =>
            {
                int now = Interlocked.Increment(ref lane.Running);
                int max = Volatile.Read(ref lane.MaxRunning);
                while (now > max && Interlocked.CompareExchange(ref lane.MaxRunning, now, max) != max)
                {
                    max = Volatile.Read(ref lane.MaxRunning);
                }
                if (blocks)
                {
                    using (WorkerPool.EnterBlockingRegion())
                    {
                        Thread.Sleep(1);
                    }
                }
                Interlocked.Increment(ref lane.Ran);
                Interlocked.Decrement(ref lane.Running);
            };
            try
            {
                bool accepted;
                switch (random.Next(3))
                {
                    case 0:
                        accepted = target.Lane.TryQueueUserWorkItem(body, target, preferLocal: false);
                        break;
                    case 1:
                        target.Lane.QueueUserWorkItemAsync(body, target).AsTask().GetAwaiter().GetResult();
                        accepted = true;
                        break;
                    default:
                        target.Lane.QueueUserWorkItem(body, target, preferLocal: false);
                        accepted = true;
                        break;
                }
                Interlocked.Increment(ref accepted ? ref target.Accepted : ref target.Refused);
            }
            catch (WorkRejectedException)
            {
                Interlocked.Increment(ref target.Refused);
            }
            catch (ObjectDisposedException)
            {
                Interlocked.Increment(ref target.Refused);
            }
        }
    }
}
