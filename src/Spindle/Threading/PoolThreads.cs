using Spindle.Scheduling;

namespace Spindle.Threading;

/// <summary>Which pool owns the calling thread, whatever kind of pool thread it is.</summary>
internal static class PoolThreads
{
    /// <summary>
    /// The pool of the calling thread: a worker's, a dedicated long-running thread's or the relief thread's; null on any
    /// other thread.
    /// </summary>
    public static IPoolHost? CurrentPool => Worker.Current?.Pool ?? DedicatedThreads.CurrentPool ?? OutsideReliefThread.Current?.Pool;
}
