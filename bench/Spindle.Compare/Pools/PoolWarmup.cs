using System;
using System.Threading;

namespace Spindle.Compare.Pools;

internal static class PoolWarmup
{
    /// <summary>
    /// Makes the pool create its threads: queues <paramref name="count"/> items that each wait until all of them are
    /// running at once (or a second has passed), then waits for them to finish. Returns whether all ran concurrently.
    /// </summary>
    public static bool StartThreads(IPoolUnderTest pool, int count)
    {
        var state = new WarmupState(count);
        for (int i = 0; i < count; i++)
        {
            pool.UnsafeQueue(s_arrive, state, preferLocal: false);
        }
        if (!state.Finished.Wait(TimeSpan.FromSeconds(30)))
        {
            throw new TimeoutException("The pool did not run its warm-up items within 30 s.");
        }
        return state.AllArrived.IsSet;
    }

    private static readonly Action<object?> s_arrive = static boxed =>
    {
        var state = (WarmupState)boxed!;
        if (Interlocked.Increment(ref state.Arrived) == state.Count)
        {
            state.AllArrived.Set();
        }
        state.AllArrived.Wait(TimeSpan.FromSeconds(1));
        if (Interlocked.Increment(ref state.Departed) == state.Count)
        {
            state.Finished.Set();
        }
    };

    private sealed class WarmupState(int count)
    {
        public readonly int Count = count;
        public readonly ManualResetEventSlim AllArrived = new(false);
        public readonly ManualResetEventSlim Finished = new(false);
        public int Arrived;
        public int Departed;
    }
}
