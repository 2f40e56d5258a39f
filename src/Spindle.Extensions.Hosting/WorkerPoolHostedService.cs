using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

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
    private readonly IWorkerPoolProvider _provider;
    private readonly ILogger _logger;
    private KeyValuePair<string, WorkerPool>[] _started = [];
    private readonly ConcurrentQueue<KeyValuePair<string, WorkerPool>> _abandoned = new();

    public WorkerPoolHostedService(IWorkerPoolProvider provider, ILogger logger)
    {
        _provider = provider;
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
        return Task.CompletedTask;
    }

    public Task StartAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StartedAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StoppingAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StopAsync(CancellationToken cancellationToken) => Task.CompletedTask;

    public Task StoppedAsync(CancellationToken cancellationToken)
    {
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
