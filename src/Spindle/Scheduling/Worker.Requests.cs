using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;

namespace Spindle.Scheduling;

/// <summary>What other components ask of a worker besides its <see cref="Requests"/>: its thread, its deferrals, the lane it serves, queue-wait sampling.</summary>
internal sealed partial class Worker
{
    /// <summary>This worker's thread (set before it starts).</summary>
    public Thread? Thread => _life.Thread;

    /// <summary>Why the thread controller added this worker; passed on if it starts the next thread of a ramp.</summary>
    public ThreadInjectionReason InjectedFor => _life.InjectedFor;

    /// <summary>The creating thread, before the thread starts: the thread that runs <see cref="Main"/>, and why it was added.</summary>
    public void Attach(Thread thread, ThreadInjectionReason reason)
    {
        Debug.Assert(_life.Thread is null);
        _life.Thread = thread;
        _life.InjectedFor = reason;
    }

    /// <summary>
    /// This worker, on its own thread: it queued a lone local item without waking anyone; the stall monitor watches that
    /// its completed count moves on (see <see cref="WorkerRequests.OpenDeferral"/>).
    /// </summary>
    public void OpenDeferral()
    {
        Debug.Assert(IsCurrentThread);
        Requests.OpenDeferral(_record.CompletedByOwner);
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

    /// <summary>This worker's enqueue, with the queue-wait histogram listened to: whether its pacer chooses this one.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool ShouldSampleWait() => --_pacing.Wait.Countdown <= 0;

    /// <summary>This worker's enqueue was sampled at <paramref name="now"/> (see <see cref="Primitives.SamplePacer.Sampled"/>).</summary>
    public void NoteWaitSampled(long now) => _pacing.Wait.Sampled(now);
}
