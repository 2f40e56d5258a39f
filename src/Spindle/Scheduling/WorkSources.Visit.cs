using System;
using System.Collections.Generic;
using System.Text;
using Spindle.Lanes;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>
/// One question about queued work, asked of every source in turn by <see cref="WorkSources.Visit"/>: each method sees
/// one source and returns true to end the visit (an answer is known). A struct, so that each question compiles to
/// direct calls.
/// </summary>
internal interface IWorkSourceVisitor
{
    /// <summary>Fired timers.</summary>
    bool Urgent(UrgentQueue urgent);

    /// <summary>The global queue.</summary>
    bool Global(GlobalQueue global);

    /// <summary>The lanes (the pool's own queue is not among them).</summary>
    bool Lanes(LaneSet lanes);

    /// <summary>One worker's local queue: its ring and LIFO slot.</summary>
    bool Local(Worker worker);
}

// Every question about queued work as one visit over the sources, in the order the worker's dispatch reads them.
internal sealed partial class WorkSources
{
    /// <summary>
    /// Asks <paramref name="visitor"/> about each source in turn (urgent, global, lanes, each worker's local queue)
    /// until one of its methods returns true; returns whether one did. Snapshots: the sources keep changing meanwhile.
    /// </summary>
    public bool Visit<TVisitor>(ref TVisitor visitor)
        where TVisitor : struct, IWorkSourceVisitor
    {
        if (visitor.Urgent(Urgent) || visitor.Global(_global) || visitor.Lanes(Lanes))
        {
            return true;
        }
        foreach (Worker worker in _roster.Workers)
        {
            if (visitor.Local(worker))
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>Whether any source holds an item right now.</summary>
    public bool AnyWorkVisible()
    {
        var visitor = new AnyWork(includeUrgent: true);
        return Visit(ref visitor);
    }

    /// <summary>
    /// Whether any source but the fired timers holds an item right now: accepted work and its continuations. A
    /// shutting-down pool stops once this is false and no drain hold is out (see ThreadController.TryExitForShutdown).
    /// </summary>
    public bool AnyWorkVisibleBesidesTimers()
    {
        var visitor = new AnyWork(includeUrgent: false);
        return Visit(ref visitor);
    }

    /// <summary>Whether anything is left in the sources that outlive the workers (fired timers, the global queue, the lanes).</summary>
    public bool HasLeftovers
    {
        get
        {
            var visitor = new Leftovers();
            return Visit(ref visitor);
        }
    }

    /// <summary>Accepted items that have not started (a snapshot: exact only while nobody queues or dispatches).</summary>
    public long PendingCount
    {
        get
        {
            var visitor = new Pending();
            Visit(ref visitor);
            return visitor.Count;
        }
    }

    /// <summary>
    /// Debugger support for the pool's task scheduler: visits the states of the entries queued in the pool's own queue
    /// (global, rings, slots) whose callback is <paramref name="callback"/>; a lane's scheduler visits its lane.
    /// </summary>
    public void VisitQueuedStates(Action<object?> visit, object callback)
    {
        var visitor = new QueuedStates(visit, callback);
        Visit(ref visitor);
    }

    /// <summary>For diagnostics: what each source shows (a snapshot).</summary>
    public string DescribeVisibleWork()
    {
        var visitor = new Description(new StringBuilder());
        Visit(ref visitor);
        return visitor.Text.ToString();
    }

    /// <summary>
    /// Shutdown with <see cref="ShutdownMode.CancelPending"/> has begun: takes every queued entry this thread can reach
    /// (the global queue, each lane's own cancel sweep, every worker's ring and LIFO slot as a thief) and asks
    /// <paramref name="runner"/> about each (<see cref="ItemRunner.CancelsInstead"/>, which counts
    /// what it cancels). Returns the entries that must run anyway (continuations, firings), null when none. Fired timers
    /// are left: a firing is never cancelled. Entries workers take meanwhile are decided by them: each entry is taken by
    /// exactly one party.
    /// </summary>
    public List<WorkItemEntry>? CancelQueued(ItemRunner runner)
    {
        var visitor = new Cancel(runner);
        Visit(ref visitor);
        return visitor.MustRun;
    }

    private readonly struct AnyWork(bool includeUrgent) : IWorkSourceVisitor
    {
        public bool Urgent(UrgentQueue urgent) => includeUrgent && urgent.MayBeWaiting;

        public bool Global(GlobalQueue global) => !global.IsEmpty;

        public bool Lanes(LaneSet lanes) => lanes.AnyRunnable();

        public bool Local(Worker worker) => !worker.Local.IsEmpty;
    }

    // What outlives the workers: a worker's own queues are left out (its owner drains them before it exits).
    private readonly struct Leftovers : IWorkSourceVisitor
    {
        public bool Urgent(UrgentQueue urgent) => urgent.MayBeWaiting;

        public bool Global(GlobalQueue global) => !global.IsEmpty;

        public bool Lanes(LaneSet lanes) => lanes.HasLeftovers;

        public bool Local(Worker worker) => false;
    }

    private struct Pending : IWorkSourceVisitor
    {
        public long Count;

        public bool Urgent(UrgentQueue urgent) => Add(urgent.Count);

        public bool Global(GlobalQueue global) => Add(global.Count);

        public bool Lanes(LaneSet lanes) => Add(lanes.QueuedCount);

        public bool Local(Worker worker) => Add(worker.Local.Ring.Count + (worker.Local.PeekLifoSlot() is null ? 0 : 1));

        private bool Add(long count)
        {
            Count += count;
            return false;
        }
    }

    private readonly struct QueuedStates(Action<object?> visit, object callback) : IWorkSourceVisitor
    {
        public bool Urgent(UrgentQueue urgent) => false; // timer firings, not the scheduler's tasks

        public bool Global(GlobalQueue global)
        {
            global.VisitStates(callback, visit);
            return false;
        }

        public bool Lanes(LaneSet lanes) => false; // a lane's tasks belong to the lane's scheduler

        public bool Local(Worker worker)
        {
            worker.Local.Ring.VisitStates(callback, visit);
            if (worker.Local.PeekLifoSlot() is object slotItem)
            {
                // The LIFO slot holds only work items: a task gets there inside a queue-wait sample.
                new WorkItemEntry(slotItem, WorkItemEntry.WorkItemMarker, null).VisitStateIf(callback, visit);
            }
            return false;
        }
    }

    private readonly struct Description(StringBuilder text) : IWorkSourceVisitor
    {
        public StringBuilder Text => text;

        public bool Urgent(UrgentQueue urgent)
        {
            text.Append("urgent may be waiting ").Append(urgent.MayBeWaiting);
            return false;
        }

        public bool Global(GlobalQueue global)
        {
            text.Append(", global empty ").Append(global.IsEmpty).Append(" (count ").Append(global.Count).Append(')');
            return false;
        }

        public bool Lanes(LaneSet lanes)
        {
            text.Append(", lanes ready ").Append(lanes.AnyReady).Append(", runnable ").Append(lanes.AnyRunnable());
            foreach (Lane lane in lanes.All)
            {
                if (lane.HasRunnableWork || lane.QueuedCount != 0)
                {
                    text.Append("; lane ").Append(lane.DescribeState());
                }
            }
            return false;
        }

        public bool Local(Worker worker)
        {
            text.Append("; worker #").Append(worker.Id).Append(": started ").Append(worker.Record.StartedCount)
                .Append(", woken as searcher ").Append(worker.Requests.WokenAsSearcher).Append(", exiting ").Append(worker.IsExiting)
                .Append(", stranded ").Append(worker.Requests.Stranded).Append(", ring ").Append(worker.Local.Ring.Count)
                .Append(", local work ").Append(!worker.Local.IsEmpty);
            return false;
        }
    }

    private struct Cancel(ItemRunner runner) : IWorkSourceVisitor
    {
        private readonly WorkItemEntry[] _batch = new WorkItemEntry[WorkerLocalQueue.GlobalBatchSize];

        public List<WorkItemEntry>? MustRun;

        public readonly bool Urgent(UrgentQueue urgent) => false; // a firing is never cancelled

        public bool Global(GlobalQueue global)
        {
            int taken;
            while ((taken = global.TryDequeueBatch(_batch)) > 0)
            {
                for (int i = 0; i < taken; i++)
                {
                    Decide(_batch[i]);
                    _batch[i] = default;
                }
            }
            return false;
        }

        public readonly bool Lanes(LaneSet lanes)
        {
            lanes.CancelQueuedNow(); // each lane decides and counts its own
            return false;
        }

        public bool Local(Worker worker)
        {
            while (worker.Local.Ring.TrySteal(out WorkItemEntry entry))
            {
                Decide(entry);
            }
            if (worker.Local.TryTakeLifoSlot(out WorkItemEntry next))
            {
                Decide(next);
            }
            return false;
        }

        private void Decide(in WorkItemEntry entry)
        {
            if (!runner.CancelsInstead(entry, lane: null, poolCancelling: true))
            {
                (MustRun ??= []).Add(entry);
            }
        }
    }
}
