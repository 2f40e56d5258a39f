using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Telemetry;
using Spindle.Queues;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle.Scheduling;

/// <summary>One worker thread: its local queues, its blocker, its counters and its dispatch loop.</summary>
/// <remarks>
/// <para>Fields are grouped by the component that writes them; no other component writes them:</para>
/// <list type="bullet">
/// <item>This worker (the dispatch loop, the owner side of the ring and the LIFO slot): <see cref="Ring"/>'s owner
/// end, <see cref="LifoSlot"/> stores, the completed count, the fairness and timer-assist state.</item>
/// <item>The idle coordinator: <see cref="WokenAsSearcher"/>.</item>
/// <item>The stall monitor: <see cref="DeferredAt"/> and <see cref="MonitorSeen"/>.</item>
/// <item>The thread controller: <see cref="Thread"/>, <see cref="InjectedFor"/>, <see cref="RegionDepth"/> (blocking
/// regions).</item>
/// <item>The stuck-item detector (on the pool's timer thread): <see cref="StuckWatch"/>.</item>
/// </list>
/// Thieves only take from the ring and the LIFO slot through their own protocols (WorkStealingRing, the slot's CAS).
/// <para>What the worker runs, for the stuck-item detector (on the pool's timer thread, every quarter threshold). Before
/// each item <see cref="RunItem"/> stores the entry's callback in <see cref="_runningCallback"/>, but only when it differs
/// from the one already there (a cached delegate or a re-queued work item, the common cases, cost a load and no GC write
/// barrier), then counts the item in <see cref="_started"/> (a release store); after the item it counts the completion
/// as before. So the worker is inside item <c>n + 1</c> exactly while the started count is ahead of the completed count
/// <c>n</c>, and that item's callback is the one published. The callback stays published between items (nothing to
/// clear per item); the worker drops it before it parks and when it exits, so an idle worker keeps nothing alive.
/// The library's items whose queued callback is shared by many items (Run items, timer and wait firings, scheduler
/// tasks) publish themselves in <see cref="_runningOwner"/> while they run (<see cref="EnterOwnedItem"/>), so that the
/// detector can name the caller's delegate; they clear it when they return. Only this worker's thread writes these
/// fields.</para>
/// <para>The detector reads the completed count, then the started count (both with acquire): if the started count is
/// ahead, item <c>n + 1</c> had started when it looked. A later look that reads the same completed count knows that item
/// has not completed since, so it has run at least the time between the two looks: the detector needs no clock read per
/// item. The callback and owner are read after the counts and kept only if the completed count has not moved meanwhile,
/// in which case no later item has started and they are that item's. The cost per item: one load, one compare and one
/// plain store of a counter; no fence, no clock.</para>
/// </remarks>
internal sealed class Worker
{
    /// <summary>
    /// The most local items a worker runs between looks at the global queue (and at its own oldest item): short items
    /// are looked past this many at a time, so the look's clock read costs a fraction of a nanosecond per item.
    /// </summary>
    internal const int FairnessInterval = 61;

    /// <summary>
    /// How much work (in Stopwatch ticks) a busy worker does between looks at the global queue: 100 µs. The number of
    /// items between looks adapts to it (see <see cref="LookOutside"/>), so an item queued from outside while every
    /// worker runs local work waits about this long, plus the rest of the items in progress, whatever their length.
    /// </summary>
    internal static readonly long FairnessLookTicks = Stopwatch.Frequency / 10_000;

    /// <summary>How long the oldest item of a worker's local ring may wait, untouched, before its owner takes it.</summary>
    internal const int OldestLocalAgeMs = 20;

    /// <summary>How many items of a lane turn run between looks at the clock, the timer deadline and the thread target.</summary>
    private const int LaneTurnCheckInterval = 16;

    /// <summary>Most items a worker takes from the global queue at once.</summary>
    internal const int GlobalBatchSize = 32;

    /// <summary>
    /// Most short spins (about 0.3 µs each) a worker waits, before it takes a batch from the global queue, for a
    /// producer it has caught up with to get a whole batch ahead (see <see cref="GlobalQueue.TryDequeueBatch"/>): a
    /// consumer at the producer's heels takes each item just after it was written, and the two threads pass the queue's
    /// cache lines back and forth for every item or two.
    /// </summary>
    /// <remarks>
    /// Measured with outside batches of 1,000 <c>Run</c> items (<c>task-run</c>) on 2 cores, two sets of 30 interleaved
    /// runs of each: medians of 5.44M and 5.37M items/s without the wait, 6.28M and 5.73M with it.
    /// </remarks>
    internal const int GlobalTakeGapWaits = 3;

    /// <summary>How many of a worker's takes from the global queue one watch of a peer lasts (see <see cref="TakeShared"/>).</summary>
    internal const int PeerWatchTakes = 16;

    [ThreadStatic]
    private static Worker? t_current;

    public readonly WorkerPool Pool;
    public readonly Scheduler Scheduler;
    public readonly ThreadController Threads;
    public readonly WorkStealingRing Ring;
    public readonly ThreadBlocker Blocker;
    public readonly int Id;
    private readonly IdleCoordinator _idle;
    private readonly UrgentQueue _urgent;
    private readonly TimerService _timers;
    private readonly ItemRunner _runner;
    private readonly WorkerPoolOptions _options;
    private readonly LaneSet _lanes;

    // Thread controller: written once by the creating thread before the thread starts.
    public Thread? Thread;

    // Idle coordinator: set by a waker (before it signals the blocker) when it counted this worker in the searching
    // count on its behalf; cleared by this worker's search.
    public volatile bool WokenAsSearcher;

    // The LIFO slot (Go's runnext): the newest IWorkItem this worker queued to itself without an ExecutionContext,
    // the item it will most likely run next. Protocol: only the owner stores a non-null value (a release store when the
    // slot is empty, an exchange when it displaces an older item into the ring); the owner and thieves take the value
    // with a CAS to null, so exactly one of them gets it. The value is a whole item (an IWorkItem has no separate
    // state), so a thief whose CAS succeeds after the owner took the object and queued the same object again has simply
    // taken that newer queueing: no ABA hazard. Taking it costs one CAS and no copy, against a fence, index arithmetic
    // and a three-reference copy for the ring.
    public PaddedReference LifoSlot;

