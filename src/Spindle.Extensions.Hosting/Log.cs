using System;
using Microsoft.Extensions.Logging;

namespace Spindle.Extensions.Hosting;

/// <summary>The log messages of the hosting integration, source-generated.</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 1, EventName = "WorkItemFailed", Level = LogLevel.Error,
        Message = "A work item (or worker hook) of worker pool '{PoolName}' threw an exception; the pool carries on.")]
    public static partial void WorkItemFailed(ILogger logger, string poolName, Exception exception);

    [LoggerMessage(EventId = 2, EventName = "PoolStarted", Level = LogLevel.Debug,
        Message = "Worker pool '{PoolName}' started (min threads {MinThreads}, max threads {MaxThreads}).")]
    public static partial void PoolStarted(ILogger logger, string poolName, int minThreads, int maxThreads);

    [LoggerMessage(EventId = 3, EventName = "PoolStopped", Level = LogLevel.Information,
        Message = "Worker pool '{PoolName}' stopped: {CompletedCount} work items completed, {CancelledCount} cancelled by shutdown.")]
    public static partial void PoolStopped(ILogger logger, string poolName, long completedCount, long cancelledCount);

    [LoggerMessage(EventId = 4, EventName = "PoolShutdownTimedOut", Level = LogLevel.Warning,
        Message = "Worker pool '{PoolName}' did not stop within the host's shutdown timeout: {CancelledCount} work items " +
            "that had not started were cancelled; {RunningThreadCount} threads are still running items and {PendingCount} " +
            "entries are still queued behind them; the pool stops on its own once those items finish, and disposing it " +
            "does not wait for them.")]
    public static partial void PoolShutdownTimedOut(ILogger logger, string poolName, long cancelledCount, int runningThreadCount, long pendingCount);

    [LoggerMessage(EventId = 5, EventName = "PoolAbandoned", Level = LogLevel.Warning,
        Message = "The service provider is disposed while worker pool '{PoolName}' still has {RunningThreadCount} threads " +
            "running items that outlived the host's shutdown timeout; the disposal does not wait for them: they finish on " +
            "their own, and then the pool stops.")]
    public static partial void PoolAbandoned(ILogger logger, string poolName, int runningThreadCount);

    [LoggerMessage(EventId = 6, EventName = "WorkItemStuck", Level = LogLevel.Warning,
        Message = "A work item of worker pool '{PoolName}' has been running for {RunningMs} ms, past the pool's stuck-item " +
            "threshold: {Item} (lane {LaneName}, thread {ThreadName}).")]
    public static partial void WorkItemStuck(ILogger logger, string poolName, string item, double runningMs, string? laneName, string? threadName);

    [LoggerMessage(EventId = 7, EventName = "ThreadLimitsReloaded", Level = LogLevel.Information,
        Message = "Worker pool '{PoolName}': thread limits reloaded from configuration (min threads {MinThreads}, max threads {MaxThreads}).")]
    public static partial void ThreadLimitsReloaded(ILogger logger, string poolName, int minThreads, int maxThreads);

    [LoggerMessage(EventId = 8, EventName = "ThreadLimitsReloadFailed", Level = LogLevel.Error,
        Message = "Worker pool '{PoolName}': the reloaded thread limits (min threads {MinThreads}, max threads {MaxThreads}) " +
            "were refused; the pool keeps min {CurrentMinThreads}, max {CurrentMaxThreads}.")]
    public static partial void ThreadLimitsReloadFailed(ILogger logger, string poolName, int minThreads, int maxThreads,
        int currentMinThreads, int currentMaxThreads, Exception exception);

    [LoggerMessage(EventId = 9, EventName = "OptionsReloadFailed", Level = LogLevel.Error,
        Message = "Worker pool '{PoolName}': its configuration reloaded with options that could not be built; the reload " +
            "is ignored, and the pool and its options keep what they had.")]
    public static partial void OptionsReloadFailed(ILogger logger, string poolName, Exception exception);

    [LoggerMessage(EventId = 10, EventName = "OptionsReloadListenerFailed", Level = LogLevel.Error,
        Message = "Worker pool '{PoolName}': its configuration reloaded, and rebuilding its options for the options " +
            "monitor, or a listener of the monitor, threw.")]
    public static partial void OptionsReloadListenerFailed(ILogger logger, string poolName, Exception exception);
}
