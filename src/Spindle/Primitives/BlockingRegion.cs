using System;

namespace Spindle;

/// <summary>
/// Marks a stretch of a work item that blocks (a synchronous wait, blocking I/O, a lock held elsewhere). Returned by
/// <see cref="WorkerPool.EnterBlockingRegion"/>; dispose it, once, on the same thread, when the blocking call returns.
/// </summary>
/// <remarks>
/// While a worker is inside a region its pool's thread target is one higher, so waiting work gets a replacement thread
/// at once instead of after starvation detection; when the region ends the target drops again and the surplus thread
/// retires after its current item. Regions nest (only the outermost counts). A region still open when its work item
/// returns is closed by the pool. Outside a pool worker the region does nothing.
/// </remarks>
public readonly struct BlockingRegion : IDisposable
{
    // The calling thread's owner of regions: a pool worker sets itself here for its thread's lifetime (see
    // SetThreadOwner); every other thread has none, and its regions are inactive.
    [ThreadStatic]
    private static IBlockingRegionOwner? t_owner;

    private readonly IBlockingRegionOwner? _worker;

    private BlockingRegion(IBlockingRegionOwner worker) => _worker = worker;

    /// <summary>Opens a region for the current thread: active on a pool worker, inactive elsewhere.</summary>
    internal static BlockingRegion Enter()
    {
        IBlockingRegionOwner? worker = t_owner;
        if (worker is null)
        {
            return default;
        }
        worker.EnterBlockingRegion();
        return new BlockingRegion(worker);
    }

    /// <summary>A pool worker's thread, as it starts (with the worker) and as it ends (with null).</summary>
    internal static void SetThreadOwner(IBlockingRegionOwner? owner) => t_owner = owner;

    /// <summary>Whether this region raised a pool's thread target (false outside a pool worker and on dedicated threads).</summary>
    public bool IsActive => _worker is not null;

    /// <summary>Ends the region. Does nothing for an inactive region or when the region was already closed.</summary>
    /// <exception cref="InvalidOperationException">Called on a thread other than the one that entered the region.</exception>
    public void Dispose()
    {
        if (_worker is null)
        {
            return;
        }
        if (!ReferenceEquals(t_owner, _worker))
        {
            throw new InvalidOperationException("A blocking region must be disposed on the thread that entered it.");
        }
        _worker.ExitBlockingRegion();
    }
}

/// <summary>A pool thread that counts blocking regions (a worker: the pool raises its thread target while one is open).</summary>
internal interface IBlockingRegionOwner
{
    /// <summary>Called on the owner's thread: a region opens.</summary>
    void EnterBlockingRegion();

    /// <summary>Called on the owner's thread: the region it opened closes.</summary>
    void ExitBlockingRegion();
}
