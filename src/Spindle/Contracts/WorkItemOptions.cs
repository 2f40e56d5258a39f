using System;

namespace Spindle;

/// <summary>How a work item is queued.</summary>
[Flags]
public enum WorkItemOptions
{
    /// <summary>Queue to the global queue (shared fairly with work from outside the pool).</summary>
    None = 0,

    /// <summary>
    /// When called from one of this pool's workers, queue to that worker's local queue (run soon, on the same core,
    /// stealable by idle workers). Ignored elsewhere.
    /// </summary>
    PreferLocal = 1,

    /// <summary>
    /// The item will run for a long time (or block for long): run it on a dedicated thread of the pool instead of a
    /// worker, so it never holds a worker's place. Dedicated threads are reused for later long-running items and exit
    /// after <see cref="WorkerPoolOptions.IdleTimeout"/> without work. Combined with <see cref="PreferLocal"/>, the
    /// long-running flag wins.
    /// </summary>
    LongRunning = 2,
}
