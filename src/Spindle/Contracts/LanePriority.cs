namespace Spindle;

/// <summary>
/// The priority class of a <see cref="WorkerPoolLane"/>. At every dispatch a worker takes work from the highest class
/// that has runnable work; lower classes still get a guaranteed minimum (see <see cref="WorkerPoolLane"/>).
/// </summary>
public enum LanePriority
{
    /// <summary>Background work: runs when no Normal or High work is runnable, and at least once per starvation interval.</summary>
    Low = 0,

    /// <summary>The class of the pool's own queue (the default lane).</summary>
    Normal = 1,

    /// <summary>Latency-sensitive work: taken before any Normal or Low work at every dispatch.</summary>
    High = 2,
}

/// <summary>What a bounded <see cref="WorkerPoolLane"/> does when a queueing call finds it full.</summary>
public enum LaneFullMode
{
    /// <summary>The queueing call blocks until there is room (the <c>TryQueue…</c> forms still return false at once).</summary>
    Wait = 0,

    /// <summary>The queueing call throws <see cref="WorkRejectedException"/> (the <c>TryQueue…</c> forms return false).</summary>
    Reject = 1,
}
