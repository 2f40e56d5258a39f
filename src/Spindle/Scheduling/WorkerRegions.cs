using System.Diagnostics;
using Spindle.Primitives;

namespace Spindle.Scheduling;

/// <summary>
/// One worker's blocking regions (see <see cref="BlockingRegion"/>): their nesting depth on the worker's thread, which
/// alone changes it. The thread controller counts the outermost regions of all workers; a region opened here goes to it
/// (<see cref="IWorkerThreads.EnterBlockingRegion"/>), which asks <see cref="Enter"/> whether the region is the outermost.
/// </summary>
internal sealed class WorkerRegions(Worker worker, IWorkerThreads threads) : IBlockingRegionOwner
{
    private int _depth;

    /// <summary>Whether a region is open on the worker's thread (its thread only; checked after every item).</summary>
    public bool AnyOpen => _depth != 0;

    /// <summary>Code on the worker's thread opens a blocking region: the thread controller counts it.</summary>
    public void EnterBlockingRegion() => threads.EnterBlockingRegion(worker);

    /// <summary>Code on the worker's thread closes the blocking region it opened.</summary>
    public void ExitBlockingRegion() => threads.ExitBlockingRegion(worker);

    /// <summary>The worker's thread: one more region opens; returns whether it is the outermost.</summary>
    public bool Enter()
    {
        Debug.Assert(worker.IsCurrentThread);
        return _depth++ == 0;
    }

    /// <summary>The worker's thread: a region closes; returns whether it was the outermost (false if none was open).</summary>
    public bool Exit()
    {
        Debug.Assert(worker.IsCurrentThread);
        return _depth != 0 && --_depth == 0;
    }

    /// <summary>The worker's thread, after an item that left regions open: closes them all; returns whether any was open.</summary>
    public bool CloseAll()
    {
        bool open = _depth != 0;
        _depth = 0;
        return open;
    }
}
