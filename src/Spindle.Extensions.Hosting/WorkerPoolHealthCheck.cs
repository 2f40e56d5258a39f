using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;

namespace Spindle.Extensions.Hosting;

/// <summary>One pool's health, by the thresholds of <see cref="WorkerPoolHealthCheckOptions"/>.</summary>
internal sealed class WorkerPoolHealthCheck(WorkerPool pool, PoolHealthState state, WorkerPoolHealthCheckOptions options) : IHealthCheck
{
    public Task<HealthCheckResult> CheckHealthAsync(HealthCheckContext context, CancellationToken cancellationToken = default)
    {
        long now = Stopwatch.GetTimestamp();
        long starvationThreads = pool.GetThreadInjectionCount(ThreadInjectionReason.Starvation);
        long starvationSeenAt = state.ObserveStarvation(starvationThreads, now);
        long lastStuckAt = state.LastStuckAt;
        long pending = pool.PendingWorkItemCount;
        var data = new Dictionary<string, object>
        {
            ["threads"] = pool.ThreadCount,
            ["pending"] = pending,
            ["stuck_items"] = state.StuckCount,
            ["starvation_threads"] = starvationThreads,
        };

        HealthCheckResult result;
        if (pool.IsShutdownStarted)
        {
            // It refuses every new item: a probe that read it healthy would keep sending work to it.
            result = new HealthCheckResult(context.Registration.FailureStatus,
                $"Worker pool '{pool.Name}' is {(pool.HasStopped ? "stopped" : "shutting down")}: it takes no new work.", data: data);
        }
        else if (lastStuckAt != 0 && Stopwatch.GetElapsedTime(lastStuckAt, now) < options.StuckItemWindow)
        {
            result = new HealthCheckResult(context.Registration.FailureStatus,
                $"Worker pool '{pool.Name}' had an item stuck (running past {pool.StuckItemThreshold}) within the last {options.StuckItemWindow}.", data: data);
        }
        else if (starvationSeenAt != 0 && Stopwatch.GetElapsedTime(starvationSeenAt, now) < options.StarvationWindow)
        {
            result = HealthCheckResult.Degraded(
                $"Worker pool '{pool.Name}' added threads for starvation within the last {options.StarvationWindow}.", data: data);
        }
        else if (pending > options.QueueLengthThreshold)
        {
            result = HealthCheckResult.Degraded(
                $"Worker pool '{pool.Name}' has {pending} items waiting, more than {options.QueueLengthThreshold}.", data: data);
        }
        else
        {
            result = HealthCheckResult.Healthy($"Worker pool '{pool.Name}': {pool.ThreadCount} threads, {pending} items waiting.", data);
        }
        return Task.FromResult(result);
    }
}
