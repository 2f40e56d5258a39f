using System;
using System.Runtime.CompilerServices;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Telemetry;
using Spindle.Threading;

namespace Spindle.Scheduling;

/// <summary>One worker thread: its dispatch loop, and the parts of its state it owns.</summary>
/// <remarks>
/// <para>What the worker takes next is decided by <see cref="WorkSources"/>, which holds the orders over the pool's
/// sources; the worker supplies what only it knows (its look interval, its peer watch, its timer streak) through
/// owner-only methods. The loop here runs what the order hands it, keeps its duties between items (timer checks,
/// retiring when surplus) and parks through the idle coordinator.</para>
/// <para>Its state is grouped by concern, each part changed only through its own methods: its local queue
/// (<see cref="Local"/>), what it runs (<see cref="RunningItemRecord"/>), its counts (<see cref="Counts"/>), its pacing
/// (<see cref="WorkerPacing"/>). What other components decide about it lives in objects it holds for them: the idle
/// coordinator's and the stall monitor's requests (<see cref="Requests"/>, <see cref="Bursts"/>), the thread
/// controller's blocking regions (<see cref="Regions"/>), the stuck-item detector's watch (<see cref="StuckWatch"/>).</para>
/// </remarks>
internal sealed partial class Worker : IWaitPacer
{
    /// <summary>How many items of a lane turn run between looks at the timer deadline.</summary>
    private const int LaneTurnCheckInterval = 16;

    /// <summary>Items one call of <see cref="RunBusySpell"/> runs at most before it returns.</summary>
    private const int BusySpellItems = 1024;

    [ThreadStatic]
    private static Worker? t_current;

    private readonly WorkerServices _services;
    private WorkerPacing _pacing = new();
    private WorkerLife _life;
    private ItemScope _scope;

    /// <summary>The worker's number in its pool (for names and traces).</summary>
    public readonly int Id;

    /// <summary>What the worker parks on; the idle coordinator signals it.</summary>
    public readonly ThreadBlocker Blocker;

    /// <summary>Its ring and LIFO slot: the owner pushes and pops, thieves steal (see <see cref="WorkerLocalQueue"/>).</summary>
    public readonly WorkerLocalQueue Local;

    /// <summary>What it runs and has run, for the stuck-item detector and thieves (written by this worker, see <see cref="RunningItemRecord"/>).</summary>
    public readonly RunningItemRecord Record = new();

    /// <summary>Its watch of one peer at a time, for a stall with items queued (owner only: see <see cref="PeerWatch"/>).</summary>
    public readonly PeerWatch PeerWatch = new();

    /// <summary>Its telemetry counts (written by this worker, read as snapshots).</summary>
    public readonly WorkerCounters Counts = new();

    /// <summary>Its randomised spins while it searches (this worker's thread only).</summary>
    public readonly Backoff Backoff;

    /// <summary>What the idle coordinator and the stall monitor ask of this worker (see <see cref="WorkerRequests"/>).</summary>
    public readonly WorkerRequests Requests = new();

    /// <summary>The blocking regions open on this worker's thread (see <see cref="WorkerRegions"/>).</summary>
    public readonly WorkerRegions Regions;

    /// <summary>The stuck-item detector's record of this worker (the detector's timer thread only).</summary>
    public readonly StuckWatch StuckWatch = new();

    /// <summary>The idle coordinator's record of how this worker's parks end (this worker's thread only).</summary>
    public readonly BurstTracker Bursts = new();

    [MethodImpl(RarePath.Compile)] // once per thread, like the rest of a thread's start (see ThreadController.TryAddWorker)
    public Worker(IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, IWorkerThreads threads,
        IWorkerTimers timers, ItemRunner runner, int id)
    {
        _services = new WorkerServices(pool, options, scheduler, idle, threads, timers, runner);
        Id = id;
        Local = new WorkerLocalQueue(options.LocalQueueCapacity is int capacity ? new WorkStealingRing(capacity) : new WorkStealingRing(), Record);
        Blocker = options.BlockerKind is BlockerKind kind ? ThreadBlocker.Create(kind) : ThreadBlocker.Create();
        Backoff = new Backoff((uint)HashCode.Combine(id, pool));
        Regions = new WorkerRegions(this, threads);
    }

    /// <summary>The pool this worker serves.</summary>
    public IPoolHost Pool => _services.Pool;

    /// <summary>The pool's scheduler.</summary>
    public Scheduler Scheduler => _services.Scheduler;

    /// <summary>Owner only: the current item is a fired timer's callback, whose continuations go to the global queue in firing order (see <see cref="TimerPacer.InCallback"/>).</summary>
    public bool InTimerCallback => _pacing.Timers.InCallback;

    /// <summary>The worker has finished its work and runs its stop hook (see <see cref="WorkerLife.Exiting"/>); owner only.</summary>
    public bool IsExiting => _life.Exiting;

