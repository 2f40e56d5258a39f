using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// Ties the registered pools to the host's lifetime and to the disposal of the service provider.
/// </summary>
/// <remarks>
/// <para>The protocol, in the order the host and the service provider call it:</para>
/// <list type="number">
/// <item><see cref="StartingAsync"/>, before any hosted service starts: creates every registered pool, so invalid
/// options fail the host's start. The pools created before a failure are still stopped with the host.</item>
/// <item><see cref="StoppedAsync"/>, after every hosted service has stopped (so services can still use the pools while
/// they stop): shuts every pool down at once. Each drains until the host's shutdown token fires; then the items that
/// have not started are cancelled and counted, and running items finish on their own. Both outcomes are logged with
/// their counts.</item>
/// <item>When the token ended a pool's stop, the host has given up waiting for that pool's running items. The service
/// provider disposes the pool later (it disposes whatever its factories created, and nothing here can keep it from
/// that), and <see cref="WorkerPool.Dispose"/> would wait for those items again, without a bound. So the stop hands the
/// rest of the shutdown to the pool (<see cref="WorkerPool.LeaveRunningItemsOnDispose"/>): its disposal returns at
/// once, and the pool finishes its shutdown in the background when the items end. The pool is remembered as
/// abandoned.</item>
/// <item><see cref="Dispose"/>, by the service provider as it disposes itself: logs each abandoned pool that still
/// runs items, since those are what the process leaves behind.</item>
/// </list>
/// <para>The host calls the lifecycle methods one after the other; the stops of several pools run at once and may
/// record abandoned pools concurrently, hence the concurrent queue. The service provider disposes this service after
/// the host's stop has returned, or without any stop (then nothing is abandoned and every disposal drains).</para>
/// </remarks>
internal sealed class WorkerPoolHostedService : IHostedLifecycleService, IDisposable
{
    private readonly IServiceProvider _services;
    private readonly IWorkerPoolProvider _provider;
    private readonly WorkerPoolRegistry _registry;
    private readonly ILogger _logger;
    private KeyValuePair<string, WorkerPool>[] _started = [];
    private readonly ConcurrentQueue<KeyValuePair<string, WorkerPool>> _abandoned = new();
    private IDisposable? _reloads;

    public WorkerPoolHostedService(IServiceProvider services, IWorkerPoolProvider provider, WorkerPoolRegistry registry, ILogger logger)
    {
        _services = services;
        _provider = provider;
        _registry = registry;
        _logger = logger;
    }

    public Task StartingAsync(CancellationToken cancellationToken)
    {
        var started = new List<KeyValuePair<string, WorkerPool>>(_provider.Names.Count);
        try
        {
            foreach (string name in _provider.Names)
            {
                cancellationToken.ThrowIfCancellationRequested();
                WorkerPool pool = _provider.GetPool(name);
                started.Add(new(name, pool));
                Log.PoolStarted(_logger, name, pool.MinThreads, pool.MaxThreads);
            }
        }
        finally
        {
            // Pools created before a failure are still stopped with the host.
            _started = [.. started];
        }
        // The lanes too, so that invalid lane options fail the start as a pool's do.
        foreach (KeyValuePair<string, string> lane in _registry.Lanes)
        {
            cancellationToken.ThrowIfCancellationRequested();
            _services.GetRequiredKeyedService<WorkerPoolLane>(lane.Key);
        }
        WatchThreadLimits();
        return Task.CompletedTask;
    }

