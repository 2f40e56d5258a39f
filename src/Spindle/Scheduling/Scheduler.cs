using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.ExceptionServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Telemetry;
using Spindle.Threading;

namespace Spindle.Scheduling;

/// <summary>
/// The one owner of the pool's work sources: the global queue, the urgent queue (fired timers), and the local queues
/// of the workers (each worker owns its own ring and LIFO slot; the scheduler only reads them, and takes from them as
/// thieves do). It decides where an enqueue goes, what "work is visible" means, the pending count, the drain at
/// shutdown, and the admission state.
/// </summary>
/// <remarks>
/// <para>Admission state (<see cref="_state"/>: running, draining, cancelling): written only by <see cref="Close"/>,
/// which the thread controller calls under its lock when shutdown begins (it closes the global queue first, so that once
/// the state reads as shut down no enqueue from outside can still be accepted). Read on the enqueue and dispatch paths;
/// a local enqueue that raced the change put its item in the ring of a live worker, which drains it.</para>
/// <para>The narrow surface other components use to hand work in: <see cref="TryEnqueue"/> (new work and
/// continuations while running), <see cref="TryEnqueueShared"/> (wait firings), <see cref="TrySubmitUrgent"/> (timer
/// firings), and the continuation path <see cref="EnqueueContinuation"/>, which never throws.</para>
/// </remarks>
internal sealed partial class Scheduler
{
    public const int StateRunning = 0;
    public const int StateDraining = 1;
    public const int StateCancelling = 2;

    private readonly GlobalQueue _globalQueue = new();
    private readonly IdleCoordinator _idle;
    private readonly ItemRunner _runner;

    // 0 running, 1 draining, 2 cancelling: see the remarks. It sits on a line that is otherwise read-only while the
    // pool runs.
    private volatile int _state;

    // Set once by Connect, before any thread of the pool exists.
    private IWorkerThreads _threads = null!;
    private WorkerRoster _roster = null!;
    private IStallWatch _monitor = null!;
    private PoolMetrics _metrics = null!;

    public Scheduler(IdleCoordinator idle, ItemRunner runner, int? laneStarvationIntervalMs = null)
    {
        _idle = idle;
        _runner = runner;
        Sources = new WorkSources(_globalQueue, new UrgentQueue(), new LaneSet(this, laneStarvationIntervalMs));
    }

    /// <summary>The pool's work sources and the orders over them: the dispatch policy (see <see cref="WorkSources"/>).</summary>
    public WorkSources Sources { get; }

    /// <summary>The pool's lanes besides its own queue (one of the <see cref="Sources"/>).</summary>
    public LaneSet Lanes => Sources.Lanes;

    /// <summary>Fired timers, looked at before any other queue (one of the <see cref="Sources"/>).</summary>
    public UrgentQueue Urgent => Sources.Urgent;

    /// <summary>The pool's instruments (set once, in the pool's constructor, before any item is queued).</summary>
    public void ConnectMetrics(PoolMetrics metrics) => _metrics = metrics;

    public PoolMetrics Metrics => _metrics;

    public void Connect(IWorkerThreads threads, IStallWatch monitor, IOutsideRelief relief)
    {
        _threads = threads;
        _roster = threads.Roster;
        Sources.Connect(_roster, _idle);
        _monitor = monitor;
        Relief = relief;
    }

    /// <summary>The relief thread's component (set once by Connect): workers tell it when their items turn long.</summary>
    public IOutsideRelief Relief { get; private set; } = null!;

    /// <summary>
    /// Retired segments the global queue keeps through a trim (16,384 slots, 512 KiB): a pool that queues from outside
    /// in bursts of that size never allocates a segment, whatever the collector does.
    /// </summary>
    internal const int GlobalSegmentsKeptByTrim = 16;

    /// <summary>
    /// How long a queue's free list of retired segments must have gone unused before a trim after a full collection
    /// gives its segments back (see GlobalQueue.TrimRetired): 10 s. Settable for tests.
    /// </summary>
    internal long SegmentTrimIdleMs { get; set; } = 10_000;

    /// <summary>
    /// After a full collection (see RetiredSegmentTrimmer): gives back the retired segments of the global queue and of
    /// each lane, beyond what each keeps, where no backlog has used them for <see cref="SegmentTrimIdleMs"/>.
    /// </summary>
    public void TrimRetiredSegments()
    {
        long idleMs = SegmentTrimIdleMs;
        _globalQueue.TrimRetired(GlobalSegmentsKeptByTrim, idleMs);
        foreach (Lane lane in Lanes.All)
        {
            lane.TrimRetiredSegments(idleMs);
        }
    }

