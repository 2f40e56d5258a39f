using System;
using System.Runtime.CompilerServices;
using Spindle.Parking;
using Spindle.Threading;

namespace Spindle.Scheduling;

/// <summary>What a worker publishes about itself: its counts, the item it runs (for the stuck-item detector and thieves).</summary>
internal sealed partial class Worker
{
    public long CompletedCount => _record.CompletedCount;

    /// <summary>Items this worker took from another worker's queues (a snapshot).</summary>
    public long StealCount => _counts.Steals;

    /// <summary>Times this worker went to sleep for lack of work (a snapshot).</summary>
    public long ParkCount => _counts.Parks;

    /// <summary>Steals this worker made from a stalled peer it watched (see <see cref="TakeShared"/>); part of <see cref="StealCount"/>.</summary>
    public long PeerWatchStealCount => _counts.PeerWatchSteals;

    /// <summary>Owner only: a steal succeeded.</summary>
    public void CountSteal() => _counts.CountSteal();

    /// <summary>Owner only: the worker is about to sleep.</summary>
    public void CountPark() => _counts.CountPark();

    /// <summary>
    /// Tasks of the pool's schedulers this worker ran inline, inside the item it was running (a <c>Task.Wait</c> on a task
    /// not yet started): work done that no item completion shows (a snapshot).
    /// </summary>
    public long InlineRunCount => _counts.InlineRuns;

    /// <summary>Owner only: a task ran inline.</summary>
    public void CountInlineRun() => _counts.CountInlineRun();

    public bool IsCurrentThread => ReferenceEquals(t_current, this);

    public ref Backoff Backoff => ref _backoff;

    /// <summary>Items this worker has started; one ahead of <see cref="CompletedCount"/> while it runs one (see the remarks).</summary>
    public long StartedCount => _record.StartedCount;

    /// <summary>The callback of the item this worker runs or last ran (a racy snapshot; see the remarks).</summary>
    public object? RunningCallback => _record.Callback;

    /// <summary>The library item running the caller's code on this worker right now, if any (a racy snapshot).</summary>
    public object? RunningOwner => _record.Owner;

    /// <summary>
    /// Called by a library item whose queued callback is shared by many items (a Run item, a timer or wait firing, a
    /// scheduler task) when it starts the caller's code: publishes it for the stuck-item detector, which then names the
    /// caller's delegate. Returns the worker to pass to <see cref="ExitOwnedItem"/> when that code returns, or null off
    /// the pool's workers (on the relief thread the owner is published too). Such items do not nest on a worker.
    /// </summary>
    public static Worker? EnterOwnedItem(object owner)
    {
        Worker? worker = t_current;
        if (worker is not null)
        {
            worker._record.EnterOwner(owner);
        }
        else
        {
            OutsideReliefThread.Current?.EnterOwnedItem(owner); // the relief thread is watched too; elsewhere nothing
        }
        return worker;
    }

    /// <summary>
    /// The item that called <see cref="EnterOwnedItem"/> has returned: nothing keeps it alive from here. Takes what
    /// <see cref="EnterOwnedItem"/> returned (null off the workers, where the relief thread's owner is cleared).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static void ExitOwnedItem(Worker? worker)
    {
        if (worker is not null)
        {
            worker._record.ExitOwner();
        }
        else
        {
            OutsideReliefThread.Current?.ExitOwnedItem();
        }
    }
}
