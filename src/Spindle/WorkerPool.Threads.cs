using System;
using System.Threading;
using Spindle.Scheduling;

namespace Spindle;

// Threads: limits, blocking regions and injection counts (the controller itself is Threading/ThreadController.cs).
public sealed partial class WorkerPool
{
    /// <summary>
    /// How many times the pool has added or retired a thread for <paramref name="reason"/> since it was created
    /// (for <see cref="ThreadInjectionReason.CreationFailed"/>, how many creations failed).
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="reason"/> is not a defined value.</exception>
    public long GetThreadInjectionCount(ThreadInjectionReason reason)
    {
        if (!Enum.IsDefined(reason))
        {
            throw new ArgumentOutOfRangeException(nameof(reason), reason, "Unknown injection reason.");
        }
        return _threads.GetInjectionCount(reason) + _dedicated.GetInjectionCount(reason);
    }

    /// <summary>Total number of thread creations that failed (each is retried with backoff).</summary>
    internal long CreationFailureCount => GetThreadInjectionCount(ThreadInjectionReason.CreationFailed);

    /// <summary>The number of runnable workers the pool currently aims for.</summary>
    internal int ThreadTarget => _threads.ThreadTarget;

    /// <summary>Workers parked right now (tests and diagnostics; a snapshot).</summary>
    internal int ParkedWorkerCount => _threads.ParkedCount;

    /// <summary>How many times the pool's workers have parked, exited workers included (tests and diagnostics).</summary>
    internal long WorkerParkCount => _threads.WorkerParkCount;

    /// <summary>Steals the current workers made from a stalled peer they watched (for tests; exited workers' are not kept).</summary>
    internal long PeerWatchStealCount
    {
        get
        {
            long sum = 0;
            foreach (Scheduling.Worker worker in _threads.Workers)
            {
                sum += worker.Counts.PeerWatchSteals;
            }
            return sum;
        }
    }

    /// <summary>Dedicated threads waiting for an item (tests and diagnostics).</summary>
    internal int IdleDedicatedThreadCount => _dedicated.IdleCount;

    /// <summary>Diagnostics for tests: the thread controller's and the monitor's state in one line.</summary>
    internal string DescribeInjectionState() => _threads.DescribeMonitor();

    /// <summary>For diagnostics: what each work source the workers read shows now.</summary>
    internal string DescribeVisibleWork() => _scheduler.Sources.DescribeVisibleWork();

    /// <summary>
    /// Changes the pool's minimum and maximum thread counts while it runs. Raising the minimum starts threads at once;
    /// lowering the maximum retires surplus threads as they finish their current items.
    /// </summary>
    /// <remarks>
    /// What <see cref="ThreadPool.SetMinThreads(int, int)"/> and <see cref="ThreadPool.SetMaxThreads(int, int)"/> are to
    /// the built-in pool, in one call (so no order of two calls is needed to move both limits past each other), with
    /// their edges where they have a meaning here: a maximum above <see cref="WorkerPoolOptions.MaxThreadLimit"/> is
    /// capped there, a minimum above the maximum is refused. Where those methods return <see langword="false"/> this
    /// one throws, and changes nothing. A minimum of 0 stays 0 (the built-in pool reads 1): see
    /// <see cref="WorkerPoolOptions.MinThreads"/>. There is no completion-port count: the pool has no I/O threads.
    /// </remarks>
    /// <param name="minThreads">Threads the pool keeps (idle ones above it retire after <see cref="WorkerPoolOptions.IdleTimeout"/>); 0 to <paramref name="maxThreads"/> (after its cap).</param>
    /// <param name="maxThreads">Upper bound on worker threads; at least 1, and capped at <see cref="WorkerPoolOptions.MaxThreadLimit"/>.</param>
    /// <exception cref="ArgumentOutOfRangeException">A count is below its minimum, or <paramref name="minThreads"/> exceeds
    /// <paramref name="maxThreads"/> (after its cap).</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public void SetThreadLimits(int minThreads, int maxThreads)
    {
        maxThreads = WorkerPoolOptions.ValidateThreadLimits(minThreads, maxThreads, nameof(minThreads), nameof(maxThreads));
        _threads.SetLimits(minThreads, maxThreads);
    }

    /// <summary>
    /// Tells the pool that the calling work item is about to block, so that waiting work gets a replacement thread at
    /// once. Dispose the returned region when the blocking call returns; see <see cref="BlockingRegion"/>.
    /// </summary>
    /// <returns>An active region on a pool worker; an inactive one (disposing it does nothing) on any other thread.</returns>
    /// <example><code>
    /// using (WorkerPool.EnterBlockingRegion())
    /// {
    ///     response = client.Send(request); // synchronous I/O
    /// }
    /// </code></example>
    public static BlockingRegion EnterBlockingRegion() => BlockingRegion.Enter();
}
