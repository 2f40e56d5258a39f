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
/// <item>The idle coordinator: <see cref="IsWokenAsSearcher"/>.</item>
/// <item>The stall monitor: <see cref="DeferredAt"/>, <see cref="IsStranded"/>, <see cref="IsLookOutsideRequested"/>.</item>
/// <item>The thread controller: <see cref="Thread"/>, <see cref="InjectedFor"/>, <see cref="EnterRegion"/> (blocking
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
internal sealed partial class Worker
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

    public readonly IPoolHost Pool;
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

    // Set once by the creating thread before the thread starts (see Attach).
    private Thread? _thread;
    private ThreadInjectionReason _injectedFor;

    // Set by a waker (the idle coordinator, before it signals the blocker) when it counted this worker in the searching
    // count on its behalf; cleared by this worker's search. See Mark_wokenAsSearcher.
    private volatile bool _wokenAsSearcher;

    // The LIFO slot (Go's runnext): the newest IWorkItem this worker queued to itself without an ExecutionContext,
    // the item it will most likely run next. Protocol: only the owner stores a non-null value (a release store when the
    // slot is empty, an exchange when it displaces an older item into the ring); the owner and thieves take the value
    // with a CAS to null, so exactly one of them gets it. The value is a whole item (an IWorkItem has no separate
    // state), so a thief whose CAS succeeds after the owner took the object and queued the same object again has simply
    // taken that newer queueing: no ABA hazard. Taking it costs one CAS and no copy, against a fence, index arithmetic
    // and a three-reference copy for the ring.
    public PaddedReference LifoSlot;

    // The stall monitor's deferral protocol (see OpenDeferral): this worker's completed count when it queued a lone
    // local item without waking anyone; the monitor clears it (CAS, TryCloseDeferral) once the count has moved on, or
    // wakes a helper if it has not within a tick. -1: nothing deferred.
    private long _deferredAt = -1;

    // Set by the stall monitor when it finds outside work waiting in the global queue while no worker is parked; cleared
    // by this worker at its next look outside (LookOutside) or when it takes outside work any other way
    // (TryTakeGlobalBatch). The look comes at its next dispatch of the pool's own queue whatever its item count says,
    // so a look interval learned from short items cannot hold outside work behind dozens of long ones: the wait is
    // bounded by two of the monitor's ticks plus the item in progress. A lost race (the monitor sets the flag just after
    // a look cleared it) costs one early look, never a missed one.
    private volatile bool _lookOutsideRequested;

    // Set by the stall monitor when this worker has held local work (its LIFO slot or ring) for StrandedAfterMs without
    // completing an item: it is blocked or running a long item, and the work it queued to itself waits
    // for it. Other workers that keep feeding themselves never run out of work and so never steal on their own (the
    // pool is at its thread target and nobody is parked, so the queueing woke nobody); the monitor therefore also asks
    // every worker to look outside, and a requested look steals from a stranded worker (LookOutside). Cleared by the
    // monitor once the worker completes an item or its local queues are empty (see MarkStranded); the monitor keeps
    // its own record of how long it has seen the worker so.
    private volatile bool _stranded;

    // On this thread only: nesting depth of blocking regions (the thread controller counts the outermost ones).
    private int _regionDepth;

    // This worker only: the lane whose item it is running (or has just taken), null for the pool's own queue. Set when
    // the lane set hands out a lane item (EnterLane), cleared after the item; read by other threads only as a snapshot.
    private Lane? _currentLane;

    /// <summary>The stuck-item detector's record of this worker (the detector's timer thread only).</summary>
    public readonly StuckWatch StuckWatch = new();

    /// <summary>The idle coordinator's record of how this worker's parks end (this worker's thread only).</summary>
    public readonly BurstTracker Bursts = new();

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
    // Owner only: the pace of the items timed for the run-time histogram.
    private SamplePacer _durationPacer;
    // Owner only: the pace of this worker's enqueues sampled for the queue-wait histogram (see ShouldSampleWait).
    private SamplePacer _waitPacer;
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

    public Worker(IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, ThreadController threads,
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
            _waitPacer.Rewind();
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
            if ((_wokenAsSearcher || !TryTakeWork(out WorkItemEntry item)) && !_idle.Search(this, out item))
            {
                return BusySpellEnd.NoWork;
            }
            if (_currentLane is Lane lane)
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
        if (_regionDepth != 0)
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
            metrics.RecordDuration(start, end, _currentLane);
            _durationPacer.Sampled(end);
        }
        else
        {
            _durationPacer.Idle();
        }
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
        if ((--_fairnessCountdown <= 0 || _lookOutsideRequested) && LookOutside(out item))
        {
            return true;
        }
        return TryTakeLifoSlot(out item) || Ring.TryPop(out item) || TakeShared(out item);
    }

}