    // Stall monitor (StallMonitor's deferral protocol): the monitor stores this worker's completed count here when the
    // worker queued a lone local item without waking anyone, and clears it (CAS) once the count has moved on, or wakes a
    // helper if it has not within a tick. -1: nothing deferred.
    public long DeferredAt = -1;

    // Stall monitor only: the DeferredAt value the monitor saw on its previous tick.
    public long MonitorSeen = -1;

    // Set by the stall monitor when it finds outside work waiting in the global queue while no worker is parked; cleared
    // by this worker at its next look outside (LookOutside) or when it takes outside work any other way
    // (TryTakeGlobalBatch). The look comes at its next dispatch of the pool's own queue whatever its item count says,
    // so a look interval learned from short items cannot hold outside work behind dozens of long ones: the wait is
    // bounded by two of the monitor's ticks plus the item in progress. A lost race (the monitor sets the flag just after
    // a look cleared it) costs one early look, never a missed one.
    public volatile bool LookOutsideRequested;

    // Set by the stall monitor when this worker has held local work (its LIFO slot or ring) for StrandedAfterMs without
    // completing an item: it is blocked or running a long item, and the work it queued to itself waits
    // for it. Other workers that keep feeding themselves never run out of work and so never steal on their own (the
    // pool is at its thread target and nobody is parked, so the queueing woke nobody); the monitor therefore also asks
    // every worker to look outside, and a requested look steals from a stranded worker (LookOutside). Cleared by the
    // monitor once the worker completes an item or its local queues are empty. StrandWatchCount and StrandWatchSince:
    // the monitor's own record (the completed count it last saw with local work present, -1 when none; the Stopwatch
    // timestamp when it first saw that count).
    public volatile bool Stranded;
    public long StrandWatchCount = -1;
    public long StrandWatchSince;

    // Thread controller, on this thread only: nesting depth of blocking regions.
    public int RegionDepth;

    // Thread controller: why this worker was added; it passes the reason on if it starts the next thread of a ramp.
    public ThreadInjectionReason InjectedFor;

    // This worker only: the lane whose item it is running (or has just taken), null for the pool's own queue. Set by
    // the lane set when it hands out a lane item, cleared after the item; read by other threads only as a snapshot.
    public Lane? CurrentLane;

    // Stuck-item detector (timer thread only).
    public StuckWatch StuckWatch = StuckWatch.New;

    // This worker's thread only (see the remarks): the callback of the item it runs or last ran (null once parked), items
    // started, and the library item that runs the caller's code right now.
    private object? _runningCallback;
    private long _started;
    private object? _runningOwner;

    private readonly WorkItemEntry[] _batch = new WorkItemEntry[GlobalBatchSize];
    // Written on every item by this worker only (read by the pool's completed count): padded so that a neighbouring
    // worker's or ring's fields never share its cache line.
    private PaddedInt64 _completed;
    // Owner-written telemetry counts (read by collections as snapshots): successful steals and parks.
    private long _steals;
    private long _parks;
    private long _inlineRuns;
    // Owner only: how the latest park ended, for the length of the next search (see IdleCoordinator.Search).
    public BurstTracker Bursts;
    // Owner only: the pace of the items timed for the run-time histogram.
    private SamplePacer _durationPacer;
    // Owner only: the pace of this worker's enqueues sampled for the queue-wait histogram (PoolMetrics.ShouldSampleWait).
    public SamplePacer WaitPacer;
    // Owner only: the current item is a fired timer's callback. What it queues (the continuations of the delays it
    // completes) goes to the global queue, in firing order, instead of this worker's LIFO ring: a burst of timers
    // would otherwise leave its first continuations at the bottom of one ring behind the last ones, and behind whatever
    // the ring's later items queue.
    public bool InTimerCallback;
    // Owner only: set before the stop hook runs. By then the worker may have left the worker list (a retirement), so
    // nobody would look at its local queues again: what the hook queues goes to the shared queue instead.
    public bool IsExiting;
    // Owner only: the completed count this worker reaches when its latest timer callback ends (so the item before the
    // one about to be taken was that callback when the count equals it), and when its current run of timer callbacks
    // began; see UrgentGoesFirst.
    private long _timerCallbackCompleted = -1;
    private long _urgentStreakStart;
    // Fairness (owner only): items left before the next look at the global queue, the adaptive number of items between
    // looks, and when the last look read the clock (see LookOutside).
    private int _fairnessCountdown = FairnessInterval;
    private int _fairnessInterval = FairnessInterval;
    private long _lastFairnessLook;
    // Owner only: the same for the timing of a lane's items (see TimeLaneItems).
    private int _laneTimingCountdown = FairnessInterval;
    private int _laneTimingInterval = FairnessInterval;
    private long _lastLaneTiming;
    private int _laneItemsSinceLook; // owner only: lane items run since the last look (see LookOutside)
    private bool _lookTookOutside;  // owner only: the last look returned an outside item (see LookOutside)
    private bool _countedLongItems; // owner only: counted in the relief's long-item workers (see NoteItemLength)
    private bool _longLookStreak;   // owner only: the previous timed look found a long item (see NoteItemLength)
    private long _bottomTop = -1;   // owner only: the ring's top index at the last fairness look
    private long _bottomSince;      // owner only: when that top index was first seen
    // Peer watch (owner only, see TakeShared): takes from the global queue left in the current watch, the watched peer,
    // and its started count when the watch began.
    private int _peerWatchCountdown = PeerWatchTakes;
    private Worker? _watchedPeer;
    private long _watchedPeerStarted;
    private long _peerWatchSteals; // written by the owner, read by anyone
    private Backoff _backoff;
    // Timer assist (owner only): items left before the next look at the timer deadline, the look's interval in items,
    // when the last look read the clock, and the worker's buffer for timers it expires itself.
    private int _timerCountdown = TimerCheckIdleInterval;
    private int _timerInterval = 1;
    private long _lastTimerCheck;
    private bool _ranTimerCallback;
    private List<TimerNode>? _expiredTimers;

