using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace Spindle.Scheduling;

/// <summary>
/// A worker's pacing (<see cref="WorkerPacing"/>): of its looks outside its own queues (the looks themselves are
/// <see cref="WorkSources.TakeForLook"/>), which also times its items for the relief (<see cref="LookPacer"/>); of its
/// timer work; of its enqueues sampled for the queue-wait histogram.
/// </summary>
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
    /// the interval to the next look (which bounds takes from the global queue too), and tells the relief the items' length.
    /// </summary>
    [MethodImpl(Primitives.RarePath.Compile)]
    public bool TryBeginLook(out bool requested)
    {
        requested = Requests.LookOutside;
        if (_pacing.Looks.MayYieldToLocalWork(requested) && !Local.IsEmpty)
        {
            _pacing.Looks.YieldToLocalWork();
            return false;
        }
        if (requested)
        {
            Requests.ClearLookOutside();
        }
        Local.LimitGlobalTakes(_pacing.Looks.Look(Stopwatch.GetTimestamp(), Scheduler.Relief));
        return true;
    }

    /// <summary>Owner only: a look took an item from outside (see <see cref="LookPacer.TookOutside"/>).</summary>
    public void NoteTookOutside() => _pacing.Looks.TookOutside();

    /// <summary>
    /// Owner only, while fired timers may be waiting: whether the next timer callback goes ahead of ordinary items, false
    /// once this worker's run of them has lasted its turn (see <see cref="TimerPacer.UrgentGoesFirst"/>).
    /// </summary>
    public bool UrgentGoesFirst() => _pacing.Timers.UrgentGoesFirst(Record.CompletedByOwner);

    /// <summary>While timers may wait, the worker is about to run a timer callback, or the ordinary item of its turn (see <see cref="TimerPacer.NoteTurn"/>).</summary>
    public void NoteTurn(bool timerCallback) => _pacing.Timers.NoteTurn(timerCallback, Record.CompletedByOwner);

    /// <summary>Looks at the timer deadline (<see cref="IWorkerTimers.AssistTimers"/>) and paces the next look (<see cref="TimerPacer.AfterCheck"/>).</summary>
    [MethodImpl(MethodImplOptions.NoInlining | Primitives.RarePath.Compile)]
    private void CheckTimers() => _pacing.Timers.AfterCheck(_services.Timers.AssistTimers());

    /// <summary>This worker's enqueue, with the queue-wait histogram listened to: whether its pacer chooses this one.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool ShouldSampleWait() => --_pacing.Wait.Countdown <= 0;

    /// <summary>This worker's enqueue was sampled at <paramref name="now"/> (see <see cref="Primitives.SamplePacer.Sampled"/>).</summary>
    public void NoteWaitSampled(long now) => _pacing.Wait.Sampled(now);
}
