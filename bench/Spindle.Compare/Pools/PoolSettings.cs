using System;

namespace Spindle.Compare.Pools;

/// <summary>
/// How a scenario wants its pool configured. Pools that cannot be configured per instance (the process-wide built-in
/// pool) ignore it and run with their defaults.
/// </summary>
internal sealed record PoolSettings
{
    /// <summary>What every scenario uses unless it says otherwise.</summary>
    public static PoolSettings Default { get; } = new();

    /// <summary>Threads the pool keeps.</summary>
    public int MinThreads { get; init; } = Environment.ProcessorCount;

    /// <summary>Upper bound on the pool's threads; null for the pool's own default.</summary>
    public int? MaxThreads { get; init; }

    /// <summary>
    /// How long an item may run before the pool reports it as stuck (see <see cref="IPoolUnderTest.TryObserveStuckItems"/>);
    /// null for the pool's own default.
    /// </summary>
    public TimeSpan? StuckItemThreshold { get; init; }
}
