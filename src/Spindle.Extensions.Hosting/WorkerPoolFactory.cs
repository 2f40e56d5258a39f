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

        if (pool.ExceptionPolicy == UnhandledExceptionPolicy.Report)
        {
            ILogger logger = services.GetService<ILoggerFactory>()?.CreateLogger(WorkItemLoggerCategory) ?? NullLogger.Instance;
            pool.UnhandledException += (_, e) => Log.WorkItemFailed(logger, name, e.Exception);
        }
        return pool;
    }
}
