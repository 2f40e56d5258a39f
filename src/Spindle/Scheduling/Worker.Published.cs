using System;
using System.Runtime.CompilerServices;
using Spindle.Parking;

namespace Spindle.Scheduling;

/// <summary>What a worker publishes about itself: its counts, the item it runs (for the stuck-item detector and thieves).</summary>
internal sealed partial class Worker
{
    public long CompletedCount => _record.CompletedCount;

    /// <summary>This worker's telemetry counts: steals, parks, inline runs (a snapshot of each).</summary>
    public WorkerCounters Counts => _counts;

    /// <summary>Owner only: a steal succeeded.</summary>
    public void CountSteal() => _counts.CountSteal();

    /// <summary>Owner only: the worker is about to sleep.</summary>
    public void CountPark() => _counts.CountPark();

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

    /// <summary>This worker's thread: a library item with a shared callback starts the caller's code (see <see cref="OwnedItems"/>).</summary>
    public void EnterOwner(object owner) => _record.EnterOwner(owner);

    /// <summary>This worker's thread: the caller's code that <see cref="EnterOwner"/> published has returned.</summary>
    public void ExitOwner() => _record.ExitOwner();
}
