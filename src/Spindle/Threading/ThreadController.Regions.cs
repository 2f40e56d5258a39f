using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Diagnostics.Tracing;
using Spindle.Primitives;
using Spindle.Telemetry;
using Spindle.Parking;
using Spindle.Scheduling;

namespace Spindle.Threading;

/// <summary>Blocking regions: a worker that blocks lends its place, and the thread target rises until it returns.</summary>
internal sealed partial class ThreadController
{
    /// <summary>The calling worker enters a blocking region (see <see cref="WorkerPool.EnterBlockingRegion"/>).</summary>
    public void EnterBlockingRegion(Worker worker)
    {
        Debug.Assert(worker.IsCurrentThread);
        if (!worker.Regions.Enter())
        {
            return; // nested: only the outermost region counts
        }
        lock (_lock)
        {
            _blockingCount++;
            RecomputeTargetLocked();
        }
        // Waiting work gets a worker now: a parked one if any, otherwise a new thread in the place this one lends.
        if (_scheduler.Sources.AnyWorkVisible())
        {
            if (_idle.IdleCount == 0 && _idle.SearchingCount == 0)
            {
                TryAddWorker(ThreadInjectionReason.BlockingRegion);
            }
            else
            {
                _idle.WakeWorkerIfNeeded();
            }
        }
    }

    /// <summary>The calling worker leaves a blocking region; the outermost exit lowers the target again.</summary>
    public void ExitBlockingRegion(Worker worker)
    {
        Debug.Assert(worker.IsCurrentThread);
        if (!worker.Regions.Exit())
        {
            return;
        }
        LeaveOutermostRegion();
    }

    /// <summary>The outermost region of a worker closed: the target comes back down.</summary>
    private void LeaveOutermostRegion()
    {
        lock (_lock)
        {
            _blockingCount--;
            RecomputeTargetLocked();
        }
        // The surplus (if any) retires after its current item: see the worker's dispatch loop.
    }

    /// <summary>The item returned inside a blocking region it never disposed: close it, so the target comes back down.</summary>
    public void CloseAbandonedRegion(Worker worker)
    {
        if (worker.Regions.CloseAll())
        {
            LeaveOutermostRegion();
        }
    }
}
