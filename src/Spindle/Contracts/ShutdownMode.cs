namespace Spindle;

/// <summary>How <see cref="WorkerPool.Shutdown(ShutdownMode)"/> treats work that was accepted but has not started.</summary>
public enum ShutdownMode
{
    /// <summary>Run every accepted item, then stop the workers (what <see cref="WorkerPool.Dispose"/> does).</summary>
    Drain = 0,

    /// <summary>
    /// Never start items that are still queued: each is counted as cancelled exactly once. Items already
    /// running finish normally.
    /// </summary>
    CancelPending = 1,
}
