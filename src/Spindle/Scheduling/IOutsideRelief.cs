using System;
using System.Threading;
using Spindle.Lanes;

namespace Spindle.Scheduling;

/// <summary>
/// The relief thread as the scheduling layer sees it: it hears when work is queued that no worker attends while the
/// workers are in long items, and it runs items itself. Code running on the relief thread finds it through
/// <see cref="OutsideReliefThread.Current"/> (the thread registers itself while it runs), as code on a worker finds its
/// <see cref="Worker"/>.
/// </summary>
internal interface IOutsideRelief
{
    /// <summary>The pool the relief thread belongs to.</summary>
    IPoolHost Pool { get; }

    /// <summary>The lane of the item the relief thread runs, if it is a lane's; null between items.</summary>
    Lane? RunningLane { get; }

    /// <summary>Items the relief thread has run to completion.</summary>
    long CompletedCount { get; }

    /// <summary>A worker began or stopped running long items (called at each transition only).</summary>
    void NoteLongItems(bool longItems);

    /// <summary>Work was queued for which no worker could be woken.</summary>
    void OnOutsideWorkUnattended();

    /// <summary>Publishes the library object that runs the caller's delegate under a shared callback.</summary>
    void EnterOwnedItem(object owner);

    /// <summary>The object published by <see cref="EnterOwnedItem"/> has returned.</summary>
    void ExitOwnedItem();

    /// <summary>Stops the relief thread (shutdown); returns the thread to join, or null when none was started.</summary>
    Thread? Release();
}

/// <summary>The calling thread's relief thread, set by the relief thread itself for its lifetime.</summary>
internal static class OutsideReliefThread
{
    [ThreadStatic]
    private static IOutsideRelief? t_current;

    /// <summary>The relief thread of the calling thread, or null.</summary>
    public static IOutsideRelief? Current => t_current;

    /// <summary>Called on the relief thread as it starts (with itself) and as it ends (with null).</summary>
    public static void SetCurrent(IOutsideRelief? relief) => t_current = relief;
}
