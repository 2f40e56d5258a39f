using System.Threading;

namespace Spindle.Scheduling;

/// <summary>
/// What other components ask of one worker: the searcher hand-over (the idle coordinator) and the stall monitor's
/// requests, marks and deferrals. Flags and marks they set and the worker clears, each changed only through this
/// object's methods. An object of its own, so that the lines other threads write are not the worker's hot lines.
/// </summary>
internal sealed class WorkerRequests
{
    // Set by a waker (the idle coordinator, before it signals the blocker) when it counted this worker in the searching
    // count on its behalf; cleared by this worker's search.
    private volatile bool _wokenAsSearcher;

    // Set by the stall monitor when it finds outside work waiting in the global queue while no worker is parked; cleared
    // by the worker at its next look outside (Worker.TryBeginLook) or when it takes outside work any other way
    // (WorkSources.TakeGlobalBatch). The look comes at its next dispatch of the pool's own queue whatever its item count
    // says, so a look interval learned from short items cannot hold outside work behind dozens of long ones: the wait is
    // bounded by two of the monitor's ticks plus the item in progress. A lost race (the monitor sets the flag just after
    // a look cleared it) costs one early look, never a missed one.
    private volatile bool _lookOutside;

    // Set by the stall monitor when the worker has held local work (its LIFO slot or ring) for StrandedAfterMs without
    // completing an item: it is blocked or running a long item, and the work it queued to itself waits for it. Other
    // workers that keep feeding themselves never run out of work and so never steal on their own (the pool is at its
    // thread target and nobody is parked, so the queueing woke nobody); the monitor therefore also asks every worker to
    // look outside, and a requested look steals from a stranded worker (WorkSources.TakeForLook). Cleared by the monitor
    // once the worker completes an item or its local queues are empty; the monitor keeps its own record of how long it
    // has seen the worker so.
    private volatile bool _stranded;

    // The stall monitor's deferral protocol: the worker's completed count when it queued a lone local item without
    // waking anyone; the monitor clears it (CAS, TryCloseDeferral) once the count has moved on, or wakes a helper if it
    // has not within a tick. -1: nothing deferred.
    private long _deferredAt = -1;

    /// <summary>Whether a waker counted the worker as a searcher (see <see cref="MarkWokenAsSearcher"/>).</summary>
    public bool WokenAsSearcher => _wokenAsSearcher;

    /// <summary>
    /// The idle coordinator, before it signals the worker's blocker (or before a new worker starts): it counted the
    /// worker in the searching count on its behalf, so the worker's next dispatch goes through the search, which ends that
    /// count (<see cref="ClearWokenAsSearcher"/>).
    /// </summary>
    public void MarkWokenAsSearcher() => _wokenAsSearcher = true;

    /// <summary>The worker's search: it took over the searching count a waker gave it.</summary>
    public void ClearWokenAsSearcher() => _wokenAsSearcher = false;

    /// <summary>Whether the stall monitor asked for a look outside that the worker has not made yet.</summary>
    public bool LookOutside => _lookOutside;

    /// <summary>
    /// The stall monitor: outside work waits in the global queue while no worker is parked; the worker looks at it at its
    /// next dispatch of the pool's own queue, whatever its look interval says.
    /// </summary>
    public void RequestLookOutside()
    {
        if (!_lookOutside)
        {
            _lookOutside = true; // read first: a flag already set costs its line no write
        }
    }

    /// <summary>The worker: the requested look is made, or outside work reached it another way.</summary>
    public void ClearLookOutside()
    {
        if (_lookOutside)
        {
            _lookOutside = false;
        }
    }

    /// <summary>Whether the stall monitor found the worker holding local work it does not run (a snapshot).</summary>
    public bool Stranded => _stranded;

    /// <summary>The stall monitor's judgement of the worker: stranded (its local work waits for it) or not.</summary>
    public void MarkStranded(bool stranded)
    {
        if (_stranded != stranded)
        {
            _stranded = stranded;
        }
    }

    /// <summary>The deferral the stall monitor watches: the worker's completed count when it opened one, -1 when none.</summary>
    public long DeferredAt => Volatile.Read(ref _deferredAt);

    /// <summary>
    /// The worker, on its own thread: it queued a lone local item without waking anyone at <paramref name="completed"/>
    /// completed items; the stall monitor watches that the count moves on (a full fence, so the monitor's next tick sees
    /// the deferral).
    /// </summary>
    public void OpenDeferral(long completed) => Interlocked.Exchange(ref _deferredAt, completed);

    /// <summary>The stall monitor: closes the deferral it saw as <paramref name="seen"/>, unless a newer one replaced it.</summary>
    public void TryCloseDeferral(long seen) => Interlocked.CompareExchange(ref _deferredAt, -1, seen);
}