    /// <summary>The worker running on the calling thread, or null on any other thread.</summary>
    public static Worker? Current => t_current;

    [MethodImpl(RarePath.Compile)]
    public void Main()
    {
        t_current = this;
        Record.NoteKernelThread(); // for the stall monitor's judgement of a stall (see StallMonitor.CountRunnableWorkers)
        BlockingRegion.SetThreadOwner(Regions);
        DefaultContext.OnPoolThreadStarted();
        var threadState = new PoolThreadState(_services.Options.UseBackgroundThreads);
        try
        {
            _services.Threads.ContinueRamp(this);
            _services.Runner.RunHook(_services.Options.OnWorkerStarted);
            Dispatch(ref threadState);
        }
        finally
        {
            Record.DropCallback();
            _life.Exiting = true;
            _pacing.Looks.Leave(Scheduler.Relief);
            try
            {
                _services.Runner.RunHook(_services.Options.OnWorkerStopping);
            }
            finally
            {
                t_current = null;
                BlockingRegion.SetThreadOwner(null);
                _services.Threads.OnWorkerExited(this);
            }
        }
    }

    [MethodImpl(RarePath.Compile)] // its own work is once per idle spell: the items run in RunBusySpell
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
            Record.DropCallback(); // an idle worker keeps no item alive
            // A pace set while busy would hold through the idle spell: the first items after it are sampled.
            _pacing.Duration.Rewind();
            _pacing.Wait.Rewind();
            // The next look outside times the work after the wake, not the idle spell (which would cut the interval
            // to one item and cost a clock read per item for the first looks of every busy spell).
            _pacing.Looks.RestartAfterPark();
            _pacing.Timers.NoteIdleSpell(); // the wait for work is no ordinary item's turn (see TimerPacer.UrgentGoesFirst)
            _pacing.Looks.Leave(Scheduler.Relief); // a parked worker is woken for outside work: the relief need not watch for it
            if (!_services.Idle.Park(this))
            {
                return; // shutting down and nothing left to run, or retired
            }
        }
    }

    /// <summary>How <see cref="RunBusySpell"/> ended: no work found (park), its item budget spent (call again), or the thread ends (retired, or only fired timers left at shutdown).</summary>
    private enum BusySpellEnd { NoWork, Budget, Exit }

    /// <summary>Runs items until none is found, the thread retires, or <see cref="BusySpellItems"/> have run.</summary>
    /// <remarks>
    /// Compiled fully optimised at its first call: a fresh process would otherwise run its first items through tier-0
    /// code of this loop, then on-stack replacement, for tens of milliseconds (a third of a cold 200,000-item chain in
    /// the comparison program's <c>cold-start</c>). It gives up dynamic PGO for this one method, at the same
    /// steady-state chain throughput. Returning every <see cref="BusySpellItems"/> items costs one call.
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private BusySpellEnd RunBusySpell(ref PoolThreadState threadState)
    {
        Scheduler scheduler = Scheduler;
        WorkSources sources = _services.Sources;
        IWorkerThreads threads = _services.Threads;
        WorkerRoster roster = _services.Roster;
        for (int budget = BusySpellItems; budget > 0; budget--)
        {
            // A worker woken by an enqueue was counted as a searcher by its waker: it must go through the search, which
            // ends that count. Its ring is empty (it parked that way), so skipping the worker's order loses nothing.
            if ((Requests.WokenAsSearcher || !sources.TakeForWorker(this, out WorkItemEntry item)) && !_services.Idle.Search(this, out item))
            {
                return BusySpellEnd.NoWork;
            }
            if (_scope.Lane is Lane lane)
            {
                RunLaneItem(lane, ref item, ref threadState);
            }
            else if (_services.Runner.CancelsInstead(item, lane: null, scheduler.IsCancelling))
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
                _pacing.Timers.InCallback = false;
                return BusySpellEnd.Exit;
            }
            _pacing.Timers.InCallback = false;
            if (--_pacing.Timers.Countdown <= 0)
            {
                CheckTimers();
            }
            // Above the target (a blocking region ended, a starvation episode is over, the maximum was lowered): the
            // surplus retires as soon as its local queues are empty. Two plain loads per item.
            if (roster.IsAboveTarget && threads.TryRetire(this, ThreadInjectionReason.RetiredSurplus))
            {
                return BusySpellEnd.Exit;
            }
        }
        return BusySpellEnd.Budget;
    }

    /// <summary>Runs one item through the pool threads' wrapper (see <see cref="ItemRunner.Run"/>); closes the regions it left open.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void RunItem(ref WorkItemEntry item, ref PoolThreadState threadState)
    {
        _services.Runner.Run(Record, ref _pacing.Duration, ref item, ref threadState, _scope.Lane);
        if (Regions.AnyOpen)
        {
            _services.Threads.CloseAbandonedRegion(this);
        }
    }
}
