namespace Spindle.Primitives;

/// <summary>The kinds of thread a pool starts; each start can be refused by the operating system.</summary>
internal enum PoolThreadKind
{
    /// <summary>A worker (ThreadController).</summary>
    Worker,

    /// <summary>A dedicated thread of a long-running item (DedicatedThreads).</summary>
    Dedicated,

    /// <summary>The stall monitor (StallMonitor).</summary>
    Monitor,

    /// <summary>The relief thread for outside work (OutsideRelief).</summary>
    Relief,

    /// <summary>The timer thread (TimerService).</summary>
    Timer,

    /// <summary>A wait thread of registered waits on arbitrary handles (WaitRegistry).</summary>
    Wait,

    /// <summary>The I/O poller of the pool's sockets (EpollDriver).</summary>
    IO,
}
