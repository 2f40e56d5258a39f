using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's pacing of its looks outside its own queues (the looks themselves are <see cref="WorkSources.TakeForLook"/>) and of its lane items, and its place in the relief's count of long-item workers.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only: whether the pool queue's dispatch looks outside this time (see <see cref="WorkSources.TakeForLook"/>):
    /// about every <see cref="LookPacer.FairnessLookTicks"/> of work (at most every <see cref="LookPacer.FairnessInterval"/>
    /// items), or at once when the stall monitor asked (<see cref="WorkerRequests.RequestLookOutside"/>). Counts this dispatch down.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool DispatchLooksOutside() => --_pacing.Looks.Countdown <= 0 || Requests.LookOutside;

    /// <summary>
    /// Owner only, at a look that is due: false when this dispatch is the local work's turn instead (the previous one
    /// was a look that took an outside item, see <see cref="LookPacer.YieldToLocalWork"/>). Otherwise consumes the
    /// monitor's request (<paramref name="requested"/>; a request made after this is kept for the next dispatch), times
    /// the interval to the next look, and enters or leaves the relief's count of long-item workers by it.
    /// </summary>
    public bool TryBeginLook(out bool requested)
    {
        requested = Requests.LookOutside;
        if (_pacing.Looks.MayYieldToLocalWork(requested) && !HasNoLocalWork)
        {
            _pacing.Looks.YieldToLocalWork();
            return false;
        }
        if (requested)
        {
            Requests.ClearLookOutside();
        }
        if (_pacing.Looks.Look(Stopwatch.GetTimestamp(), out bool counted))
        {
            Scheduler.Relief.NoteLongItems(counted);
        }
        return true;
    }

    /// <summary>
    /// Owner only: times a lane's items, on an interval of their own fitted like the looks' (about one clock read per
    /// <see cref="LookPacer.FairnessLookTicks"/> of lane items, at most one per <see cref="LookPacer.FairnessInterval"/> items), and enters or
    /// leaves the relief's count of long-item workers by it. A worker in a turn of a lane's long items never reaches a
    /// look of the pool's queue, so without this it would never count as being in long items, and an item queued to a
    /// lane from outside would wait for its item to end while the relief slept. The pool queue's looks are not moved.
    /// </summary>
    private void TimeLaneItems()
    {
        if (_pacing.Looks.TimeLaneItems(Stopwatch.GetTimestamp(), out bool counted))
        {
            Scheduler.Relief.NoteLongItems(counted);
        }
    }

    /// <summary>Owner only: leaves the relief's count of workers in long items, if this worker is in it.</summary>
    private void LeaveLongItemCount()
    {
        if (_pacing.Looks.Leave())
        {
            Scheduler.Relief.NoteLongItems(false);
        }
    }
}
