using System;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Spindle.Polling;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// Who collects socket readiness: while every worker is busy, the I/O driver's poller sleeps between polls and the
/// workers collect events when their own queues run dry; a worker that parks hands the job back to the poller, which
/// then delivers at once. The poll period is stretched far beyond the tests' bounds, so every delivery below is made
/// by the party the protocol names, never by a late poll; and a single event is let to hand readiness to busy workers
/// (by default a wake-up must bring several), so that one connection can drive the switch.
/// </summary>
public sealed class PoolSocketHarvestTests
{
    private const int PollPeriodBeyondTheTestMs = 600_000;

    [Fact]
    public async Task WhileTheOnlyWorkerIsBusy_ReadinessWaitsForIt_AndItCollectsTheEventOnceItsItemEnds()
    {
        if (!EpollDriver.IsSupported)
        {
            return; // elsewhere sockets complete through the runtime's engine
        }
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketHarvestTests), MinThreads = 1, MaxThreads = 1 });
        (PoolSocket triggerClient, PoolSocket triggerServer) = await SocketPairs.ConnectAsync(pool);
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (triggerClient)
        using (triggerServer)
        using (client)
        using (server)
        {
            EpollDriver driver = pool.Io.Driver()!;
            driver.PollPeriodMs = PollPeriodBeyondTheTestMs;
            driver.EventsToLeaveToWorkers = 1; // one trigger event at a time suffices
            var buffer = new byte[1];
            Task<int> receiving = server.ReceiveAsync(buffer).AsTask();
            using var busy = new BusyItem(pool);
            MakeThePollerLeaveReadinessToTheWorkers(driver, triggerClient);

            client.Socket.Send([42]);
            Assert.False(receiving.Wait(Waits.MustNotHappen), "the receive completed while the only worker was busy and the poller slept");
            busy.Release();

            Assert.True(receiving.Wait(Waits.MustHappen), "the worker did not collect the readiness after its item");
            Assert.Equal(1, receiving.Result);
            Assert.Equal(42, buffer[0]);
            Assert.True(driver.HarvestedByWorkers > 0, "the event was not delivered by a worker's harvest");
        }
    }

    [Fact]
    public async Task AWorkerThatParks_HandsReadinessBackToThePoller_WhichDeliversAtOnce()
    {
        if (!EpollDriver.IsSupported)
        {
            return;
        }
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketHarvestTests), MinThreads = 1, MaxThreads = 1 });
        (PoolSocket triggerClient, PoolSocket triggerServer) = await SocketPairs.ConnectAsync(pool);
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (triggerClient)
        using (triggerServer)
        using (client)
        using (server)
        {
            EpollDriver driver = pool.Io.Driver()!;
            driver.PollPeriodMs = PollPeriodBeyondTheTestMs;
            driver.EventsToLeaveToWorkers = 1; // one trigger event at a time suffices
            using (var busy = new BusyItem(pool))
            {
                MakeThePollerLeaveReadinessToTheWorkers(driver, triggerClient);
                busy.Release();
            }

            Assert.True(Waits.Poll(() => !driver.WorkersHarvest, Waits.MustHappen), "the parked worker did not hand readiness back to the poller");
            var buffer = new byte[1];
            Task<int> receiving = server.ReceiveAsync(buffer).AsTask();
            client.Socket.Send([7]);
            Assert.True(receiving.Wait(Waits.MustHappen), "the poller did not deliver the event to the parked pool");
            Assert.Equal(7, buffer[0]);
        }
    }

    [Fact]
    public async Task ThePoolStops_WhileThePollerSleepsBetweenPolls_AndThePollerClosesItsDescriptors()
    {
        if (!EpollDriver.IsSupported)
        {
            return;
        }
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketHarvestTests), MinThreads = 1, MaxThreads = 1 });
        (PoolSocket triggerClient, PoolSocket triggerServer) = await SocketPairs.ConnectAsync(pool);
        using (triggerClient)
        using (triggerServer)
        {
            EpollDriver driver = pool.Io.Driver()!;
            driver.PollPeriodMs = PollPeriodBeyondTheTestMs;
            driver.EventsToLeaveToWorkers = 1; // one trigger event at a time suffices
            var busy = new BusyItem(pool);
            MakeThePollerLeaveReadinessToTheWorkers(driver, triggerClient);

            // Shutdown drains the busy item; its worker then exits without parking, so only the stop can end the sleep.
            Task disposing = Task.Run(pool.Dispose);
            busy.Release();
            Assert.True(disposing.Wait(Waits.MustHappen), "the pool did not shut down");
            Assert.True(Waits.Poll(() => driver.IsClosed, Waits.MustHappen), "the sleeping poller did not see the stop");
            busy.Dispose();
        }
    }

    [Fact]
    public async Task WhileEveryWorkerRunsLongItems_ThePollerKeepsDeliveringAtOnce()
    {
        if (!EpollDriver.IsSupported)
        {
            return;
        }
        // A thread to spare, so that the relief thread may run outside work while the only worker is in long items.
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketHarvestTests), MinThreads = 1, MaxThreads = 2 });
        (PoolSocket triggerClient, PoolSocket triggerServer) = await SocketPairs.ConnectAsync(pool);
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (triggerClient)
        using (triggerServer)
        using (client)
        using (server)
        {
            EpollDriver driver = pool.Io.Driver()!;
            driver.PollPeriodMs = PollPeriodBeyondTheTestMs;
            driver.EventsToLeaveToWorkers = 1; // one trigger event at a time suffices
            var chain = new LongItemChain(pool);
            try
            {
                Assert.True(Waits.Poll(() => pool.SchedulerCore.Relief.LongItemWorkerCount >= pool.ThreadCount, Waits.MustHappen),
                    "the worker was not counted as running long items");
                triggerClient.Socket.Send([1]); // wakes the poller, which looks at the workers again
                var buffer = new byte[1];
                Task<int> receiving = server.ReceiveAsync(buffer).AsTask();
                client.Socket.Send([9]);
                Assert.True(receiving.Wait(Waits.MustHappen), "the event did not reach the pool while its worker ran long items");
                Assert.Equal(9, buffer[0]);
                Assert.False(driver.WorkersHarvest, "the poller left readiness to a worker that runs long items");
            }
            finally
            {
                chain.Stop();
            }
        }
    }

    /// <summary>
    /// With the pool's only worker busy, events on another connection wake the poller, which looks at the workers after
    /// each: once it has found them all busy at enough looks in a row, it leaves readiness to them.
    /// </summary>
    private static void MakeThePollerLeaveReadinessToTheWorkers(EpollDriver driver, PoolSocket trigger)
    {
        long deadline = Environment.TickCount64 + Waits.MustHappenMilliseconds;
        while (!driver.WorkersHarvest && Environment.TickCount64 < deadline)
        {
            trigger.Socket.Send([1]); // one event, one look
            Waits.Poll(() => driver.WorkersHarvest, TimeSpan.FromMilliseconds(5));
        }
        Assert.True(driver.WorkersHarvest, "the poller did not leave readiness to the busy worker");
    }

    /// <summary>Items of 1 ms each, each queued to its worker's own queue by the one before, until stopped.</summary>
    private sealed class LongItemChain : IWorkItem
    {
        private readonly WorkerPool _pool;
        private int _stopped;

        public LongItemChain(WorkerPool pool)
        {
            _pool = pool;
            pool.UnsafeQueueUserWorkItem(this, preferLocal: false);
        }

        public void Stop() => Volatile.Write(ref _stopped, 1);

        public void Execute()
        {
            long end = System.Diagnostics.Stopwatch.GetTimestamp() + System.Diagnostics.Stopwatch.Frequency / 1_000;
            while (System.Diagnostics.Stopwatch.GetTimestamp() < end)
            {
                Thread.SpinWait(64);
            }
            if (Volatile.Read(ref _stopped) == 0)
            {
                _pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
            }
        }
    }

    /// <summary>An item that keeps the pool's only worker busy (spinning, not waiting) until released.</summary>
    private sealed class BusyItem : IDisposable
    {
        private readonly ManualResetEventSlim _started = new();
        private int _released;

        public BusyItem(WorkerPool pool)
        {
            pool.UnsafeQueueUserWorkItem(static state =>
            {
                var item = (BusyItem)state!;
                item._started.Set();
                while (Volatile.Read(ref item._released) == 0)
                {
                    Thread.SpinWait(64);
                }
            }, this);
            Assert.True(_started.Wait(Waits.MustHappen), "the busy item did not start");
        }

        public void Release() => Volatile.Write(ref _released, 1);

        public void Dispose()
        {
            Release();
            _started.Dispose();
        }
    }
}