    /// <summary>Whether shutdown has begun (the admission state is not running).</summary>
    public bool IsShutdownStarted => _state != StateRunning;

    /// <summary>Workers parked on the idle stack (a snapshot).</summary>
    public int ParkedWorkerCount => _idle.IdleCount;

    /// <summary>Whether shutdown with <see cref="ShutdownMode.CancelPending"/> has begun.</summary>
    public bool IsCancelling => _state == StateCancelling;

    /// <summary>
    /// Caller is the thread controller, under its lock: closes the global queue, then publishes
    /// <paramref name="state"/>. Returns false when the pool was already at or past that state.
    /// </summary>
    public bool Close(int state)
    {
        Debug.Assert(state is StateDraining or StateCancelling);
        if (_state >= state)
        {
            return false;
        }
        _globalQueue.Close();
        Lanes.Close();
        _state = state;
        return true;
    }

    /// <summary>Whether the global queue holds no item (a snapshot).</summary>
    public bool GlobalQueueIsEmpty => _globalQueue.IsEmpty;

    /// <summary>Items waiting in the global queue (tests and diagnostics; a snapshot).</summary>
    public long GlobalQueueCount => _globalQueue.Count;

    /// <summary>
    /// The single enqueue path: the calling worker's local queues when <paramref name="preferLocal"/> and the caller is
    /// one of this pool's workers running an ordinary item (not a fired timer's callback, see
    /// <see cref="Worker.InTimerCallback"/>), the global queue otherwise; then wake if needed. Returns false, having queued
    /// nothing, when the pool is shutting down.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryEnqueue(in WorkItemEntry entry, bool preferLocal)
    {
        if (_metrics.WaitEnabled)
        {
            return TryEnqueueMetered(entry, preferLocal);
        }
        // A shared enqueue needs no worker: the thread-static read is left out of the outside callers' loops.
        return TryEnqueueCore(entry, preferLocal, preferLocal ? Worker.Current : null);
    }

