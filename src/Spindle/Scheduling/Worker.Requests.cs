using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;

namespace Spindle.Scheduling;

/// <summary>What other components ask of a worker: its thread, the searcher hand-over, the stall monitor's requests and deferrals, the lane it serves, blocking regions, queue-wait sampling.</summary>
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

    /// <summary>Whether a waker counted this worker as a searcher (see <see cref="MarkWokenAsSearcher"/>).</summary>
    public bool IsWokenAsSearcher => _requests.WokenAsSearcher;

    /// <summary>
    /// The idle coordinator, before it signals this worker's blocker (or before a new worker starts): it counted this
    /// worker in the searching count on its behalf, so the worker's next dispatch goes through the search, which ends
    /// that count (<see cref="ClearWokenAsSearcher"/>).
    /// </summary>
    public void MarkWokenAsSearcher() => _requests.WokenAsSearcher = true;

    /// <summary>This worker's search: it took over the searching count a waker gave it.</summary>
    public void ClearWokenAsSearcher() => _requests.WokenAsSearcher = false;

    /// <summary>
    /// The stall monitor: outside work waits in the global queue while no worker is parked; this worker looks at it at
    /// its next dispatch of the pool's own queue, whatever its look interval says (see the field's comment).
    /// </summary>
    public void RequestLookOutside()
    {
        if (!_requests.LookOutside)
        {
            _requests.LookOutside = true; // read first: a flag already set costs its line no write
        }
    }

    /// <summary>Whether the stall monitor found this worker holding local work it does not run (a snapshot).</summary>
    public bool IsStranded => _requests.Stranded;

    /// <summary>The stall monitor's judgement of this worker: stranded (its local work waits for it) or not.</summary>
    public void MarkStranded(bool stranded)
    {
        if (_requests.Stranded != stranded)
        {
            _requests.Stranded = stranded;
        }
    }

    /// <summary>The deferral the stall monitor watches: this worker's completed count when it opened one, -1 when none.</summary>
    public long DeferredAt => Volatile.Read(ref _requests.DeferredAt);

    /// <summary>
    /// This worker, on its own thread: it queued a lone local item without waking anyone; the stall monitor watches
    /// that its completed count moves on (a full fence, so the monitor's next tick sees the deferral).
    /// </summary>
    public void OpenDeferral()
    {
        Debug.Assert(IsCurrentThread);
        Interlocked.Exchange(ref _requests.DeferredAt, _record.CompletedByOwner);
    }

    /// <summary>The stall monitor: closes the deferral it saw as <paramref name="seen"/>, unless a newer one replaced it.</summary>
    public void TryCloseDeferral(long seen) => Interlocked.CompareExchange(ref _requests.DeferredAt, -1, seen);

    /// <summary>The lane whose item this worker runs (or has just taken), null for the pool's own queue (a snapshot).</summary>
    public Lane? CurrentLane => _scope.Lane;

    /// <summary>
    /// The lane whose item the calling thread is running: a worker's (<see cref="CurrentLane"/>) or the relief thread's
    /// (<see cref="IOutsideRelief.RunningLane"/>); null on other threads and in the pool's own work.
    /// </summary>
    public static Lane? LaneOfCurrentThread => t_current?.CurrentLane ?? OutsideReliefThread.Current?.RunningLane;

    /// <summary>The lane set, on this worker's thread: the item it hands out belongs to <paramref name="lane"/>.</summary>
    public void EnterLane(Lane lane) => _scope.Lane = lane;

    /// <summary>Code on this worker's thread opens a blocking region: the thread controller counts it (see <see cref="BlockingRegion"/>).</summary>
    public void EnterBlockingRegion() => Threads.EnterBlockingRegion(this);

    /// <summary>Code on this worker's thread closes the blocking region it opened.</summary>
    public void ExitBlockingRegion() => Threads.ExitBlockingRegion(this);

    /// <summary>This worker's thread: one more blocking region opens; returns whether it is the outermost.</summary>
    public bool EnterRegion()
    {
        Debug.Assert(IsCurrentThread);
        return _scope.RegionDepth++ == 0;
    }

    /// <summary>This worker's thread: a blocking region closes; returns whether it was the outermost (false if none was open).</summary>
    public bool ExitRegion()
    {
        Debug.Assert(IsCurrentThread);
        return _scope.RegionDepth != 0 && --_scope.RegionDepth == 0;
    }

    /// <summary>This worker's thread, after an item that left regions open: closes them all; returns whether any was open.</summary>
    public bool CloseRegions()
    {
        bool open = _scope.RegionDepth != 0;
        _scope.RegionDepth = 0;
        return open;
    }

    /// <summary>This worker's enqueue, with the queue-wait histogram listened to: whether its pacer chooses this one.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool ShouldSampleWait() => --_pacing.Wait.Countdown <= 0;

    /// <summary>This worker's enqueue was sampled at <paramref name="now"/> (see <see cref="Primitives.SamplePacer.Sampled"/>).</summary>
    public void NoteWaitSampled(long now) => _pacing.Wait.Sampled(now);
}
