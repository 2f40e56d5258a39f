using System.Runtime.CompilerServices;

namespace Spindle.Scheduling;

/// <summary>
/// The library's items whose queued callback is shared by many items (a Run item, a timer or wait firing, a scheduler
/// task) publish themselves while they run the caller's code, on whichever pool thread runs them, so that the stuck-item
/// detector can name the caller's delegate rather than the shared callback (see <see cref="RunningItemRecord.Owner"/>).
/// Such items do not nest on a thread.
/// </summary>
internal static class OwnedItems
{
    /// <summary>
    /// <paramref name="owner"/> starts the caller's code on the calling thread: published in the running worker's record,
    /// or the relief thread's. Returns the worker to pass to <see cref="Exit"/> when that code returns (null off the
    /// workers; elsewhere than the pool's threads nothing is published).
    /// </summary>
    public static Worker? Enter(object owner)
    {
        Worker? worker = Worker.Current;
        if (worker is not null)
        {
            worker.Record.EnterOwner(owner);
        }
        else
        {
            OutsideReliefThread.Current?.EnterOwnedItem(owner);
        }
        return worker;
    }

    /// <summary>
    /// The item that called <see cref="Enter"/> has returned: nothing keeps it alive from here. Takes what
    /// <see cref="Enter"/> returned (null off the workers, where the relief thread's owner is cleared).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static void Exit(Worker? worker)
    {
        if (worker is not null)
        {
            worker.Record.ExitOwner();
        }
        else
        {
            OutsideReliefThread.Current?.ExitOwnedItem();
        }
    }
}
