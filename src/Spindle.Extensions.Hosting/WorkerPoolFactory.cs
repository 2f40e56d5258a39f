using System;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Options;

namespace Spindle.Extensions.Hosting;

/// <summary>Creates the pool behind a keyed <see cref="WorkerPool"/> registration.</summary>
internal static class WorkerPoolFactory
{
    /// <summary>The logger category of the messages about work items (the hosted service logs under its own type).</summary>
    public const string WorkItemLoggerCategory = "Spindle.Extensions.Hosting.WorkerPool";

    /// <summary>
    /// Builds the named options (defaults, configuration, delegates, in registration order) and the pool. Invalid
    /// options, whether the binder, the name check (<see cref="WorkerPoolNameValidation"/>) or the pool rejects them, become an <see cref="InvalidOperationException"/> that names
    /// the pool and keeps the original exception as its inner exception. Under
    /// <see cref="UnhandledExceptionPolicy.Report"/> the pool's exceptions are logged.
    /// </summary>
    public static WorkerPool Create(IServiceProvider services, string name)
    {
        WorkerPool pool;
        try
        {
            WorkerPoolOptions options = services.GetRequiredService<IOptionsMonitor<WorkerPoolOptions>>().Get(name);
            pool = new WorkerPool(options);
        }
        catch (Exception ex) when (ex is ArgumentException or InvalidOperationException or FormatException or OptionsValidationException)
        {
            throw new InvalidOperationException($"Worker pool '{name}' could not be created from its options: {ex.Message}", ex);
        }

        ILogger logger = services.GetService<ILoggerFactory>()?.CreateLogger(WorkItemLoggerCategory) ?? NullLogger.Instance;
        if (pool.ExceptionPolicy == UnhandledExceptionPolicy.Report)
        {
            pool.UnhandledException += (_, e) => Log.WorkItemFailed(logger, name, e.Exception);
        }
        // Stuck items are logged and remembered for the health check; the handler runs on the built-in pool.
        PoolHealthState health = services.GetRequiredKeyedService<PoolHealthState>(name);
        pool.StuckWorkItemDetected += (_, e) =>
        {
            health.OnStuck();
            Log.WorkItemStuck(logger, name, e.Description, e.RunningTime.TotalMilliseconds, e.LaneName, e.WorkerThreadName);
        };
        return pool;
    }

    /// <summary>
    /// Builds the named lane options and creates the lane on its pool. Invalid options become an
    /// <see cref="InvalidOperationException"/> that names the lane and its pool; a pool whose shutdown has begun (a
    /// lane first resolved after its pool's stop) an <see cref="ObjectDisposedException"/> that names both.
    /// </summary>
    public static WorkerPoolLane CreateLane(IServiceProvider services, string laneName)
    {
        string poolName = services.GetRequiredService<WorkerPoolRegistry>().PoolOfLane(laneName)
            ?? throw new InvalidOperationException($"No lane named '{laneName}' is registered.");
        WorkerPool pool = services.GetRequiredKeyedService<WorkerPool>(poolName);
        try
        {
            LaneOptions options = services.GetRequiredService<IOptionsMonitor<LaneOptions>>().Get(laneName);
            if (!string.Equals(options.Name, laneName, StringComparison.Ordinal))
            {
                throw new InvalidOperationException($"its options name it '{options.Name}'; a registered lane's name is its key");
            }
            return pool.CreateLane(options);
        }
        catch (ObjectDisposedException ex)
        {
            // Before the options' catch: an ObjectDisposedException is an InvalidOperationException, and the options
            // are fine (the pool checks them first); what failed is the pool, which takes no new lane once it stops.
            throw new ObjectDisposedException(
                $"Lane '{laneName}' of worker pool '{poolName}' cannot be created: the pool is shut down or shutting down.", ex);
        }
        catch (Exception ex) when (ex is ArgumentException or InvalidOperationException or FormatException or OptionsValidationException)
        {
            throw new InvalidOperationException($"Lane '{laneName}' of worker pool '{poolName}' could not be created from its options: {ex.Message}", ex);
        }
    }
}
