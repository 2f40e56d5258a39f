using System.Collections.Generic;
using Spindle.Queues;

namespace Spindle.Lanes;

// The lane set across shutdown: the pool's close, its cancel sweep, the leftover sweep after its workers have exited, its
// stop, and the list of live lanes the pool shows.
internal sealed partial class LaneSet
{
    /// <summary>The lanes that have not stopped (a snapshot).</summary>
    public Lane[] LiveLanes()
    {
        Lane[] all = All;
        var live = new List<Lane>(all.Length);
        foreach (Lane lane in all)
        {
            if (!lane.HasStopped)
            {
                live.Add(lane);
            }
        }
        return [.. live];
    }

    /// <summary>Caller is the scheduler closing the pool (under the thread controller's lock): every lane's intake closes.</summary>
    public void Close()
    {
        lock (_lock)
        {
            _closed = true;
            foreach (Lane lane in _all)
            {
                lane.CloseForPool();
            }
        }
    }

    /// <summary>The pool has stopped: every lane has too.</summary>
    public void OnPoolStopped()
    {
        foreach (Lane lane in All)
        {
            lane.OnPoolStopped();
        }
    }

    /// <summary>
    /// Takes one leftover from any lane (for the sweep after the workers have exited, or the redirect after the stop).
    /// </summary>
    public bool TryTakeLeftover(out WorkItemEntry item, out Lane? lane)
    {
        foreach (Lane candidate in All)
        {
            if (candidate.TryTakeLeftover(out item))
            {
                lane = candidate;
                return true;
            }
        }
        item = default;
        lane = null;
        return false;
    }

    /// <summary>Whether any lane's queue holds an item (counting items still being published).</summary>
    public bool HasLeftovers
    {
        get
        {
            foreach (Lane lane in All)
            {
                if (lane.HasQueued)
                {
                    return true;
                }
            }
            return false;
        }
    }

    /// <summary>Cancels what every lane has queued (the pool's shutdown with CancelPending).</summary>
    public void CancelQueuedNow()
    {
        foreach (Lane lane in All)
        {
            lane.CancelQueuedNow();
        }
    }
}
