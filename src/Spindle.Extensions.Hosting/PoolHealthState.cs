using System.Diagnostics;
using System.Threading;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// What a pool's health check remembers between runs: when an item of the pool was last reported stuck (set by the
/// pool's <see cref="WorkerPool.StuckWorkItemDetected"/> handler from the pool's creation on), and when the check last
/// saw the count of threads added for starvation grow. Time stamps are <see cref="Stopwatch"/> ticks; 0 means never.
/// </summary>
internal sealed class PoolHealthState
{
    private long _lastStuckAt;
    private long _stuckCount;
    private long _starvationCount;
    private long _starvationSeenAt;
    private readonly Lock _starvationLock = new();

    public long StuckCount => Interlocked.Read(ref _stuckCount);

    public long LastStuckAt => Interlocked.Read(ref _lastStuckAt);

    public void OnStuck()
    {
        Interlocked.Increment(ref _stuckCount);
        Interlocked.Exchange(ref _lastStuckAt, Stopwatch.GetTimestamp());
    }

    /// <summary>Records the pool's current count of starvation threads; returns when it last grew (0: never).</summary>
    public long ObserveStarvation(long count, long now)
    {
        lock (_starvationLock)
        {
            if (count != _starvationCount)
            {
                _starvationCount = count;
                _starvationSeenAt = now;
            }
            return _starvationSeenAt;
        }
    }
}
