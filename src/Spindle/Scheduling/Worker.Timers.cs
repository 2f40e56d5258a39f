using System;
using System.Runtime.CompilerServices;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's share of timer work: fired timers ahead of ordinary items (within a streak), and looks at the timer deadline.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, while fired timers may be waiting: takes the next timer callback, or, when this worker's run of them
    /// has lasted its turn (<see cref="TimerPacer.UrgentGoesFirst"/>), an ordinary item first if there is one. False when neither
    /// was there (the caller goes on to its ordinary queues, which may have filled since).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TryTakeWhileTimersWait(out WorkItemEntry item)
    {
        if (!_pacing.Timers.UrgentGoesFirst(_record.CompletedByOwner) && (_services.Lanes.AnyReady ? _services.Lanes.TryTakeByPriority(new LaneTaker(this), out item) : TryTakeDefault(out item)))
        {
            return true;
        }
        if (_services.Urgent.TryTake(out item))
        {
            NoteTimerCallback();
            return true;
        }
        return false;
    }

    /// <summary>The worker is about to run a timer callback: look at the deadline again right after it.</summary>
    public void NoteTimerCallback() => _pacing.Timers.NoteCallback(_record.CompletedByOwner);

    /// <summary>Looks at the timer deadline (<see cref="IWorkerTimers.AssistTimers"/>) and paces the next look (<see cref="TimerPacer.AfterCheck"/>).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void CheckTimers() => _pacing.Timers.AfterCheck(_services.Timers.AssistTimers());
}