    public Worker(WorkerPool pool, WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, ThreadController threads,
        TimerService timers, ItemRunner runner, int id)
    {
        Pool = pool;
        _options = options;
        Scheduler = scheduler;
        _idle = idle;
        _urgent = scheduler.Urgent;
        Threads = threads;
        _timers = timers;
        _runner = runner;
        _lanes = scheduler.Lanes;
        Id = id;
        Ring = options.LocalQueueCapacity is int capacity ? new WorkStealingRing(capacity) : new WorkStealingRing();
        Blocker = options.BlockerKind is BlockerKind kind ? ThreadBlocker.Create(kind) : ThreadBlocker.Create();
        _backoff = new Backoff((uint)HashCode.Combine(id, pool));
    }

    /// <summary>The worker running on the calling thread, or null on any other thread.</summary>
    public static Worker? Current => t_current;

    public long CompletedCount => Volatile.Read(ref _completed.Value);

    /// <summary>Items this worker took from another worker's queues (a snapshot).</summary>
    public long StealCount => Volatile.Read(ref _steals);

    /// <summary>Times this worker went to sleep for lack of work (a snapshot).</summary>
    public long ParkCount => Volatile.Read(ref _parks);

    /// <summary>Steals this worker made from a stalled peer it watched (see <see cref="TakeShared"/>); part of <see cref="StealCount"/>.</summary>
    public long PeerWatchStealCount => Volatile.Read(ref _peerWatchSteals);

    /// <summary>Owner only: a steal succeeded.</summary>
    public void CountSteal() => Volatile.Write(ref _steals, _steals + 1);

    /// <summary>Owner only: the worker is about to sleep.</summary>
    public void CountPark() => Volatile.Write(ref _parks, _parks + 1);

    /// <summary>
    /// Tasks of the pool's schedulers this worker ran inline, inside the item it was running (a <c>Task.Wait</c> on a task
    /// not yet started): work done that no item completion shows (a snapshot).
    /// </summary>
    public long InlineRunCount => Volatile.Read(ref _inlineRuns);

    /// <summary>Owner only: a task ran inline.</summary>
    public void CountInlineRun() => Volatile.Write(ref _inlineRuns, _inlineRuns + 1);

    public bool IsCurrentThread => ReferenceEquals(t_current, this);

    /// <summary>Owner only: the completed count without a volatile read.</summary>
    public long CompletedCountByOwner => _completed.Value;

    public ref Backoff Backoff => ref _backoff;

    /// <summary>Items this worker has started; one ahead of <see cref="CompletedCount"/> while it runs one (see the remarks).</summary>
    public long StartedCount => Volatile.Read(ref _started);

    /// <summary>The callback of the item this worker runs or last ran (a racy snapshot; see the remarks).</summary>
    public object? RunningCallback => Volatile.Read(ref _runningCallback);

