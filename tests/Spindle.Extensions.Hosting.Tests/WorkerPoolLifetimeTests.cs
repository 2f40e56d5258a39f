using System;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>
/// The pools follow the host: they drain when the host stops, cancel what is pending once its shutdown timeout fires,
/// and after such a timeout the disposal of the service provider no longer waits for the items left running.
/// </summary>
public sealed class WorkerPoolLifetimeTests
{
    [Fact]
    public async Task StopAsync_PastTheShutdownTimeout_CancelsPendingItems_AndLogsTheCounts()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = TimeSpan.FromSeconds(1));
        builder.Services.AddWorkerPool("slow", o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        });
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("slow");

        using var gate = new ManualResetEventSlim();
        using var blockerStarted = new ManualResetEventSlim();
        int ran = 0;
        try
        {
            // One item holds the pool's only thread far longer than the timeout; thirty more wait behind it.
            pool.QueueUserWorkItem(_ =>
            {
                blockerStarted.Set();
                gate.Wait();
                Interlocked.Increment(ref ran);
            }, null);
            Assert.True(blockerStarted.Wait(TestHosts.Generous));
            for (int i = 0; i < 30; i++)
            {
                pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), null);
            }

            // The gate stays closed until the end, so a stop that returns at all gave up at its timeout instead of
            // waiting for the blocked item: nothing has run yet, not even the blocker.
            await host.StopAsync().WaitAsync(TestHosts.Generous);
            Assert.Equal(30, pool.CancelledWorkItemCount);
            Assert.Equal(0, Volatile.Read(ref ran));

            LogEntry entry = Assert.Single(logs.WithEvent("PoolShutdownTimedOut"));
            Assert.Equal(LogLevel.Warning, entry.Level);
            Assert.Equal("slow", entry.Values["PoolName"]);
            Assert.Equal(30L, entry.Values["CancelledCount"]);
            Assert.Equal(1, entry.Values["RunningThreadCount"]);
            Assert.Equal(0L, entry.Values["PendingCount"]);
            Assert.Contains("30 work items that had not started were cancelled", entry.Message, StringComparison.Ordinal);
            Assert.Empty(logs.WithEvent("PoolStopped"));
        }
        finally
        {
            gate.Set();
        }

        // The blocked item finishes on its own once released; none of the cancelled ones ever runs. (An explicit
        // shutdown still waits for the pool to stop; disposal would not, after a stop that timed out.)
        await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(TestHosts.Generous);
        Assert.Equal(1, Volatile.Read(ref ran));
    }

    /// <summary>An item that holds a worker of its pool until <see cref="Release"/> (or <see cref="Dispose"/>).</summary>
    private sealed class BlockingItem : IDisposable
    {
        private readonly TaskCompletionSource _started = new(TaskCreationOptions.RunContinuationsAsynchronously);
        private readonly TaskCompletionSource _gate = new(TaskCreationOptions.RunContinuationsAsynchronously);
        private int _finished;

        public bool HasFinished => Volatile.Read(ref _finished) != 0;

        /// <summary>Queues the item to <paramref name="pool"/> and waits (generously) until a worker runs it.</summary>
        public static async Task<BlockingItem> StartOn(WorkerPool pool)
        {
            var item = new BlockingItem();
            pool.QueueUserWorkItem(_ =>
            {
                item._started.SetResult();
                item._gate.Task.Wait();
                Interlocked.Exchange(ref item._finished, 1);
            }, null);
            await item._started.Task.WaitAsync(TestHosts.Generous);
            return item;
        }

        public void Release() => _gate.TrySetResult();

        public void Dispose() => Release();
    }

    private static HostApplicationBuilder SingleThreadPoolHost(CapturingLoggerProvider logs, string name, TimeSpan shutdownTimeout)
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = shutdownTimeout);
        builder.Services.AddWorkerPool(name, o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        });
        return builder;
    }

    [Fact]
    public async Task DisposingTheHost_AfterAStopThatTimedOut_DoesNotWaitForTheStuckItem_AndLogsWhatItLeaves()
    {
        var logs = new CapturingLoggerProvider();
        using IHost host = SingleThreadPoolHost(logs, "stuck", TimeSpan.FromMilliseconds(200)).Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("stuck");
        using BlockingItem stuck = await BlockingItem.StartOn(pool);

        await host.StopAsync().WaitAsync(TestHosts.Generous);
        Assert.Single(logs.WithEvent("PoolShutdownTimedOut"));

        // The item is still blocked, so a disposal that returns at all did not wait for it.
        await ((IAsyncDisposable)host).DisposeAsync().AsTask().WaitAsync(TestHosts.Generous);
        Assert.False(stuck.HasFinished);
        LogEntry entry = Assert.Single(logs.WithEvent("PoolAbandoned"));
        Assert.Equal(LogLevel.Warning, entry.Level);
        Assert.Equal("stuck", entry.Values["PoolName"]);
        Assert.Equal(1, entry.Values["RunningThreadCount"]);
        Assert.Contains("'stuck'", entry.Message, StringComparison.Ordinal);

        // Released, the item finishes on its own and the pool stops; an explicit shutdown still waits for that.
        stuck.Release();
        await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(TestHosts.Generous);
        Assert.True(stuck.HasFinished);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Fact]
    public async Task DisposingTheServiceProviderSynchronously_AfterAStopThatTimedOut_DoesNotWaitForTheStuckItem()
    {
        var services = new ServiceCollection();
        services.AddWorkerPool("stuck", o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        });
        ServiceProvider provider = services.BuildServiceProvider();
        var lifecycle = (IHostedLifecycleService)Assert.Single(provider.GetServices<IHostedService>());
        await lifecycle.StartingAsync(CancellationToken.None);
        WorkerPool pool = provider.GetRequiredKeyedService<WorkerPool>("stuck");
        using BlockingItem stuck = await BlockingItem.StartOn(pool);

        // The stop the host makes, with a shutdown timeout that fires while the item is blocked.
        using (var shutdownTimeout = new CancellationTokenSource(TimeSpan.FromMilliseconds(200)))
        {
            await lifecycle.StoppedAsync(shutdownTimeout.Token).WaitAsync(TestHosts.Generous);
        }

        // The synchronous path: the provider calls WorkerPool.Dispose, not DisposeAsync.
        await Task.Run(provider.Dispose).WaitAsync(TestHosts.Generous);
        Assert.False(stuck.HasFinished);

        stuck.Release();
        await pool.ShutdownAsync(ShutdownMode.Drain).WaitAsync(TestHosts.Generous);
        Assert.True(stuck.HasFinished);
    }

    [Fact]
    public async Task DisposingTheHost_WithoutAStopThatTimedOut_StillWaitsForRunningItems()
    {
        var logs = new CapturingLoggerProvider();
        using IHost host = SingleThreadPoolHost(logs, "busy", TestHosts.Generous).Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("busy");
        using BlockingItem running = await BlockingItem.StartOn(pool);

        // Never stopped by the host: disposal drains, as WorkerPool.Dispose does, so it waits for the running item.
        Task dispose = ((IAsyncDisposable)host).DisposeAsync().AsTask();
        await Task.Delay(200);
        Assert.False(dispose.IsCompleted);

        running.Release();
        await dispose.WaitAsync(TestHosts.Generous);
        Assert.True(running.HasFinished);
        Assert.Empty(logs.WithEvent("PoolAbandoned"));
    }

    [Fact]
    public async Task StopAsync_WithinTheShutdownTimeout_DrainsEveryAcceptedItem()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.Configure<HostOptions>(o => o.ShutdownTimeout = TestHosts.Generous);
        builder.Services.AddWorkerPool("steady", o =>
        {
            o.MinThreads = 1;
            o.MaxThreads = 1;
        });
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("steady");

        using var gate = new ManualResetEventSlim();
        using var blockerStarted = new ManualResetEventSlim();
        int ran = 0;
        pool.QueueUserWorkItem(_ =>
        {
            blockerStarted.Set();
            gate.Wait();
            Interlocked.Increment(ref ran);
        }, null);
        Assert.True(blockerStarted.Wait(TestHosts.Generous));
        for (int i = 0; i < 30; i++)
        {
            pool.QueueUserWorkItem(_ => Interlocked.Increment(ref ran), null);
        }

        // The stop begins with every item still waiting, and must run all of them.
        Task stop = host.StopAsync();
        gate.Set();
        await stop.WaitAsync(TestHosts.Generous);

        Assert.Equal(31, Volatile.Read(ref ran));
        Assert.Equal(0, pool.CancelledWorkItemCount);
        Assert.True(pool.IsShutdownStarted);
        Assert.Throws<ObjectDisposedException>(() => pool.QueueUserWorkItem(_ => { }, null));
        LogEntry entry = Assert.Single(logs.WithEvent("PoolStopped"));
        Assert.Equal(LogLevel.Information, entry.Level);
        Assert.Equal("steady", entry.Values["PoolName"]);
        Assert.Equal(0L, entry.Values["CancelledCount"]);
        Assert.Equal(31L, entry.Values["CompletedCount"]);
        Assert.Empty(logs.WithEvent("PoolShutdownTimedOut"));
    }

    /// <summary>A hosted service registered before the pools, so the host stops it after theirs would have stopped.</summary>
    private sealed class UsesPoolWhileStopping(IServiceProvider services) : IHostedService
    {
        public int ResultFromStop { get; private set; }

        public Task StartAsync(CancellationToken cancellationToken) => Task.CompletedTask;

        public async Task StopAsync(CancellationToken cancellationToken)
        {
            WorkerPool pool = services.GetRequiredKeyedService<WorkerPool>("shared");
            ResultFromStop = await pool.Run(() => 42, cancellationToken);
        }
    }

    [Fact]
    public async Task HostedServices_CanStillUseThePools_WhileTheyStop()
    {
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddSingleton<UsesPoolWhileStopping>();
        builder.Services.AddHostedService(sp => sp.GetRequiredService<UsesPoolWhileStopping>());
        builder.Services.AddWorkerPool("shared");
        using IHost host = builder.Build();
        await host.StartAsync();

        await host.StopAsync().WaitAsync(TestHosts.Generous);

        Assert.Equal(42, host.Services.GetRequiredService<UsesPoolWhileStopping>().ResultFromStop);
        Assert.True(host.Services.GetRequiredKeyedService<WorkerPool>("shared").IsShutdownStarted);
    }

    [Fact]
    public async Task StartAsync_CreatesEveryRegisteredPool_AndStopAsyncStopsThemAll()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.AddWorkerPool("a").AddWorkerPool("b");
        using IHost host = builder.Build();

        await host.StartAsync();
        Assert.Equal(2, logs.WithEvent("PoolStarted").Count);

        await host.StopAsync().WaitAsync(TestHosts.Generous);
        Assert.Equal(2, logs.WithEvent("PoolStopped").Count);
        Assert.True(host.Services.GetRequiredKeyedService<WorkerPool>("a").IsShutdownStarted);
        Assert.True(host.Services.GetRequiredKeyedService<WorkerPool>("b").IsShutdownStarted);
    }
}
