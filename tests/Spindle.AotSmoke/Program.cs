using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Spindle;
using Spindle.Extensions.Hosting;

namespace Spindle.AotSmoke;

/// <summary>
/// Uses every feature of the library once and checks the outcome, so that a NativeAOT publish proves the whole surface
/// works compiled ahead of time. Exits with 0 when every check passed, 1 (with the failed check) otherwise.
/// </summary>
internal static class Program
{
    private static readonly TimeSpan Patience = TimeSpan.FromSeconds(30);

    private static async Task<int> Main()
    {
        var checks = new List<(string Name, Func<WorkerPool, Task> Check)>
        {
            ("queueing forms", QueueingForms),
            ("Run and RunAsValueTask", RunForms),
            ("TaskScheduler", SchedulerForms),
            ("SynchronizationContext", ContextForms),
            ("timers and TimeProvider", Timers),
            ("registered waits", RegisteredWaits),
            ("blocking region and long-running", BlockingAndLongRunning),
            ("lanes", Lanes),
            ("meter", Meter),
            ("sockets", Sockets),
        };
        int failures = 0;
        foreach ((string name, Func<WorkerPool, Task> check) in checks)
        {
            var pool = new WorkerPool(new WorkerPoolOptions { Name = "aot-smoke", MinThreads = 2, MaxThreads = 16 });
            try
            {
                await check(pool).WaitAsync(Patience);
                Console.WriteLine($"ok      {name}");
            }
            catch (Exception exception)
            {
                failures++;
                Console.WriteLine($"FAILED  {name}: {exception}");
            }
            finally
            {
                await pool.DisposeAsync();
            }
        }
        failures += await Shutdown() ? 0 : 1;
        failures += await StuckItems() ? 0 : 1;
        failures += await Hosting() ? 0 : 1;
        Console.WriteLine(failures == 0 ? "all checks passed" : $"{failures} check(s) failed");
        return failures == 0 ? 0 : 1;
    }

    private static void Require(bool condition, string what)
    {
        if (!condition)
        {
            throw new InvalidOperationException($"Check failed: {what}");
        }
    }

    private static async Task Lanes(WorkerPool pool)
    {
        WorkerPoolLane high = pool.CreateLane(new LaneOptions { Name = "high", Priority = LanePriority.High });
        WorkerPoolLane serial = pool.CreateLane(new LaneOptions { Name = "serial", MaxConcurrency = 1, QueueLimit = 4, FullMode = LaneFullMode.Reject });
        int next = 0;
        bool inOrder = true;
        for (int i = 0; i < 100; i++)
        {
            int expected = i;
            await serial.QueueUserWorkItemAsync(_ =>
            {
                inOrder &= next == expected;
                next = expected + 1;
            }, 0);
        }
        Require(await high.Run(() => WorkerPoolLane.Current) == high, "a lane's Run runs in the lane");
        Require(await Task.Factory.StartNew(() => WorkerPoolLane.Current, CancellationToken.None, TaskCreationOptions.None, serial.TaskScheduler) == serial,
            "a lane's TaskScheduler runs in the lane");
        await serial.DisposeAsync();
        Require(inOrder && next == 100, "a serial lane runs its items in order");
        Require(serial.CompletedWorkItemCount == 101, "the serial lane's completed count");
    }