    /// <summary>
    /// Applies reloaded thread limits: when the configuration a pool's options are bound from reloads with options that
    /// build (<see cref="PoolOptionsReloadSource"/>), the options monitor rebinds them and calls this listener, which passes a changed minimum or maximum to
    /// <see cref="WorkerPool.SetThreadLimits(int, int)"/> (a limit that did not change stays what the pool has, derived
    /// or set). Limits the pool refuses are logged and change nothing.
    /// </summary>
    private void WatchThreadLimits()
    {
        IOptionsMonitor<WorkerPoolOptions> monitor = _services.GetRequiredService<IOptionsMonitor<WorkerPoolOptions>>();
        var last = new Dictionary<string, (int Min, int Max)>(StringComparer.Ordinal);
        foreach (KeyValuePair<string, WorkerPool> pool in _started)
        {
            WorkerPoolOptions options = monitor.Get(pool.Key);
            last[pool.Key] = (options.MinThreads, options.MaxThreads);
        }
        var gate = new Lock();
        _reloads = monitor.OnChange((options, name) =>
        {
            if (name is null || !_provider.TryGetPool(name, out WorkerPool? pool))
            {
                return;
            }
            lock (gate)
            {
                if (!last.TryGetValue(name, out (int Min, int Max) old))
                {
                    return;
                }
                (int oldMin, int oldMax) = old;
                if (options.MinThreads == oldMin && options.MaxThreads == oldMax)
                {
                    return;
                }
                int min = options.MinThreads == oldMin ? pool.MinThreads : options.MinThreads;
                int max = options.MaxThreads == oldMax ? pool.MaxThreads : options.MaxThreads;
                try
                {
                    pool.SetThreadLimits(min, max);
                    last[name] = (options.MinThreads, options.MaxThreads);
                    Log.ThreadLimitsReloaded(_logger, name, pool.MinThreads, pool.MaxThreads);
                }
                catch (Exception ex) when (ex is ArgumentOutOfRangeException or ObjectDisposedException)
                {
                    Log.ThreadLimitsReloadFailed(_logger, name, min, max, pool.MinThreads, pool.MaxThreads, ex);
                }
            }
        });
    }

    public Task StartAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StartedAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StoppingAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StopAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StoppedAsync(CancellationToken cancellationToken)
    {
        _reloads?.Dispose();
        KeyValuePair<string, WorkerPool>[] pools = _started;
        if (pools.Length == 0)
        {
            return Task.CompletedTask;
        }
        var stops = new Task[pools.Length];
        for (int i = 0; i < pools.Length; i++)
        {
            stops[i] = StopPoolAsync(pools[i].Key, pools[i].Value, cancellationToken);
        }
        return Task.WhenAll(stops);
    }

    private async Task StopPoolAsync(string name, WorkerPool pool, CancellationToken cancellationToken)
    {
        try
        {
            int cancelled = await pool.ShutdownAsync(ShutdownMode.Drain, cancellationToken).ConfigureAwait(false);
            Log.PoolStopped(_logger, name, pool.CompletedWorkItemCount, cancelled);
        }
        catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
        {
            // The pool has switched to cancelling what has not started; what runs now finishes on its own, and the
            // provider's disposal of the pool must not wait for it (step 3 of the protocol).
            pool.LeaveRunningItemsOnDispose();
            _abandoned.Enqueue(new(name, pool));
            Log.PoolShutdownTimedOut(_logger, name, pool.CancelledWorkItemCount, BusyThreads(pool), pool.PendingWorkItemCount);
        }
    }

    /// <summary>Logs each pool whose stop timed out and that still runs items (step 4 of the protocol).</summary>
    public void Dispose()
    {
        _reloads?.Dispose();
        while (_abandoned.TryDequeue(out KeyValuePair<string, WorkerPool> abandoned))
        {
            int busy = BusyThreads(abandoned.Value);
            if (busy > 0)
            {
                Log.PoolAbandoned(_logger, abandoned.Key, busy);
            }
        }
    }

    /// <summary>
    /// The live threads of a pool whose shutdown has begun. Idle workers exit once nothing is left to run (they stay
    /// parked only while an async item may still post continuations), so after a stop that timed out these are the
    /// threads still running items, give or take one on its way out.
    /// </summary>
    private static int BusyThreads(WorkerPool pool) => pool.ThreadCount + pool.DedicatedThreadCount;
}
