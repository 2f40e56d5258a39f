using System.Diagnostics;
using System.Threading;
using Spindle.Lanes;

namespace Spindle.Scheduling;

/// <summary>What a worker tells other components about itself (its thread, the lane it runs), and what they ask of it besides its <see cref="Requests"/>.</summary>
internal sealed partial class Worker
{
    /// <summary>Whether the calling thread is this worker's.</summary>
    public bool IsCurrentThread => ReferenceEquals(t_current, this);

    /// <summary>This worker's thread (set before it starts).</summary>
    public Thread? Thread => _life.Thread;

    /// <summary>Why the thread controller added this worker; passed on if it starts the next thread of a ramp.</summary>
    public ThreadInjectionReason InjectedFor => _life.InjectedFor;

    /// <summary>The creating thread, before the thread starts: the thread that runs <see cref="Main"/>, and why it was added.</summary>
    public void Attach(Thread thread, ThreadInjectionReason reason)
    {
        Debug.Assert(_life.Thread is null);
        _life.Attach(thread, reason);
    }

    /// <summary>This worker, on its own thread: it queued a lone local item without waking anyone; the stall monitor
    /// watches that its completed count moves on (see <see cref="WorkerRequests.OpenDeferral"/>).</summary>
    public void OpenDeferral()
    {
        Debug.Assert(IsCurrentThread);
        Requests.OpenDeferral(Record.CompletedByOwner);
    }

    /// <summary>The lane whose item this worker runs (or has just taken), null for the pool's own queue (a snapshot).</summary>
    public Lane? CurrentLane => _scope.Lane;

    /// <summary>
    /// The lane whose item the calling thread is running: a worker's (<see cref="CurrentLane"/>) or the relief thread's
    /// (<see cref="IOutsideRelief.RunningLane"/>); null on other threads and in the pool's own work.
    /// </summary>
    public static Lane? LaneOfCurrentThread => t_current?.CurrentLane ?? OutsideReliefThread.Current?.RunningLane;

    /// <summary>The lane set, on this worker's thread: the item it hands out belongs to <paramref name="lane"/>.</summary>
    public void EnterLane(Lane lane) => _scope.Lane = lane;
}
