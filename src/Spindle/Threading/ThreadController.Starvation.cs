using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Threading;

/// <summary>The starvation boost: threads the stall monitor adds above the target while work waits, and their decay.</summary>
internal sealed partial class ThreadController
{
    /// <summary>
    /// The stall monitor asks for <paramref name="add"/> more threads than the <paramref name="threads"/> that exist:
    /// raises the boost so the target allows them. Returns how many it allowed (0 when shutting down or at the maximum).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public int RaiseStarvationBoost(int threads, int add)
    {
        lock (_lock)
        {
            if (_stopped)
            {
                return 0; // a draining pool still gets threads: its workers may wait on continuations queued meanwhile
            }
            // Raise the target from what exists now (not from the old target, which blocked workers already fill).
            add = Math.Min(add, _maxThreads - threads);
            if (add <= 0)
            {
                return 0;
            }
            _starvationBoost = Math.Max(_starvationBoost, threads + add - BaseTargetLocked());
            RecomputeTargetLocked();
            return add;
        }
    }

    /// <summary>
    /// The progress count (<see cref="WorkerProgressCount"/>) when the stall monitor last injected threads for
    /// starvation. Written by the monitor before it starts them; read by the workers it starts, which continue the ramp
    /// only while no item has completed since (see <see cref="ContinueRamp"/>).
    /// </summary>
    public long RampProgressMark
    {
        get => Volatile.Read(ref _rampProgressMark);
        set => Volatile.Write(ref _rampProgressMark, value);
    }

    /// <summary>
    /// An item has completed during a starvation ramp: lowers the boost to what the threads that exist (or are being
    /// started) already fill, so nobody starts more for this stall. The boost then decays as usual.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public void HoldStarvationBoost()
    {
        lock (_lock)
        {
            int held = Math.Max(0, _roster.Count - BaseTargetLocked());
            if (held < _starvationBoost)
            {
                _starvationBoost = held;
                RecomputeTargetLocked();
            }
        }
    }

    /// <summary>Halves the starvation boost. Returns how many threads the pool now has above its target.</summary>
    [MethodImpl(RarePath.Compile)]
    public int HalveStarvationBoost()
    {
        lock (_lock)
        {
            _starvationBoost -= (_starvationBoost + 1) / 2;
            RecomputeTargetLocked();
            return _roster.Count - _roster.Target;
        }
    }
}