    /// <summary>The library item running the caller's code on this worker right now, if any (a racy snapshot).</summary>
    public object? RunningOwner => Volatile.Read(ref _runningOwner);

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
            Volatile.Write(ref worker._runningOwner, owner);
        }
        else
        {
            OutsideRelief.EnterOwnedItem(owner); // the relief thread is watched too; elsewhere nothing
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
            worker._runningOwner = null;
        }
        else
        {
            OutsideRelief.ExitOwnedItem();
        }
    }

    public void Main()
    {
        t_current = this;
        ItemRunner.OnPoolThreadStarted();
        var threadState = new PoolThreadState(_options.UseBackgroundThreads);
        try
        {
            Threads.ContinueRamp(this);
            _runner.RunHook(_options.OnWorkerStarted);
            Dispatch(ref threadState);
        }
        finally
        {
            _runningCallback = null;
            IsExiting = true;
            LeaveLongItemCount();
            try
            {
                _runner.RunHook(_options.OnWorkerStopping);
            }
            finally
            {
                t_current = null;
                Threads.OnWorkerExited(this);
            }
        }
    }

    private void Dispatch(ref PoolThreadState threadState)
    {
        while (true)
        {
            BusySpellEnd end = RunBusySpell(ref threadState);
            if (end == BusySpellEnd.Budget)
            {
                continue;
            }
            if (end == BusySpellEnd.Exit)
            {
                return;
            }
            _runningCallback = null; // an idle worker keeps no item alive
            // A pace set while busy would hold through the idle spell: the first items after it are sampled.
            _durationPacer.Rewind();
            WaitPacer.Rewind();
            // The next look outside times the work after the wake, not the idle spell (which would cut the interval
            // to one item and cost a clock read per item for the first looks of every busy spell).
            _lastFairnessLook = 0;
            _lastLaneTiming = 0;
            _laneItemsSinceLook = 0;
            LeaveLongItemCount(); // a parked worker is woken for outside work: the relief need not watch for it
            if (!_idle.Park(this))
            {
                return; // shutting down and nothing left to run, or retired
            }
        }
    }

    /// <summary>
    /// How long (in Stopwatch ticks) one item must take, at two looks running, before this worker counts as being in
    /// long items for the relief thread: 200 µs, twice a look's target. Shorter items are looked past after each item
    /// anyway, so outside work waits for them no longer than about that; and a single long spell is more often this
    /// thread being descheduled than a long item.
    /// </summary>
    private static readonly long s_longItemTicks = FairnessLookTicks * 2;

    /// <summary>
    /// Owner only, at each look: enters or leaves the relief's count of workers in long items (see
    /// <see cref="OutsideRelief"/>) once two looks running found items of <see cref="s_longItemTicks"/> or more (a look
    /// that only starts the clock finds none). Only transitions touch the shared count, so short items cost nothing more.
    /// </summary>
    private void NoteItemLength(bool longItems)
    {
        bool counted = longItems && _longLookStreak;
        _longLookStreak = longItems;
        if (counted != _countedLongItems)
        {
            _countedLongItems = counted;
            Scheduler.Relief.NoteLongItems(counted);
        }
    }

    /// <summary>Owner only: leaves the relief's count of workers in long items, if this worker is in it.</summary>
    private void LeaveLongItemCount()
    {
        if (_countedLongItems)
        {
            _countedLongItems = false;
            Scheduler.Relief.NoteLongItems(false);
        }
    }

    /// <summary>How <see cref="RunBusySpell"/> ended.</summary>
    private enum BusySpellEnd
    {
        /// <summary>No work was found: the worker parks.</summary>
        NoWork,

        /// <summary><see cref="BusySpellItems"/> items ran: the caller calls again at once.</summary>
        Budget,

        /// <summary>
        /// The worker was above the thread target and retired, or the pool is shutting down and only fired timers are
        /// left: its thread ends.
        /// </summary>
        Exit,
    }

    /// <summary>Items one call of <see cref="RunBusySpell"/> runs at most before it returns.</summary>
    private const int BusySpellItems = 1024;

    /// <summary>
    /// Runs items until none is found, the thread retires, or <see cref="BusySpellItems"/> have run.
    /// </summary>
    /// <remarks>
    /// Compiled fully optimised at its first call (<see cref="MethodImplOptions.AggressiveOptimization"/>): a fresh
    /// process would otherwise run its first items through tier-0 code of this loop, then through on-stack replacement,
    /// for the first tens of milliseconds (the comparison program's <c>cold-start</c> scenario: the loop's own tier-0
    /// phase cost about a third of a cold 200,000-item chain). It gives up dynamic PGO for this one method; with it or
    /// without it, chains ran at the same steady-state throughput. The parking path, which runs once per idle spell,
    /// stays out of it in <see cref="Dispatch"/>; returning every <see cref="BusySpellItems"/> items costs one call.
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private BusySpellEnd RunBusySpell(ref PoolThreadState threadState)
    {
        Scheduler scheduler = Scheduler;
        ThreadController threads = Threads;
        for (int budget = BusySpellItems; budget > 0; budget--)
        {
            // A worker woken by an enqueue was counted as a searcher by its waker: it must go through the search, which
            // ends that count. Its ring is empty (it parked that way), so skipping TryTakeWork loses nothing.
            if ((WokenAsSearcher || !TryTakeWork(out WorkItemEntry item)) && !_idle.Search(this, out item))
            {
                return BusySpellEnd.NoWork;
            }
            if (CurrentLane is Lane lane)
            {
                RunLaneItem(lane, ref item, ref threadState);
            }
            else if (scheduler.IsCancelling && !_runner.MustRunDespiteCancel(item))
            {
                item = default;
            }
            else
            {
                RunItem(ref item, ref threadState);
            }
            // A shutting-down pool is not kept by its timers (see ThreadController.TryExitForShutdown): a worker that
            // finds only firings left after one leaves, even when they never stop coming.
            if (InTimerCallback && scheduler.IsShutdownStarted && threads.TryExitForShutdown(this))
            {
                InTimerCallback = false;
                return BusySpellEnd.Exit;
            }
            InTimerCallback = false;
            if (--_timerCountdown <= 0)
            {
                CheckTimers();
            }
            // Above the target (a blocking region ended, a starvation episode is over, the maximum was lowered): the
            // surplus retires as soon as its local queues are empty. Two plain loads per item.
            if (threads.IsAboveTarget && threads.TryRetire(this, ThreadInjectionReason.RetiredSurplus))
            {
                return BusySpellEnd.Exit;
            }
        }
        return BusySpellEnd.Budget;
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void RunItem(ref WorkItemEntry item, ref PoolThreadState threadState)
    {
        // Published for the stuck-item detector (see the remarks): the callback when it changes, then the started count.
        object callback = item.Callback;
        if (!ReferenceEquals(_runningCallback, callback))
        {
            Volatile.Write(ref _runningCallback, callback);
        }
        Volatile.Write(ref _started, _started + 1);
        if (--_durationPacer.Countdown <= 0)
        {
            RunSampledItem(ref item);
        }
        else
        {
            _runner.RunOnPoolThread(ref item);
        }
        Volatile.Write(ref _completed.Value, _completed.Value + 1);
        if (RegionDepth != 0)
        {
            Threads.CloseAbandonedRegion(this);
        }
        threadState.Reset();
    }

    /// <summary>An item the pacer chose: timed for the run-time histogram if a listener wants it (see <see cref="SamplePacer"/>).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void RunSampledItem(ref WorkItemEntry item)
    {
        PoolMetrics metrics = Pool.Metrics;
        bool timed = metrics.DurationEnabled;
        long start = timed ? Stopwatch.GetTimestamp() : 0;
        _runner.RunOnPoolThread(ref item);
        if (timed)
        {
            long end = Stopwatch.GetTimestamp();
            metrics.RecordDuration(start, end, CurrentLane);
            _durationPacer.Sampled(end);
        }
        else
        {
            _durationPacer.Idle();
        }
    }

    /// <summary>
    /// Runs (or, when the lane or the pool cancels its queued work, cancels) an item taken from <paramref name="lane"/>,
    /// and then, keeping the lane's slot, the lane's next items while nothing else competes for this worker (a turn:
    /// see <see cref="Lane"/>); then gives the slot back, whatever happened.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void RunLaneItem(Lane lane, ref WorkItemEntry item, ref PoolThreadState threadState)
    {
        int ran = 0;
        int unwatched = 0; // items the turn may still take without looking for a gap (see TakeNextInTurn)
        try
        {
            long wantedSince = 0;
            while (true)
            {
                if (lane.IsCancelling && !_runner.MustRunDespiteCancel(item, lane, byPool: Scheduler.IsCancelling))
                {
                    item = default;
                }
                else
                {
                    RunItem(ref item, ref threadState);
                    ran++;
                    _laneItemsSinceLook++;
                    // Lane items are timed on their own interval (see TimeLaneItems), so a worker whose lane items are
                    // long enters the relief's count of long-item workers; the pool queue's looks keep theirs.
                    if (--_laneTimingCountdown <= 0)
                    {
                        TimeLaneItems();
                    }
                }
                if (_urgent.MayBeWaiting || !_lanes.IsAloneInTurn(lane, this))
                {
                    break;
                }
                // The duties of the dispatch loop: the timer deadline every few items, and the end of the turn once
                // lower classes have had work waiting (their minimum share), or this worker has been surplus, for a
                // millisecond. Checked after every item, so a turn of long items ends after the first item that ends
                // a millisecond later; the clock is read only while something else wants this worker.
                if ((ran & (LaneTurnCheckInterval - 1)) == 0 && (_timerCountdown -= LaneTurnCheckInterval) <= 0)
                {
                    CheckTimers();
                }
                if (Threads.IsAboveTarget || _lanes.IsLowerWorkWaiting(lane, this))
                {
                    long now = LaneClock.Now;
                    if (wantedSince == 0)
                    {
                        wantedSince = now;
                    }
                    else if (now - wantedSince >= LaneClock.TurnYield)
                    {
                        break;
                    }
                }
                if (!TakeNextInTurn(lane, ref unwatched, out item) && !WaitBrieflyInTurn(lane, out item))
                {
                    break;
                }
            }
        }
        finally
        {
            CurrentLane = null;
            if (lane.OnTurnDone(ran))
            {
                _lanes.OnSlotFreedWithWork();
            }
        }
    }

    /// <summary>
    /// How many items past the head a turn wants published before it takes the next item at its producer's heels, and
    /// how many it then takes without looking again (see <see cref="TakeNextInTurn"/>). Two items share a cache line of
    /// the lane's queue, so eight are four lines.
    /// </summary>
    private const int LaneTurnGap = 8;

    /// <summary>Most waits of <c>Thread.SpinWait(8)</c> (about 0.3 µs each on the 2-core VM) a turn spends for a gap.</summary>
    private const int LaneTurnGapWaits = 8;

    /// <summary>
    /// Takes the lane's next item in a turn, keeping a small distance from a producer that is queueing right now.
    /// </summary>
    /// <remarks>
    /// <para>A turn that runs short items catches up with a producer that feeds the lane from another thread: it then
    /// takes each item just after it was published. Each take reads the slot's cache line and frees the slot, and the
    /// producer's next write into the same line has to fetch it back, so the two threads pass one line back and forth
    /// for every item or two. So when the next
    /// item is there but the item <see cref="LaneTurnGap"/> positions further is not yet, the turn waits a moment (at
    /// most <see cref="LaneTurnGapWaits"/> short spins, about 2.5 µs here) for the producer to get that far ahead, and
    /// then takes the next <see cref="LaneTurnGap"/> items without looking again, whether the gap came or not: lines
    /// the producer has finished with (as it does, without waiting, when the gap is already there). It stops waiting after the first spin in which no new item was published (a
    /// burst of a few items, not a producer at work). The looks read slots near the head (never the queue's tail), and
    /// spinning touches nothing shared.</para>
    /// <para>The cost: an item that waits behind fewer than <see cref="LaneTurnGap"/> others in a running turn may start
    /// up to one spin (about 0.3 µs here) later when nothing more is being queued, and up to about 2.5 µs later while a
    /// producer is, at most once per <see cref="LaneTurnGap"/> items. An empty queue is not waited on here (the turn's
    /// <see cref="WaitBrieflyInTurn"/> polls for a next item as before), so a lane fed item by item with pauses between
    /// them takes each as soon as it is seen, and the turn-ending checks still run after every item.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static bool TakeNextInTurn(Lane lane, ref int unwatched, out WorkItemEntry item)
    {
        if (unwatched > 0)
        {
            unwatched--;
        }
        else if (lane.IsPublishedAhead(0))
        {
            // With the gap already there (a backlog), the next items are lines the producer has finished with too:
            // one look per LaneTurnGap items, not one per item.
            if (!lane.IsPublishedAhead(LaneTurnGap))
            {
                lane.WaitForGap(LaneTurnGap, LaneTurnGapWaits);
            }
            unwatched = LaneTurnGap - 1;
        }
        return lane.TryTakeNextInTurn(out item);
    }

    /// <summary>Spins of a lane turn that found the lane's queue empty before it gives the slot back.</summary>
    private const int LaneTurnSpins = 32;

    /// <summary>
    /// A turn found the lane's queue empty: keeps the slot for a few microseconds in case the producer is about to queue
    /// the next item (a strand fed from another thread usually is), as long as nothing else competes for this worker.
    /// Giving the slot back at once would make the producer's next enqueue mark the lane ready and wake a worker.
    /// </summary>
    /// <remarks>
    /// It polls by trying to dequeue, which reads the head's slot and never the queue's tail, so the waiting worker does
    /// not pull the line every enqueue writes away from the producer.
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool WaitBrieflyInTurn(Lane lane, out WorkItemEntry item)
    {
        for (int i = 0; i < LaneTurnSpins; i++)
        {
            Thread.SpinWait(16);
            if (lane.TryTakeNextInTurn(out item))
            {
                return true;
            }
            if (_urgent.MayBeWaiting || !_lanes.IsAloneInTurn(lane, this))
            {
                break;
            }
        }
        item = default;
        return false;
    }

    /// <summary>How long a worker runs timer callbacks back to back before it gives one ordinary item its turn: 100 µs.</summary>
    internal static readonly long UrgentStreakTicks = Stopwatch.Frequency / 10_000;

    /// <summary>
    /// Whether fired timers still go ahead of this worker's ordinary work. They do, except once the worker has run
    /// timer callbacks back to back for <see cref="UrgentStreakTicks"/>: then one ordinary item (local, a lane's or the
    /// global queue's) goes first, and a new run begins after it. So a burst of due timers, however long, delays the
    /// work queued behind it by at most about 100 µs of callbacks plus one item at a time per worker, instead of the
    /// whole burst, and the burst itself is slowed by one ordinary item per 100 µs. One clock read per timer callback
    /// taken; ordinary items pay nothing (the caller looks here only while timers wait).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool UrgentGoesFirst()
    {
        long now = Stopwatch.GetTimestamp();
        if (_completed.Value != _timerCallbackCompleted)
        {
            _urgentStreakStart = now;
            return true;
        }
        if (now - _urgentStreakStart < UrgentStreakTicks)
        {
            return true;
        }
        _urgentStreakStart = now; // the next run is timed from here, whether an ordinary item or the search comes next
        return false;
    }

    /// <summary>
    /// Owner only, while fired timers may be waiting: takes the next timer callback, or, when this worker's run of them
    /// has lasted its turn (<see cref="UrgentGoesFirst"/>), an ordinary item first if there is one. False when neither
    /// was there (the caller goes on to its ordinary queues, which may have filled since).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TryTakeWhileTimersWait(out WorkItemEntry item)
    {
        if (!UrgentGoesFirst() && (_lanes.AnyReady ? _lanes.TryTakeByPriority(this, out item) : TryTakeDefault(out item)))
        {
            return true;
        }
        if (_urgent.TryTake(out item))
        {
            NoteTimerCallback();
            return true;
        }
        return false;
    }

    /// <summary>The worker is about to run a timer callback: look at the deadline again right after it.</summary>
    public void NoteTimerCallback()
    {
        _timerCallbackCompleted = _completed.Value + 1;
        _ranTimerCallback = true;
        InTimerCallback = true;
        _timerCountdown = 1;
    }

    /// <summary>Items between looks at the timer deadline while the pool has no timer scheduled.</summary>
    private const int TimerCheckIdleInterval = 64;

    /// <summary>How much work (in Stopwatch ticks) a worker aims to do between looks at the timer deadline: 100 µs.</summary>
    private static readonly long s_timerCheckTicks = Stopwatch.Frequency / 10_000;

    /// <summary>
    /// Looks at the timer deadline (<see cref="TimerService.AssistTimers"/>) and sets how many items to run before the
    /// next look: about <see cref="s_timerCheckTicks"/> worth, judged from the time the last interval took, so that short
    /// items pay a clock read per hundreds of items and 1 ms items a look after each.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void CheckTimers()
    {
        long now = _timers.AssistTimers(ref _expiredTimers);
        if (now == 0)
        {
            _lastTimerCheck = 0;
            _timerCountdown = TimerCheckIdleInterval; // no timer: no clock read
            return;
        }
        if (_ranTimerCallback)
        {
            // Timer callbacks are short and say nothing about the items around them: judging the interval from them
            // would stretch it across the next long items (a burst of callbacks followed by 1 ms items once left the
            // next look hundreds of milliseconds away). Look after every item until ordinary work is timed again.
            _ranTimerCallback = false;
            _timerInterval = 1;
        }
        else if (_lastTimerCheck != 0)
        {
            // Shrinks at once, grows at most fourfold per look, so items that turn long are noticed soon.
            long elapsed = now - _lastTimerCheck;
            long interval = elapsed <= 0 ? 4L * _timerInterval : _timerInterval * s_timerCheckTicks / elapsed;
            _timerInterval = (int)Math.Clamp(interval, 1, Math.Min(4L * _timerInterval, 1024));
        }
        _lastTimerCheck = now;
        _timerCountdown = _timerInterval;
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TryTakeWork(out WorkItemEntry item)
    {
        // Timer callbacks first: one load of a line written only when timers fire.
        if (_urgent.MayBeWaiting && TryTakeWhileTimersWait(out item))
        {
            return true;
        }
        if (_lanes.AnyReady)
        {
            return _lanes.TryTakeByPriority(this, out item);
        }
        return TryTakeDefault(out item);
    }

    /// <summary>Owner only: takes the next item of the pool's own queue (the default lane): local first, the global queue with fairness.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeDefault(out WorkItemEntry item)
    {
        if ((--_fairnessCountdown <= 0 || LookOutsideRequested) && LookOutside(out item))
        {
            return true;
        }
        return TryTakeLifoSlot(out item) || Ring.TryPop(out item) || TakeShared(out item);
    }

    /// <summary>
    /// Owner only, with its own queues empty: takes a batch from the global queue, unless the watch of a peer shows that
    /// peer stalled with items in its ring; then it takes half of those instead.
    /// </summary>
    /// <remarks>
    /// <para>Why: a worker takes up to <see cref="GlobalBatchSize"/> items from the global queue at once and keeps the
    /// rest in its ring. If the operating system deschedules it (a time slice of several milliseconds when the cores
    /// have more runnable threads than cores), those items wait. A searching worker would steal them, but a busy one
    /// under a steady inflow from outside (socket completions) always finds the global queue first, so they waited the
    /// whole slice: round trips of 4-6 ms among round trips of under 1 ms.</para>
    /// <para>The watch costs one read of a peer's started count per <see cref="PeerWatchTakes"/> takes: at the start of
    /// a watch this worker notes the peer's count; at its end, a peer that has started nothing meanwhile while its ring
    /// holds items (through <see cref="MayStealFrom"/>, so a lone item is left to a running owner) gives half of them,
    /// and stays watched; otherwise the watch moves on to the next worker. Every peer is thus looked at within
    /// <see cref="PeerWatchTakes"/> takes times the number of workers. A peer that runs one long item loses ring items
    /// that waited behind it, which is what a thief would do anyway.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TakeShared(out WorkItemEntry item)
    {
        if (--_peerWatchCountdown <= 0 && EndPeerWatch(out item))
        {
            return true;
        }
        return TryTakeGlobalBatch(out item);
    }

    /// <summary>The end of a watch (see <see cref="TakeShared"/>): steals from the peer if it stalled, else watches the next one.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool EndPeerWatch(out WorkItemEntry item)
    {
        _peerWatchCountdown = PeerWatchTakes;
        Worker? peer = _watchedPeer;
        if (peer is not null
            && Volatile.Read(ref peer._started) == _watchedPeerStarted
            && !peer.Ring.IsEmpty
            && peer.MayStealFrom()
            && peer.Ring.StealHalfInto(Ring, out item) != 0)
        {
            CountSteal();
            Volatile.Write(ref _peerWatchSteals, _peerWatchSteals + 1);
            return true; // the same peer stays watched, from the same count: if it is still stalled, the next watch takes more
        }
        Worker[] workers = Threads.Workers;
        Worker? next = null;
        if (workers.Length > 1)
        {
            int index = Array.IndexOf(workers, peer) + 1; // -1 (none yet, or it left the list) starts at the first
            next = workers[index % workers.Length];
            if (next == this)
            {
                next = workers[(index + 1) % workers.Length];
            }
        }
        _watchedPeer = next;
        _watchedPeerStarted = next is null ? 0 : Volatile.Read(ref next._started);
        item = default;
        return false;
    }

    /// <summary>
    /// Owner only, about every <see cref="FairnessLookTicks"/> of work (at most every <see cref="FairnessInterval"/>
    /// items, or at once when the stall monitor asks, see <see cref="LookOutsideRequested"/>): the far end of the LIFO
    /// ring once it has aged, then outside work, so neither the ring's oldest items nor the global queue can be starved
    /// by a worker that keeps re-queueing to itself. Sets the number of items until the next look.
    /// </summary>
    /// <remarks>
    /// <para>The interval is timed, not counted, so the wait of outside work is bounded in time whatever the local items'
    /// length: one clock read per look, and the next interval is the number of items that took about
    /// <see cref="FairnessLookTicks"/> in the last one (it shrinks at once, and grows at most fourfold per look, so
    /// items that turn long are noticed soon). Items of 20 µs get a look every 5 items, items of 1 ms after each item,
    /// trivial items every <see cref="FairnessInterval"/>.</para>
    /// <para>While the LIFO slot holds this worker's next item, or its ring holds items, the look takes one outside item,
    /// not a batch. A batch's rest would go into the ring, which the owner reaches only when the slot is empty, and a
    /// chain that re-queues itself through the slot never leaves it empty, so those items would wait for the ageing rule
    /// below, one per <see cref="OldestLocalAgeMs"/>, while the rest of the outside queue grew behind them. And a batch
    /// pushed onto a ring that still holds the previous batch's rest is popped first (the owner pops the newest), so
    /// under a steady inflow from outside (socket completions) the older items sank to the ring's far end and waited
    /// there for as long as the inflow lasted: round trips of 20-100 ms among 1-2 ms ones. Left in the global queue,
    /// they go to whichever worker looks next, in queue order.</para>
    /// <para>The ring's bottom is taken only once nobody has taken from it (its top index has not moved) for
    /// <see cref="OldestLocalAgeMs"/>, so a self-requeue loop cannot starve it; it comes before outside work, which under
    /// a steady inflow is never missing, so checked after it the aged item waited for the inflow to stop. Not on every
    /// look: taking the oldest item of a tree-shaped workload (tasks spawning tasks) opens a whole new subtree, and done
    /// every 61 items it made skynet's live frontier breadth-first, turning its gen0 collections into gen2 ones.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool LookOutside(out WorkItemEntry item)
    {
        bool requested = LookOutsideRequested;
        if (_lookTookOutside && _fairnessInterval == 1 && !requested && !HasNoLocalWork)
        {
            // The previous dispatch was a look (the interval is one item) that took an outside item, and local work
            // waits: this dispatch is the local work's turn. Items long enough to make every dispatch a look (a chain
            // that re-queues itself outside, as a mailbox that used its throughput does) would otherwise be taken ahead
            // of local work at every look, for as long as the chain lasted. Two items ran by the next look: its
            // interval's arithmetic counts them.
            _lookTookOutside = false;
            _fairnessInterval = 2;
            _fairnessCountdown = 1;
            item = default;
            return false;
        }
        _lookTookOutside = false;
        if (requested)
        {
            LookOutsideRequested = false; // before the look: a request made after it is kept for the next dispatch
        }
        long now = Stopwatch.GetTimestamp();
        long elapsed = now - _lastFairnessLook;
        int interval = _fairnessInterval;
        bool longItems = false;
        if (_lastFairnessLook != 0 && elapsed > 0)
        {
            // The items run since the last look (fewer than the interval when the monitor asked for this look early).
            // After a park the first look only starts the clock (see Dispatch).
            // Lane items run since then count for the items' length (not for the interval, which counts dispatches
            // that reach the pool's queue): a worker that serves lanes reaches this look only now and then.
            long ran = Math.Max(1, interval - _fairnessCountdown);
            interval = NextLookInterval(elapsed, ran, ran + _laneItemsSinceLook, interval, out longItems);
        }
        _laneItemsSinceLook = 0;
        NoteItemLength(longItems);
        _fairnessInterval = interval;
        _fairnessCountdown = interval;
        _lastFairnessLook = now;
        // A look the monitor asked for serves a stranded worker's work first: it has waited longest (StrandedAfterMs
        // and more), and under a steady inflow from outside it would never be reached after the global queue.
        if (requested && TryStealFromStranded(out item))
        {
            return true;
        }
        if (TakeAgedBottom(out item))
        {
            return true;
        }
        if (Volatile.Read(ref LifoSlot.Value) is not null || !Ring.IsEmpty)
        {
            if (Scheduler.TryDequeueGlobalBatch(_batch.AsSpan(0, 1)) != 0)
            {
                item = _batch[0];
                _batch[0] = default;
                _lookTookOutside = true;
                return true;
            }
        }
        else if (TryTakeGlobalBatch(out item))
        {
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>
    /// The number of counted items until the next timing: as many as took about <see cref="FairnessLookTicks"/> in the
    /// last <paramref name="elapsed"/> ticks, in which <paramref name="ran"/> counted items ran (at most four times the
    /// previous <paramref name="interval"/>, at most <see cref="FairnessInterval"/>); <paramref name="longItems"/>: the
    /// <paramref name="itemsRun"/> items run in all took <see cref="s_longItemTicks"/> or more each.
    /// </summary>
    private static int NextLookInterval(long elapsed, long ran, long itemsRun, int interval, out bool longItems)
    {
        longItems = elapsed >= itemsRun * s_longItemTicks;
        return (int)Math.Clamp(ran * FairnessLookTicks / elapsed, 1, Math.Min(4L * interval, FairnessInterval));
    }

    /// <summary>
    /// Owner only: times a lane's items, on an interval of their own fitted like the looks' (about one clock read per
    /// <see cref="FairnessLookTicks"/> of lane items, at most one per <see cref="FairnessInterval"/> items), and enters or
    /// leaves the relief's count of long-item workers by it. A worker in a turn of a lane's long items never reaches a
    /// look of the pool's queue, so without this it would never count as being in long items, and an item queued to a
    /// lane from outside would wait for its item to end while the relief slept. The pool queue's looks are not moved.
    /// </summary>
    private void TimeLaneItems()
    {
        long now = Stopwatch.GetTimestamp();
        long elapsed = now - _lastLaneTiming;
        int interval = _laneTimingInterval;
        if (_lastLaneTiming != 0 && elapsed > 0)
        {
            // After a park the first timing only starts the clock (see Dispatch), and says nothing of the items.
            long ran = Math.Max(1, interval - _laneTimingCountdown);
            interval = NextLookInterval(elapsed, ran, ran, interval, out bool longItems);
            NoteItemLength(longItems);
        }
        _laneTimingInterval = interval;
        _laneTimingCountdown = interval;
        _lastLaneTiming = now;
    }

    /// <summary>
    /// A look the stall monitor asked for: takes one item another worker queued to itself before it blocked or began a
    /// long item (see <see cref="Stranded"/>): its LIFO slot first (the item it queued last, typically the one it waits
    /// for), else the oldest of its ring. One item, run now: this worker is busy with work of its own, and more items
    /// pushed into its ring would wait there behind its own chain; the monitor asks again at its next tick while the
    /// victim stays stranded.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TryStealFromStranded(out WorkItemEntry item)
    {
        foreach (Worker victim in Threads.Workers)
        {
            if (victim == this || !victim.Stranded || victim.HasNoLocalWork || !victim.MayStealFrom())
            {
                continue;
            }
            if (victim.TryTakeLifoSlot(out item) || (!victim.Ring.IsEmpty && victim.Ring.TrySteal(out item)))
            {
                CountSteal();
                return true;
            }
        }
        item = default;
        return false;
    }

    /// <summary>Owner only: takes the ring's oldest item if it has waited at the bottom for <see cref="OldestLocalAgeMs"/>.</summary>
    private bool TakeAgedBottom(out WorkItemEntry item)
    {
        long top = Ring.Top;
        long now = Environment.TickCount64;
        if (Ring.IsEmpty)
        {
            // No bottom to age. -1 is an index the ring never has, so the first look that finds items starts their
            // clock: keeping the empty ring's top here made items pushed later look as old as this look.
            _bottomTop = -1;
        }
        else if (top != _bottomTop)
        {
            _bottomTop = top;
            _bottomSince = now;
        }
        else if (now - _bottomSince >= OldestLocalAgeMs && Ring.TrySteal(out item))
        {
            _bottomTop = Ring.Top;
            _bottomSince = now;
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>Owner or thief: takes the LIFO slot's item.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeLifoSlot(out WorkItemEntry item)
    {
        object? next = Volatile.Read(ref LifoSlot.Value);
        if (next is not null && Interlocked.CompareExchange(ref LifoSlot.Value, null, next) == next)
        {
            item = new WorkItemEntry(next, WorkItemEntry.WorkItemMarker, null);
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>How long a thief leaves a running owner's lone queued item to its owner: 3 µs.</summary>
    private static readonly long s_stealGraceTicks = Math.Max(1, Stopwatch.Frequency * 3 / 1_000_000);

    /// <summary>
    /// Thief: whether this worker's queued items may be taken now. An owner that is running an item and holds exactly
    /// one queued item (in its LIFO slot, or alone in its ring) will most likely run that item next, within nanoseconds
    /// in a chain of short items, and a thief taking it would move the chain from core to core. Such an item is left to
    /// its owner until the owner has started nothing for a grace period (<see cref="s_stealGraceTicks"/>): its current
    /// item computes or blocks on, as a parent that forked a child does, and the child is taken. Surplus items (more
    /// than one) and the items of an owner between items may be taken at once.
    /// </summary>
    /// <remarks>
    /// A heuristic over snapshots of the owner's counts and queues: it decides only when a thief tries, never whether
    /// the take is safe (the ring's and the slot's own protocols do that), so a stale read costs at most a later steal.
    /// </remarks>
    public bool MayStealFrom()
    {
        long started = Volatile.Read(ref _started);
        if (started == Volatile.Read(ref _completed.Value))
        {
            return true; // between items
        }
        int queued = Ring.Count + (Volatile.Read(ref LifoSlot.Value) is null ? 0 : 1);
        if (queued != 1)
        {
            return queued > 1;
        }
        long deadline = Stopwatch.GetTimestamp() + s_stealGraceTicks;
        while (Volatile.Read(ref _started) == started)
        {
            if (Stopwatch.GetTimestamp() >= deadline)
            {
                return true;
            }
            Thread.SpinWait(8);
        }
        return false; // the owner moved on: it has most likely taken the item itself
    }

    /// <summary>Whether this worker holds no queued item (ring and LIFO slot; a snapshot).</summary>
    public bool HasNoLocalWork => Volatile.Read(ref LifoSlot.Value) is null && Ring.IsEmpty;

    /// <summary>
    /// Owner only: queues an <see cref="IWorkItem"/> without ExecutionContext into the LIFO slot, moving the item it
    /// displaces into the ring. Returns whether this worker now holds more than the new item (work to share).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool PushToLifoSlot(object workItem)
    {
        if (LifoSlot.Value is null)
        {
            // Only the owner stores non-null, so the slot stays empty until the store below.
            Volatile.Write(ref LifoSlot.Value, workItem);
            return !Ring.IsEmpty;
        }
        object? displaced = Interlocked.Exchange(ref LifoSlot.Value, workItem);
        if (displaced is not null)
        {
            var entry = new WorkItemEntry(displaced, WorkItemEntry.WorkItemMarker, null);
            if (!Ring.TryPush(entry))
            {
                OverflowToGlobal(entry);
            }
        }
        return true;
    }

    /// <summary>
    /// Takes a batch from the global queue, after giving a producer this worker has caught up with a moment to get a
    /// batch ahead (<see cref="GlobalTakeGapWaits"/>): returns the first, keeps the rest in the ring (where they can be
    /// stolen).
    /// </summary>
    public bool TryTakeGlobalBatch(out WorkItemEntry item)
    {
        int room = Ring.Capacity - Ring.Count;
        int want = Math.Min(_batch.Length, room + 1);
        int taken = Scheduler.TryDequeueGlobalBatch(_batch.AsSpan(0, want), GlobalTakeGapWaits);
        if (taken == 0)
        {
            item = default;
            return false;
        }
        item = _batch[0];
        _batch[0] = default;
        if (LookOutsideRequested)
        {
            // Outside work reached this worker by another path (its search, or its own queues running dry): the
            // request is met. Kept, it would send the next dispatch outside again, ahead of the worker's local items.
            LookOutsideRequested = false;
        }
        // Pushed newest first, so that the owner's LIFO pops run the batch in queue order.
        if (taken > 1)
        {
            Ring.PushRangeReversed(_batch.AsSpan(1, taken - 1));
        }
        if (taken == want && taken > 1)
        {
            // A full batch: the global queue may hold more, and others can steal the rest of this batch. A partial
            // batch emptied the queue, so this worker alone can run what it took.
            _idle.WakeWorkerIfNeeded();
        }
        return true;
    }

    /// <summary>Called by the owner when its ring is full: half of it moves to the global queue, then the item goes in.</summary>
    public void OverflowToGlobal(in WorkItemEntry entry)
    {
        for (int i = Ring.Capacity / 2; i > 0 && Ring.TrySteal(out WorkItemEntry oldest); i--)
        {
            Scheduler.EnqueueOverflow(oldest);
        }
        if (!Ring.TryPush(entry))
        {
            Scheduler.EnqueueOverflow(entry);
        }
    }
}