    /// <summary>
    /// <see cref="TryEnqueue"/> while the wait metric is on: the calling thread's pacer may choose this enqueue for a
    /// sampled wait. Out of line, so that the callers' paths without the metric carry neither its code nor its struct.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TryEnqueueMetered(in WorkItemEntry entry, bool preferLocal)
    {
        Worker? current = Worker.Current;
        return PoolMetrics.ShouldSampleWait(current)
            ? TryEnqueueCore(_metrics.SampleWait(entry, lane: null, current), preferLocal, current)
            : TryEnqueueCore(entry, preferLocal, current);
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TryEnqueueCore(in WorkItemEntry entry, bool preferLocal, Worker? worker)
    {
        if (preferLocal && worker is not null && ReferenceEquals(worker.Scheduler, this) && !worker.InTimerCallback && !worker.IsExiting)
        {
            if (_state != StateRunning)
            {
                return false;
            }
            bool surplus;
            WorkerLocalQueue local = worker.Local;
            if (entry.Context is null && ReferenceEquals(entry.State, WorkItemEntry.WorkItemMarker))
            {
                surplus = local.PushToLifoSlot(entry.Callback, this);
            }
            else
            {
                if (!local.Ring.TryPush(entry, out surplus))
                {
                    local.OverflowToGlobal(entry, this);
                }
                surplus |= local.HoldsLifoItem; // the owner's own field: a plain read is current
            }
            // Someone must come for the item unless a searcher is already looking: this worker may run it next, but
            // only once its current item returns, and a forked child whose parent computes on would otherwise wait for
            // the stall monitor (milliseconds). A parked worker is woken (one wake per search: while it searches, the
            // count read here is not zero and further enqueues wake nobody); with nobody parked and a thread missing,
            // the stall monitor watches instead, as creating a thread for an item this worker may take next costs more
            // than it saves.
            if (surplus || _idle.IdleCount != 0)
            {
                _idle.WakeWorkerIfNeeded(); // does nothing while someone searches
            }
            else if (_idle.SearchingCount == 0 && _roster.IsBelowTarget)
            {
                _monitor.OpenDeferral(worker);
            }
            return true;
        }
        if (!_globalQueue.TryEnqueue(entry))
        {
            WaitForClosePublished();
            return false;
        }
        // preferLocal: false (or a caller outside the pool) asks for the item to be shared: wake a helper if needed.
        _idle.WakeWorkerForOutsideWork();
        return true;
    }

    /// <summary>
    /// The calling thread, if it is one of this pool's workers, takes back the entry it queued last to its own queue when
    /// that entry is (<paramref name="callback"/>, <paramref name="state"/>) and nobody has taken it yet (see
    /// <see cref="WorkerLocalQueue.TryTakeBackNewest"/>): a task it queued
    /// and is about to run inline (<see cref="System.Threading.Tasks.TaskScheduler"/> inlining of a queued task). Without
    /// this the entry would stay queued, holding the finished task and everything it references until a worker reached
    /// it and found the task done: a loop that queues and inlines on one worker (nested <c>Parallel.For</c>) leaves
    /// hundreds of them, which the next collections promote. Returns whether it took the entry back.
    /// </summary>
    public bool TryTakeBackNewestLocal(object callback, object state)
    {
        Worker? worker = Worker.Current;
        return worker is not null && ReferenceEquals(worker.Scheduler, this) && worker.Local.TryTakeBackNewest(callback, state);
    }

    /// <summary>
    /// Adds a lane to the dispatch rotation. Returns false, having added nothing, when shutdown has begun; like a refused
    /// enqueue, only once the shutdown's state is published (<see cref="Close"/> closes the lane set before it publishes
    /// it), so that the refused caller reads <see cref="IsShutdownStarted"/> as true.
    /// </summary>
    public bool TryAddLane(Lane lane)
    {
        if (Lanes.TryAdd(lane))
        {
            return true;
        }
        WaitForClosePublished();
        return false;
    }

    /// <summary>
    /// An enqueue found a queue closed: waits for <see cref="Close"/> to publish the state it closed the queues for, so
    /// that a caller refused because of shutdown always reads <see cref="IsShutdownStarted"/> as true. The closer holds
    /// the thread controller's lock between the two and publishes within a few instructions (and a pass over the lanes).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public void WaitForClosePublished()
    {
        var spinner = new SpinWait();
        while (_state == StateRunning)
        {
            spinner.SpinOnce(sleep1Threshold: -1);
        }
    }

    /// <summary>Queues an entry on the global queue for any worker; false (queueing nothing) when the pool is shutting down.</summary>
    public bool TryEnqueueShared(in WorkItemEntry entry)
    {
        if (!_globalQueue.TryEnqueue(entry))
        {
            return false;
        }
        _idle.WakeWorkerForOutsideWork();
        return true;
    }

    /// <summary>
    /// Queues a continuation: a callback that belongs to work the pool has already accepted (a post to the pool's
    /// SynchronizationContext, a task of its TaskScheduler). Never throws: while the pool runs it is an ordinary
    /// enqueue; during shutdown it goes to the global queue until the pool has stopped (the thread controller decides,
    /// under its lock), and after that it runs on the built-in ThreadPool.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void EnqueueContinuation(in WorkItemEntry entry, bool preferLocal)
    {
        if (!TryEnqueue(entry, preferLocal))
        {
            EnqueueContinuationDuringShutdown(entry);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void EnqueueContinuationDuringShutdown(in WorkItemEntry entry)
    {
        if (_threads.TryAcceptBeforeStop(this, entry))
        {
            _idle.WakeWorkerIfNeeded();
        }
        else
        {
            _runner.RunElsewhere(entry);
        }
    }

    /// <summary>
    /// Caller is the thread controller, under its lock, before the stop: queues a continuation whatever the admission
    /// state (the queue is closed to new work, not to this; whoever stops the pool later runs what is in it).
    /// </summary>
    public void EnqueueWhileDrainingLocked(in WorkItemEntry entry) => _globalQueue.EnqueueAlways(entry);

    /// <summary>A worker's ring overflowed: its oldest items move to the global queue, open or closed (they were accepted).</summary>
    public void EnqueueOverflow(in WorkItemEntry entry) => _globalQueue.EnqueueAlways(entry);

    /// <summary>A mark of the global queue's consumers' progress (see <see cref="GlobalQueue.HeadMark"/>).</summary>
    public GlobalQueue.Mark GlobalHeadMark => _globalQueue.HeadMark;

    /// <summary>
    /// Hands fired timers in, ahead of all ordinary work. Returns false, having taken nothing, once the pool has stopped
    /// (the caller then runs them elsewhere). The caller wakes workers for them with <see cref="WakeForUrgent"/>,
    /// outside its own lock.
    /// </summary>
    public bool TrySubmitUrgent(ReadOnlySpan<WorkItemEntry> entries) => Urgent.TryAppend(entries);

    /// <summary>Wakes workers for <paramref name="count"/> newly submitted urgent entries.</summary>
    public void WakeForUrgent(int count)
    {
        _idle.WakeForBurst(count);
        _monitor.EnsureMonitorIfNoneIdle();
    }
}
