using System;
using Spindle;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>
/// Thresholds of a worker pool's health check (<see cref="WorkerPoolBuilderExtensions.AddHealthCheck"/>): Unhealthy
/// while an item was reported stuck within <see cref="StuckItemWindow"/>; else Degraded while the pool added threads for
/// starvation within <see cref="StarvationWindow"/> or more than <see cref="QueueLengthThreshold"/> items wait; else
/// Healthy.
/// </summary>
public sealed class WorkerPoolHealthCheckOptions
{
    /// <summary>
    /// How long a stuck item (one that ran past <see cref="WorkerPoolOptions.StuckItemThreshold"/>) keeps the pool
    /// Unhealthy after it was reported. Defaults to 5 minutes; must be positive.
    /// </summary>
    public TimeSpan StuckItemWindow { get; set; } = TimeSpan.FromMinutes(5);

    /// <summary>
    /// How long threads added for starvation (<see cref="ThreadInjectionReason.Starvation"/>) keep the pool Degraded after
    /// the check saw them. Defaults to 1 minute; must be positive.
    /// </summary>
    public TimeSpan StarvationWindow { get; set; } = TimeSpan.FromMinutes(1);

    /// <summary>
    /// Items waiting (<see cref="WorkerPool.PendingWorkItemCount"/>, lanes included) above which the pool is Degraded.
    /// Defaults to 10,000; must be at least 1.
    /// </summary>
    public long QueueLengthThreshold { get; set; } = 10_000;

    /// <summary>The health check's name in reports. Defaults to <c>worker-pool:</c> followed by the pool's name.</summary>
    public string? Name { get; set; }

    /// <summary>Throws for a value out of range; returns a copy that later changes to this instance do not affect.</summary>
    internal WorkerPoolHealthCheckOptions Validate(string poolName, string paramName)
    {
        if (StuckItemWindow <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(paramName, StuckItemWindow, $"{nameof(StuckItemWindow)} must be positive.");
        }
        if (StarvationWindow <= TimeSpan.Zero)
        {
            throw new ArgumentOutOfRangeException(paramName, StarvationWindow, $"{nameof(StarvationWindow)} must be positive.");
        }
        if (QueueLengthThreshold < 1)
        {
            throw new ArgumentOutOfRangeException(paramName, QueueLengthThreshold, $"{nameof(QueueLengthThreshold)} must be at least 1.");
        }
        if (Name is not null && string.IsNullOrWhiteSpace(Name))
        {
            throw new ArgumentException($"{nameof(Name)}, the health check's name, must not be empty or white space.", paramName);
        }
        return new WorkerPoolHealthCheckOptions
        {
            StuckItemWindow = StuckItemWindow,
            StarvationWindow = StarvationWindow,
            QueueLengthThreshold = QueueLengthThreshold,
            Name = Name ?? "worker-pool:" + poolName,
        };
    }
}