    private static async Task Sockets(WorkerPool pool)
    {
        using var listener = new Spindle.IO.PoolSocket(pool);
        listener.Bind(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, 0));
        listener.Listen();
        Task echo = pool.Run(async () =>
        {
            using Spindle.IO.PoolSocket connection = await listener.AcceptAsync();
            var buffer = new byte[64];
            int received;
            while ((received = await connection.ReceiveAsync(buffer)) > 0)
            {
                await connection.SendAsync(buffer.AsMemory(0, received));
            }
        });
        int echoed = await pool.Run(async () =>
        {
            using var client = new Spindle.IO.PoolSocket(pool);
            await client.ConnectAsync(listener.Socket.LocalEndPoint!);
            Require(client.UsesPoolDriver == OperatingSystem.IsLinux(), "the driver on Linux");
            var reply = new byte[3];
            int total = 0;
            for (int round = 0; round < 100; round++)
            {
                await client.SendAsync(new byte[] { 1, 2, 3 });
                int got = 0;
                while (got < 3)
                {
                    got += await client.ReceiveAsync(reply.AsMemory(got));
                }
                Require(WorkerPool.Current == pool, "a socket continuation on the pool");
                total += got;
            }
            return total;
        });
        await echo;
        Require(echoed == 300, "every echoed byte");
    }

    private static async Task Meter(WorkerPool pool)
    {
        long completed = -1;
        using var listener = new System.Diagnostics.Metrics.MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == "Spindle" && instrument.Name == "spindle.pool.work_item.count")
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<long>((_, value, tags, _) =>
        {
            foreach (KeyValuePair<string, object?> tag in tags)
            {
                if (tag.Key == "spindle.pool.name" && ReferenceEquals(tag.Value, pool.Name))
                {
                    completed = value;
                }
            }
        });
        listener.Start();
        await pool.Run(() => { });
        listener.RecordObservableInstruments();
        Require(completed == pool.CompletedWorkItemCount && completed >= 1, "the meter's completed count is the pool's");
    }

    private static async Task QueueingForms(WorkerPool pool)
    {
        var done = new CountdownEvent(8);
        pool.QueueUserWorkItem(_ => done.Signal());
        pool.QueueUserWorkItem(state => ((CountdownEvent)state!).Signal(), done);
        pool.QueueUserWorkItem(static (CountdownEvent c) => c.Signal(), done, preferLocal: false);
        pool.UnsafeQueueUserWorkItem(state => ((CountdownEvent)state!).Signal(), done);
        pool.UnsafeQueueUserWorkItem(static (int _) => { }, 42, preferLocal: true); // a value-typed state, never boxed
        pool.UnsafeQueueUserWorkItem(static (CountdownEvent c) => c.Signal(), done, preferLocal: true);
        pool.UnsafeQueueUserWorkItem(new SignalItem(done), preferLocal: false);
        pool.QueueUserWorkItem(static (CountdownEvent c) => c.Signal(), done, WorkItemOptions.PreferLocal);
        pool.UnsafeQueueUserWorkItem(new SignalItem(done), WorkItemOptions.None);
        Require(await Task.Run(() => done.Wait(Patience)), "every queued item ran");
        Require(pool.CompletedWorkItemCount >= 8, "the completed count moved");
    }

    private static async Task RunForms(WorkerPool pool)
    {
        await pool.Run(() => { });
        Require(await pool.Run(() => 41 + 1) == 42, "Run<T>");
        await pool.Run(async () => await Task.Yield());
        Require(await pool.Run(async () => { await Task.Delay(1); return "async"; }) == "async", "async Run<T>");
        await pool.RunAsValueTask(() => { });
        Require(await pool.RunAsValueTask(() => 7) == 7, "RunAsValueTask<T>");
        using var cancelled = new CancellationTokenSource();
        await cancelled.CancelAsync();
        Require(pool.Run(() => { }, cancelled.Token).IsCanceled, "a cancelled token cancels the Run at once");
    }

    private static async Task SchedulerForms(WorkerPool pool)
    {
        var factory = new TaskFactory(pool.TaskScheduler);
        WorkerPool? ranOn = await factory.StartNew(() => WorkerPool.Current);
        Require(ranOn == pool, "a task on the pool's scheduler runs on the pool");
        int sum = 0;
        Parallel.For(0, 100, new ParallelOptions { TaskScheduler = pool.TaskScheduler }, i => Interlocked.Add(ref sum, i));
        Require(sum == 4950, "Parallel.For on the pool's scheduler");
        await factory.StartNew(() => Thread.Sleep(1), TaskCreationOptions.LongRunning);
    }

    private static async Task ContextForms(WorkerPool pool)
    {
        var posted = new TaskCompletionSource<WorkerPool?>(TaskCreationOptions.RunContinuationsAsynchronously);
        pool.SynchronizationContext.Post(_ => posted.SetResult(WorkerPool.Current), null);
        Require(await posted.Task == pool, "Post runs on the pool");
        WorkerPool? sent = null;
        pool.SynchronizationContext.Send(_ => sent = WorkerPool.Current, null);
        Require(sent == pool, "Send runs on the pool");
    }

    private static async Task Timers(WorkerPool pool)
    {
        var fired = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using (ITimer timer = pool.CreateTimer(_ => fired.TrySetResult(), null, TimeSpan.FromMilliseconds(5), Timeout.InfiniteTimeSpan))
        {
            await fired.Task;
        }
        await Task.Delay(TimeSpan.FromMilliseconds(5), pool.TimeProvider);
        using var cts = new CancellationTokenSource(TimeSpan.FromMilliseconds(5), pool.TimeProvider);
        await Task.Delay(Timeout.InfiniteTimeSpan, cts.Token).ContinueWith(static _ => { }, TaskScheduler.Default);
        Require(cts.IsCancellationRequested, "CancelAfter on the pool's TimeProvider");
        using var periodic = new PeriodicTimer(TimeSpan.FromMilliseconds(2), pool.TimeProvider);
        Require(await periodic.WaitForNextTickAsync(), "PeriodicTimer on the pool's TimeProvider");
    }

    private static async Task RegisteredWaits(WorkerPool pool)
    {
        using var handle = new AutoResetEvent(false);
        var onHandle = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        RegisteredWait onEvent = pool.RegisterWaitForSingleObject(handle, (_, timedOut) => onHandle.TrySetResult(timedOut), null, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
        handle.Set();
        Require(!await onHandle.Task, "a WaitHandle registration fires on the signal");
        onEvent.Unregister(null);

        var signal = new PoolSignal(initialState: false, PoolSignalMode.AutoReset);
        var onSignal = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        RegisteredWait onPoolSignal = pool.RegisterWait(signal, (_, timedOut) => onSignal.TrySetResult(timedOut), null, TimeSpan.FromMilliseconds(1), executeOnlyOnce: true);
        Require(await onSignal.Task, "a PoolSignal registration times out without a signal");
        onPoolSignal.Unregister(null);
    }

    private static async Task BlockingAndLongRunning(WorkerPool pool)
    {
        bool active = await pool.Run(() =>
        {
            using BlockingRegion region = WorkerPool.EnterBlockingRegion();
            Thread.Sleep(2);
            return region.IsActive;
        });
        Require(active, "a blocking region on a worker is active");
        var longRunning = new TaskCompletionSource<WorkerPool?>(TaskCreationOptions.RunContinuationsAsynchronously);
        pool.QueueUserWorkItem(static (TaskCompletionSource<WorkerPool?> done) => done.SetResult(WorkerPool.Current), longRunning, WorkItemOptions.LongRunning);
        Require(await longRunning.Task == pool, "a long-running item runs on the pool's dedicated thread");
        Require(pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning) >= 1, "the dedicated thread was counted");
    }

    private static async Task<bool> Shutdown()
    {
        try
        {
            var pool = new WorkerPool(new WorkerPoolOptions { Name = "aot-shutdown", MinThreads = 1, MaxThreads = 1 });
            using var gate = new ManualResetEventSlim();
            pool.QueueUserWorkItem(_ => gate.Wait(Patience));
            Task<int> pending = pool.Run(() => 1);
            using var timeout = new CancellationTokenSource();
            Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain, timeout.Token);
            await timeout.CancelAsync();
            try
            {
                await shutdown;
                throw new InvalidOperationException("Check failed: the cancelled wait must end as cancelled");
            }
            catch (OperationCanceledException)
            {
            }
            Require(pending.IsCanceled && pool.CancelledWorkItemCount == 1, "a cancelled shutdown wait cancels what has not started");
            gate.Set();
            Require(await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(Patience) == 1, "the pool stops once the running item returns");
            Console.WriteLine("ok      shutdown");
            return true;
        }
        catch (Exception exception)
        {
            Console.WriteLine($"FAILED  shutdown: {exception}");
            return false;
        }
    }

    private static async Task<bool> StuckItems()
    {
        try
        {
            var threshold = TimeSpan.FromMilliseconds(50);
            await using var pool = new WorkerPool(new WorkerPoolOptions { Name = "aot-stuck", StuckItemThreshold = threshold });
            var reported = new TaskCompletionSource<StuckWorkItemEventArgs>(TaskCreationOptions.RunContinuationsAsynchronously);
            pool.StuckWorkItemDetected += (_, e) => reported.TrySetResult(e);
            using var gate = new ManualResetEventSlim();
            pool.QueueUserWorkItem(BlockUntilSet, gate);
            StuckWorkItemEventArgs report = await reported.Task.WaitAsync(Patience);
            gate.Set();
            // Compiled ahead of time the method may have no metadata: the delegate's type names the item then.
            Console.WriteLine($"        stuck item: {report.Description}");
            Require(report.Description.Length > 0 && report.RunningTime >= threshold && report.WorkerThreadName is not null,
                "a blocked item is reported with a description, its running time and its worker");
            Console.WriteLine("ok      stuck items");
            return true;
        }
        catch (Exception exception)
        {
            Console.WriteLine($"FAILED  stuck items: {exception}");
            return false;
        }
    }

    private static void BlockUntilSet(object? gate) => ((ManualResetEventSlim)gate!).Wait(Patience);

    private static async Task<bool> Hosting()
    {
        try
        {
            HostApplicationBuilder builder = Host.CreateEmptyApplicationBuilder(new HostApplicationBuilderSettings());
            builder.Configuration.AddInMemoryCollection(new Dictionary<string, string?>
            {
                ["Pools:ingest:MinThreads"] = "1",
                ["Pools:ingest:MaxThreads"] = "3",
                ["Pools:ingest:ExceptionPolicy"] = "Report",
                ["Pools:ingest:Lanes:interactive:Priority"] = "High",
                ["Pools:ingest:Lanes:interactive:MaxConcurrency"] = "1",
            });
            builder.Services.AddWorkerPools(builder.Configuration.GetSection("Pools"));
            builder.Services.AddWorkerPool("cpu", options => options.MaxThreads = 2)
                .AddLane("cpu-low", lane => lane.Priority = LanePriority.Low)
                .AddHealthCheck(health => health.QueueLengthThreshold = 100)
                .AddBackgroundService<LaneService>("cpu-low");
            using IHost host = builder.Build();
            await host.StartAsync();
            WorkerPool ingest = host.Services.GetRequiredKeyedService<WorkerPool>("ingest");
            Require(ingest.MaxThreads == 3 && ingest.ExceptionPolicy == UnhandledExceptionPolicy.Report, "options bound from configuration");
            Require(await host.Services.GetRequiredService<IWorkerPoolProvider>().GetPool("cpu").Run(() => 6 * 7) == 42, "a pool from the provider");
            WorkerPoolLane interactive = host.Services.GetRequiredKeyedService<WorkerPoolLane>("interactive");
            Require(interactive.Priority == LanePriority.High && interactive.MaxConcurrency == 1 && interactive.Pool == ingest, "a lane bound from configuration");
            WorkerPoolLane? ranOn = await host.Services.GetRequiredService<LaneService>().Ran.Task.WaitAsync(Patience);
            Require(ranOn == host.Services.GetRequiredKeyedService<WorkerPoolLane>("cpu-low"), "a background service on a lane");
            HealthReport health = await host.Services.GetRequiredService<HealthCheckService>().CheckHealthAsync();
            Require(health.Status == HealthStatus.Healthy && health.Entries.ContainsKey("worker-pool:cpu"), "the pool's health check");
            await host.StopAsync();
            Require(ingest.IsShutdownStarted, "the host stopped its pools");
            Console.WriteLine("ok      hosting");
            return true;
        }
        catch (Exception exception)
        {
            Console.WriteLine($"FAILED  hosting: {exception}");
            return false;
        }
    }

    private sealed class LaneService : WorkerPoolBackgroundService
    {
        public TaskCompletionSource<WorkerPoolLane?> Ran { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        protected override async Task ExecuteOnTargetAsync(CancellationToken stoppingToken)
        {
            await Task.Yield();
            Ran.TrySetResult(WorkerPoolLane.Current);
        }
    }

    private sealed class SignalItem(CountdownEvent done) : IWorkItem
    {
        public void Execute() => done.Signal();
    }
}
