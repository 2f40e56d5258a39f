using System;
using System.Collections.Generic;
using System.Diagnostics.Metrics;
using Spindle.Lanes;
using Spindle.Queues;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Lanes;

/// <summary>
/// A pool as a lane sees it, for tests of a lane on its own: a cancelling state to set, a cancel decision that keeps
/// every entry (as a pool keeps continuations) and runs a hook at its first call, and a record of what the lane hands
/// on to the pool.
/// </summary>
internal sealed class RecordingLaneHost : ILaneHost
{
    private static readonly Meter s_meter = new("Spindle.Tests.RecordingLaneHost");
    private static readonly Instrument s_instrument = s_meter.CreateHistogram<double>("wait");

    /// <summary>A lane of this host, with its own lane set.</summary>
    public Lane NewLane(string name, int? cap = null) =>
        new(new LaneSet(this, starvationIntervalMs: null), this, new LaneOptions { Name = name, MaxConcurrency = cap });

    /// <summary>What the lane handed on (continuations after its stop, leftovers), in order.</summary>
    public Queue<WorkItemEntry> HandedOn { get; } = new();

    /// <summary>Runs inside the first cancel decision, then is cleared.</summary>
    public Action? OnFirstDecision { get; set; }

    public int Decisions { get; private set; }

    public bool IsShutdownStarted => IsCancelling;

    public bool IsCancelling { get; set; }

    public Instrument WaitInstrument => s_instrument;

    public Lane? LaneOfCurrentThread => null;

    public bool AnyWorkerParked => false;

    public bool TryTakeHandedOn(out WorkItemEntry entry) => HandedOn.TryDequeue(out entry);

    /// <summary>The numbers of the handed-on entries (see <see cref="Unwrapped"/>).</summary>
    public List<int> HandedOnNumbers()
    {
        var numbers = new List<int>();
        foreach (WorkItemEntry entry in HandedOn)
        {
            numbers.Add(NumberOf(Unwrapped(entry)));
        }
        return numbers;
    }

    /// <summary>A stopped capped lane hands each entry on inside an item that holds its slot: the entry inside.</summary>
    public static WorkItemEntry Unwrapped(in WorkItemEntry entry) =>
        ReferenceEquals(entry.State, WorkItemEntry.WorkItemMarker) && entry.Callback is IEntryWrapper wrapper ? wrapper.WrappedEntry : entry;

    public void EnqueueContinuation(in WorkItemEntry entry, bool preferLocal) => HandedOn.Enqueue(entry);

    public bool CancelsInstead(in WorkItemEntry entry, Lane lane)
    {
        Decisions++;
        Action? hook = OnFirstDecision;
        OnFirstDecision = null;
        hook?.Invoke();
        return false;
    }

    public WorkItemEntry SampleWaitIfDue(in WorkItemEntry entry, Lane lane) => entry;

    public void WakeWorkerForOutsideWork()
    {
    }

    public void WakeWorkerIfNeeded()
    {
    }

    public void OnWorkUnattended()
    {
    }
}
