using System;
using System.Runtime.CompilerServices;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>A worker's share of timer work: fired timers ahead of ordinary items (within a streak), and looks at the timer deadline.</summary>
internal sealed partial class Worker
{
    /// <summary>
    /// Owner only, while fired timers may be waiting: whether the next timer callback goes ahead of ordinary items, false
    /// once this worker's run of them has lasted its turn (see <see cref="TimerPacer.UrgentGoesFirst"/>).
    /// </summary>
    public bool UrgentGoesFirst() => _pacing.Timers.UrgentGoesFirst(_record.CompletedByOwner);

    /// <summary>The worker is about to run a timer callback: look at the deadline again right after it.</summary>
    public void NoteTimerCallback() => _pacing.Timers.NoteCallback(_record.CompletedByOwner);

    /// <summary>Looks at the timer deadline (<see cref="IWorkerTimers.AssistTimers"/>) and paces the next look (<see cref="TimerPacer.AfterCheck"/>).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void CheckTimers() => _pacing.Timers.AfterCheck(_services.Timers.AssistTimers());
}
