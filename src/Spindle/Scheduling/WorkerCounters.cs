using System.Threading;

namespace Spindle.Scheduling;

/// <summary>
/// A worker's telemetry counts: written by the worker only (a release store of the incremented value, no interlocked
/// operation), read by collections as snapshots.
/// </summary>
internal sealed class WorkerCounters
{
    private long _steals;
    private long _parks;
    private long _inlineRuns;
    private long _peerWatchSteals;

    /// <summary>Items the worker took from another worker's queues.</summary>
    public long Steals => Volatile.Read(ref _steals);

    /// <summary>Times the worker went to sleep for lack of work.</summary>
    public long Parks => Volatile.Read(ref _parks);

    /// <summary>Tasks of the pool's schedulers the worker ran inline, inside the item it was running.</summary>
    public long InlineRuns => Volatile.Read(ref _inlineRuns);

    /// <summary>Steals from a stalled peer the worker watched; part of <see cref="Steals"/>.</summary>
    public long PeerWatchSteals => Volatile.Read(ref _peerWatchSteals);

    public void CountSteal() => Volatile.Write(ref _steals, _steals + 1);

    public void CountPark() => Volatile.Write(ref _parks, _parks + 1);

    public void CountInlineRun() => Volatile.Write(ref _inlineRuns, _inlineRuns + 1);

    public void CountPeerWatchSteal()
    {
        CountSteal();
        Volatile.Write(ref _peerWatchSteals, _peerWatchSteals + 1);
    }
}
