using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// Ties the registered pools to the host's lifetime. Before any hosted service starts (<see cref="StartingAsync"/>) it
/// creates every registered pool, so invalid options fail the host's start. After every hosted service has stopped
/// (<see cref="StoppedAsync"/>, so services can still use the pools while they stop) it shuts every pool down at once:
/// each drains until the host's shutdown token fires; then the items that have not started are cancelled and counted,
/// and running items finish on their own. Both outcomes are logged with their counts.
/// </summary>
internal sealed class WorkerPoolHostedService : IHostedLifecycleService
{
    private readonly IWorkerPoolProvider _provider;
    private readonly ILogger _logger;
    private KeyValuePair<string, WorkerPool>[] _started = [];

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
            // The pool has switched to cancelling what has not started; what runs now finishes on its own.
            Log.PoolShutdownTimedOut(_logger, name, pool.CancelledWorkItemCount, pool.ThreadCount + pool.DedicatedThreadCount,
                pool.PendingWorkItemCount);
        }
    }
}
