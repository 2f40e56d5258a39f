using System;
using System.Threading;

namespace Spindle;

/// <summary>The <see cref="TimeProvider"/> of a <see cref="WorkerPool"/>: the system's clock, the pool's timers.</summary>
internal sealed class WorkerPoolTimeProvider : TimeProvider
{
    private readonly WorkerPool _pool;

    public WorkerPoolTimeProvider(WorkerPool pool) => _pool = pool;

    /// <inheritdoc/>
    public override ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period) =>
        _pool.CreateTimer(callback, state, dueTime, period);

    /// <inheritdoc/>
    public override string ToString() => $"TimeProvider of {_pool}";
}
