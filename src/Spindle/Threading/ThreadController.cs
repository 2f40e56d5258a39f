using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Diagnostics.Tracing;
using Spindle.Primitives;
using Spindle.Telemetry;
using Spindle.Parking;
using Spindle.Scheduling;
using System.Runtime.CompilerServices;

namespace Spindle.Threading;

/// <summary>
/// The thread controller: the one place that adds or retires a worker thread, and records why; the live limits and
/// the thread target; blocking regions; and the pool's lifetime (drain holds and the stop, in ThreadController.Lifetime.cs).
/// </summary>
/// <remarks>
/// <para>The pool aims for <see cref="WorkerRoster.Target"/> runnable workers:
/// <c>target = min(MaxThreads, max(MinThreads, ProcessorCount) + blocking + boost)</c>, where <c>blocking</c> counts
/// workers inside a blocking region (each lends its place to a replacement) and <c>boost</c> counts threads the stall
/// monitor asked for because work waited while every worker was stuck (it decays once the queues are empty or the cores
/// are saturated). Every input is written under <see cref="_lock"/>, which recomputes the target; the target is read
/// lock-free (volatile).</para>
/// <para>Adding: an enqueue that finds nobody idle or searching adds a worker while the thread count is below the
/// target (Demand), an enqueue to the pool's queue or a lane only below the target without the boost (the ramp's
/// threads are the ramp's: <see cref="TryAddWorkerBelowDemandTarget"/>); the monitor adds in ramps (Starvation); a blocking region adds one when work is waiting
/// (BlockingRegion); raising the minimum starts threads at once (MinimumRaised). The decision, the listing and the
/// counts happen under the lock; the thread is started after the lock is released.</para>
/// <para>Retiring: a worker retires (exits) under the lock when the pool has more threads than the target (after an
/// item, or instead of parking: RetiredSurplus), or when it has been parked for the idle timeout and the pool is above
/// its minimum (RetiredIdle). A retiring worker's local queues are empty (it checks under the lock, and only it fills
/// them), and a parked one first removes itself from the idle stack, so no waker can hand it an item it will never run.
/// After leaving the worker list it fences and looks at the queues once more: an enqueuer that saw the old thread count
/// (and so added nobody) published its item before that look, which then sees the item and wakes or adds a worker.</para>
/// <para>Refusals: when the OS refuses a worker, the pool stops growing until a backoff deadline has passed (1 ms doubling to
/// 256 ms per consecutive refusal); the stall monitor retries at the deadline while work waits (see
/// ThreadController.Refusals.cs). Every item already accepted keeps running on the threads the pool has.</para>
/// <para>The lock guards: the worker list (copy-on-write, read lock-free), the thread count (also read lock-free), the
/// next worker id, the creation-failure streak and its retry deadline, the limits, the blocking count, the boost, the
/// retired threads, and the lifetime state. Nothing outside this class takes it.</para>
/// </remarks>
internal sealed partial class ThreadController : IWorkerThreads
{
    private readonly Lock _lock = new();
    private readonly IPoolHost _pool;
    private readonly WorkerPoolOptions _options;
    private readonly string _threadNamePrefix;
    private readonly Scheduler _scheduler;
    private readonly IdleCoordinator _idle;
    private readonly ItemRunner _runner;
    private readonly IWorkerTimers _timers;
    private readonly ThreadStarts _starts;
    private StallMonitor _monitor = null!; // set once by Connect, before any thread of the pool exists

    private readonly WorkerRoster _roster = new(); // the workers, their count and the target: changed under _lock
    private int _nextWorkerId;
    private long _exitedWorkersCompleted; // written under _lock (Interlocked: read lock-free)
    private long _exitedWorkersSteals;    // the same, for the telemetry counts
    private long _exitedWorkersParks;
    private long _exitedWorkersInlineRuns;
    private int _creationFailures;      // consecutive failures
    private long _retryAt;              // Stopwatch timestamp before which no worker is started after a refusal (0: none)
    private int _minThreads;
    private int _maxThreads;
    private int _blockingCount;
    private int _starvationBoost;
    private long _rampProgressMark; // see RampProgressMark
    // Retired workers that may still be running their stop hook; shutdown joins them.
    private readonly List<Thread> _retiredThreads = [];
    private readonly long[] _injectionCounts = new long[(int)ThreadInjectionReason.RetiredSurplus + 1];

    public ThreadController(IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, ItemRunner runner, IWorkerTimers timers, ThreadStarts starts)
    {
        _starts = starts;
        starts.Connect(this);
        _pool = pool;
        _options = options;
        _threadNamePrefix = options.ThreadNamePrefixOrName;
        _scheduler = scheduler;
        _idle = idle;
        _runner = runner;
        _timers = timers;
        lock (_lock)
        {
            _minThreads = options.MinThreads;
            _maxThreads = options.MaxThreads;
            RecomputeTargetLocked();
        }
    }

    public void Connect(StallMonitor monitor) => _monitor = monitor;

    /// <summary>Workers parked right now (a snapshot).</summary>
    public int ParkedCount => _idle.IdleCount;

    /// <summary>Diagnostics for tests: the stall monitor's view of the pool in one line.</summary>
    public string DescribeMonitor() => _monitor.Describe();

    /// <summary>The workers (a snapshot of the copy-on-write list: read it once per use).</summary>
    public Worker[] Workers => _roster.Workers;

    /// <summary>The workers, their count and the target, for the scheduling layer's lock-free reads.</summary>
    public WorkerRoster Roster => _roster;

    public int ThreadCount => _roster.Count;

    public int MinThreads => Volatile.Read(ref _minThreads);

    public int MaxThreads => Volatile.Read(ref _maxThreads);

    public int ThreadTarget => _roster.Target;

    public int BlockingCount => Volatile.Read(ref _blockingCount);

    public int StarvationBoost => Volatile.Read(ref _starvationBoost);

    /// <summary>Items completed by workers, those that exited included (a snapshot).</summary>
    public long WorkerCompletedCount => SumOverWorkers(ref _exitedWorkersCompleted, static worker => worker.Record.CompletedCount);

    /// <summary>
    /// The stall monitor's measure of progress: items completed plus tasks run inline by workers, those that exited
    /// included (a snapshot). A worker that waits on tasks and runs them inline (a nested <c>Parallel.For</c>) completes
    /// no item for as long as its outer item lasts, yet it is not stalled.
    /// </summary>
    /// <remarks>One pass over the workers; both exited counts are read before the list, as in <see cref="SumOverWorkers"/>.</remarks>
    public long WorkerProgressCount
    {
        [MethodImpl(RarePath.Compile)]
        get => Interlocked.Read(ref _exitedWorkersCompleted)
            + SumOverWorkers(ref _exitedWorkersInlineRuns, static worker => worker.Record.CompletedCount + worker.Counts.InlineRuns);
    }

    /// <summary>Steals by workers, those that exited included (a snapshot).</summary>
    public long WorkerStealCount => SumOverWorkers(ref _exitedWorkersSteals, static worker => worker.Counts.Steals);

    /// <summary>Parks by workers, those that exited included (a snapshot).</summary>
    public long WorkerParkCount => SumOverWorkers(ref _exitedWorkersParks, static worker => worker.Counts.Parks);

    /// <summary>A per-worker count over the pool's life: what exited workers left in <paramref name="exited"/> plus the live ones'.</summary>
    [MethodImpl(RarePath.Compile)]
    private long SumOverWorkers(ref long exited, Func<Worker, long> read)
    {
        long sum = Interlocked.Read(ref exited);
        foreach (Worker worker in Workers)
        {
            sum += read(worker);
        }
        return sum;
    }

    /// <summary>
    /// How many times a worker was added or retired for <paramref name="reason"/> (the caller validated it); for
    /// <see cref="ThreadInjectionReason.CreationFailed"/>, the refused starts of every thread kind but dedicated threads
    /// (DedicatedThreads counts those in its share).
    /// </summary>
    public long GetInjectionCount(ThreadInjectionReason reason) => reason == ThreadInjectionReason.CreationFailed
        ? _starts.TotalFailures - _starts.GetFailures(PoolThreadKind.Dedicated)
        : Interlocked.Read(ref _injectionCounts[(int)reason]);

    /// <summary>The pool's thread starts and their refusals.</summary>
    public ThreadStarts Starts => _starts;

    private void Record(ThreadInjectionReason reason) => Interlocked.Increment(ref _injectionCounts[(int)reason]);

    /// <summary>The target without the starvation boost: the minimum (at least the core count) plus the blocked workers.</summary>
    private int BaseTargetLocked() => Math.Max(_minThreads, Environment.ProcessorCount) + _blockingCount;

    private void RecomputeTargetLocked()
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        Debug.Assert(_blockingCount >= 0 && _starvationBoost >= 0 && _minThreads <= _maxThreads);
        int baseTarget = BaseTargetLocked();
        long target = (long)baseTarget + _starvationBoost;
        _roster.SetTargetLocked((int)Math.Min(_maxThreads, target), Math.Min(_maxThreads, baseTarget));
    }

    /// <summary>Changes the limits (validated by the caller); throws when the pool is shutting down. See <see cref="WorkerPool.SetThreadLimits"/>.</summary>
    public void SetLimits(int minThreads, int maxThreads)
    {
        bool lowered;
        lock (_lock)
        {
            if (_scheduler.IsShutdownStarted)
            {
                _pool.ThrowShutDown();
            }
            lowered = maxThreads < _maxThreads || minThreads < _minThreads;
            _minThreads = minThreads;
            _maxThreads = maxThreads;
            RecomputeTargetLocked();
        }
        while (_roster.Count < minThreads && TryAddWorker(ThreadInjectionReason.MinimumRaised))
        {
        }
        if (lowered)
        {
            // Parked workers re-evaluate: above the new maximum they retire, and with a lower minimum their idle
            // timeout may now apply.
            _idle.WakeAll();
        }
        _monitor.EnsureMonitor();
    }

    /// <summary>Adds a worker if the thread count is below the target. Never throws: a failed creation is retried later.</summary>
    /// <returns>Whether a thread was started.</returns>
    /// <remarks>
    /// The decision, the listing and the counts happen under the lock; the thread is started after the lock is
    /// released, because <see cref="Thread.Start()"/> waits until the new thread runs, which on busy cores takes a
    /// scheduling round, and several injections (the monitor's ramp, the workers it starts, blocking regions) must be
    /// able to start threads in parallel. A listed worker counts as a thread, so the pool cannot stop (and shutdown
    /// cannot join anything) before it has started and exited; its thread is joined only once it has run its exit path.
    /// If the start fails, the worker (which never ran and holds nothing) is unlisted again under the lock.
    /// </remarks>
    public bool TryAddWorker(ThreadInjectionReason reason) => TryAddWorker(reason, aboveTarget: 0);

    /// <summary>
    /// As <see cref="TryAddWorker(ThreadInjectionReason)"/> for <see cref="ThreadInjectionReason.Demand"/>, but only
    /// below the target without the starvation boost (<see cref="WorkerRoster.IsBelowDemandTarget"/>), decided under
    /// the lock like the target itself: an enqueue to the pool's queue or a lane leaves the ramp's threads to the ramp.
    /// </summary>
    public bool TryAddWorkerBelowDemandTarget() => TryAddWorker(ThreadInjectionReason.Demand, aboveTarget: 0, demandOnly: true);

    /// <summary>
    /// As <see cref="TryAddWorker(ThreadInjectionReason)"/>, allowing up to <paramref name="aboveTarget"/> threads beyond
    /// the target (never beyond the maximum): the look-ahead of a blocking-region ramp.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private bool TryAddWorker(ThreadInjectionReason reason, int aboveTarget, bool demandOnly = false)
    {
        Debug.Assert(reason is ThreadInjectionReason.Demand or ThreadInjectionReason.Starvation
            or ThreadInjectionReason.BlockingRegion or ThreadInjectionReason.MinimumRaised);
        Worker worker = null!;
        Thread thread = null!;
        bool created = true;
        lock (_lock)
        {
            // During the drain a worker may still be needed (a continuation arriving when every worker had exited or
            // retired), though not to replace one that is leaving (RefusesWhileWindingDownLocked); once the pool
            // has stopped, never.
            int cap = demandOnly ? _roster.DemandTarget : _roster.Target + aboveTarget;
            if (_roster.Count >= Math.Min(cap, _maxThreads) || _stopped || InBackoffLocked()
                || RefusesWhileWindingDownLocked(reason))
            {
                return false;
            }
            try
            {
                worker = new Worker(_pool, _options, _scheduler, _idle, this, _timers, _runner, ++_nextWorkerId);
                thread = PoolThread.Create(_options, worker.Main, $"{_threadNamePrefix} #{worker.Id}");
            }
            catch (Exception)
            {
                // Whatever the failure (OutOfMemoryException, ThreadStartException, a throwing factory), the enqueue
                // that got us here has already been accepted: never throw, retry later.
                BackOffLocked();
                created = false;
            }
            if (created)
            {
                worker.Attach(thread!, reason);
                _idle.CountNewWorkerAsSearcher(worker);
                // Listed before it starts, so that whatever it does first (including exiting) finds itself in the list.
                _roster.AddLocked(worker);
                Record(reason); // before the thread runs anything, so that whoever sees its work done sees the reason
            }
        }
        if (!created)
        {
            OnRefused(reason, counted: false);
            return false;
        }
        try
        {
            // No ExecutionContext capture: a worker never runs in its creator's context. Counts a refusal.
            _starts.Start(thread, PoolThreadKind.Worker, reason: NameOf(reason));
        }
        catch (Exception)
        {
            bool stopped;
            lock (_lock)
            {
                Interlocked.Decrement(ref _injectionCounts[(int)reason]);
                DropFromListLocked(worker);
                _idle.UncountUnstartedWorker();
                BackOffLocked();
                stopped = TryStopLocked();
            }
            if (stopped)
            {
                OnStopped();
                // This thread may be anyone's (an enqueuing caller, the stall monitor): hand what is left on, as the
                // release of the last drain hold does, unless a shutdown call waits to sweep it (this one among them).
                if (!t_sweepsAfterStop)
                {
                    HandOnLeftoversUnlessAShutdownCallWaits();
                }
            }
            OnRefused(reason, counted: true);
            return false;
        }
        lock (_lock)
        {
            _creationFailures = 0;
            _retryAt = 0;
        }
        _monitor.EnsureMonitorIfNoneIdle();
        _timers.OnWorkerAdded(); // stuck-item detection: the timer thread watches while the pool has workers
        if (SpindleEventSource.Log.IsOn(EventLevel.Informational, SpindleEventSource.Keywords.Threads))
        {
            SpindleEventSource.Log.ThreadInjected(_pool.Name, NameOf(reason), ThreadCount);
        }
        return true;
    }

    /// <summary>
    /// Called by a new worker before its first item: while the pool is still below its target and work waits with
    /// nobody free, it starts the next threads itself (up to <see cref="StarvationFanOut"/>, one after the other: a
    /// start waits for the new thread to run), so the threads of a ramp are started by more and more threads at once
    /// instead of one at a time by whoever began it. (With one each, 200 blocked items of a 100 ms sleep reached their
    /// 200th thread 54-71 ms after the burst; with two, 46-64 ms: interleaved children on 2 cores.)
    /// </summary>
    /// <remarks>
    /// A worker added for a blocking region also looks ahead: the pool gains a place in its target only when an item has
    /// entered its region, so a burst of blocking items would otherwise grow one thread-start at a time (each new thread
    /// takes an item, which enters its region, which adds the next thread). While work waits with nobody free, such a
    /// worker starts up to <see cref="RegionLookaheadPerWorker"/> threads beyond the target, as many as the workers now
    /// blocked at most, and no more than the waiting items that no started worker is about to take: the waiting items
    /// are taken to block like the ones before them, so the creators double every round. A look-ahead thread whose item
    /// does not enter a region leaves the pool above its target and retires after that item (the surplus rule every
    /// worker checks after each item), so a wrong guess costs a thread start and one item's oversubscription, never more
    /// threads than the workers blocked in regions.
    /// </remarks>
    [MethodImpl(RarePath.Compile)]
    public void ContinueRamp(Worker worker)
    {
        // Only ramps (starvation, blocking regions) fan out; ordinary demand is served by the enqueue path.
        switch (worker.InjectedFor)
        {
            case ThreadInjectionReason.Starvation:
                // Not once an item has completed since the monitor's injection: the stall is over, the ramp with it.
                for (int i = 0; i < StarvationFanOut; i++)
                {
                    if (!_roster.IsBelowTarget || _idle.IdleCount != 0 || !_scheduler.Sources.AnyWorkVisible()
                        || WorkerProgressCount != RampProgressMark || !TryAddWorker(ThreadInjectionReason.Starvation))
                    {
                        break;
                    }
                }
                break;
            case ThreadInjectionReason.BlockingRegion:
                for (int i = 0; i < RegionLookaheadPerWorker; i++)
                {
                    // Items nobody is about to take: workers that have started but not yet taken an item (this one
                    // included) count as searchers and will each take one.
                    if (_idle.IdleCount != 0 || _scheduler.Sources.PendingCount <= _idle.SearchingCount
                        || !TryAddWorker(ThreadInjectionReason.BlockingRegion, aboveTarget: BlockingCount))
                    {
                        break;
                    }
                }
                break;
        }
    }

    /// <summary>How many threads a worker added for starvation starts before its first item, while the target allows (see <see cref="ContinueRamp"/>).</summary>
    internal const int StarvationFanOut = 2;

    /// <summary>How many threads a worker added for a blocking region may start before its first item (see <see cref="ContinueRamp"/>).</summary>
    internal const int RegionLookaheadPerWorker = 2;

    /// <summary>
    /// Retires <paramref name="worker"/> (the calling thread) if the pool is above <paramref name="reason"/>'s floor:
    /// the target for <see cref="ThreadInjectionReason.RetiredSurplus"/>, the minimum for
    /// <see cref="ThreadInjectionReason.RetiredIdle"/>. On success the worker is out of the list and must exit.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public bool TryRetire(Worker worker, ThreadInjectionReason reason)
    {
        Debug.Assert(worker.IsCurrentThread);
        Debug.Assert(reason is ThreadInjectionReason.RetiredSurplus or ThreadInjectionReason.RetiredIdle);
        lock (_lock)
        {
            int floor = reason == ThreadInjectionReason.RetiredIdle ? _minThreads : _roster.Target;
            if (_roster.Count <= floor || _scheduler.IsShutdownStarted || !worker.Local.IsEmpty)
            {
                return false;
            }
            Record(reason); // before the count drops, so that a reader who sees the lower count sees the reason too
            RemoveWorkerLocked(worker);
            _retiredThreads.RemoveAll(static t => !t.IsAlive);
            _retiredThreads.Add(worker.Thread!);
        }
        // See the remarks: one more look after leaving the list, so that no enqueue is left without a worker.
        LookAgainAfterLeaving();
        _monitor.EnsureMonitorIfNoneIdle(); // the pool may have just lost its last parked worker
        if (SpindleEventSource.Log.IsOn(EventLevel.Informational, SpindleEventSource.Keywords.Threads))
        {
            SpindleEventSource.Log.ThreadRetired(_pool.Name, NameOf(reason), ThreadCount);
        }
        return true;
    }

    /// <summary>The last thing a worker thread does.</summary>
    [MethodImpl(RarePath.Compile)]
    public void OnWorkerExited(Worker worker)
    {
        bool stopped;
        lock (_lock)
        {
            _leavingWorkers.Remove(worker);
            if (Array.IndexOf(_roster.Workers, worker) >= 0)
            {
                RemoveWorkerLocked(worker);
                if (_scheduler.IsShutdownStarted)
                {
                    // Shutdown joins it (it is between here and the end of its thread).
                    _retiredThreads.Add(worker.Thread!);
                }
            }
            stopped = TryStopLocked();
        }
        if (stopped)
        {
            // The last worker out: what a continuation queued between the others' exit and the stop runs here.
            OnStopped();
            _scheduler.SweepLeftovers();
        }
        else
        {
            // Not the last: one more look after leaving the list, as a retiring worker takes. A worker that decided to
            // exit a draining pool (it saw no work) was still counted while it went, so a continuation accepted
            // meanwhile woke nobody (no one parked, the pool at its target); during a drain nothing else would notice.
            LookAgainAfterLeaving();
        }
    }

    /// <summary>
    /// A worker has just left the list of workers: looks at the queues once more (after a full fence, so that an enqueue
    /// that counted this worker either is seen here or saw the lower count) and wakes or adds a worker for what it finds.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private void LookAgainAfterLeaving()
    {
        Interlocked.MemoryBarrier();
        if (_scheduler.Sources.AnyWorkVisible())
        {
            _idle.WakeWorkerIfNeeded();
        }
    }

    [MethodImpl(RarePath.Compile)]
    private void RemoveWorkerLocked(Worker worker)
    {
        // Completed count first, then the list: a reader summing both may briefly count this worker twice, never zero
        // times, and the completed count is documented as a snapshot.
        Interlocked.Add(ref _exitedWorkersCompleted, worker.Record.CompletedCount);
        Interlocked.Add(ref _exitedWorkersSteals, worker.Counts.Steals);
        Interlocked.Add(ref _exitedWorkersParks, worker.Counts.Parks);
        Interlocked.Add(ref _exitedWorkersInlineRuns, worker.Counts.InlineRuns);
        DropFromListLocked(worker);
    }

    [MethodImpl(RarePath.Compile)]
    private void DropFromListLocked(Worker worker)
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        Debug.Assert(worker.Local.IsEmpty, "A worker leaves only with an empty ring and LIFO slot.");
        _roster.RemoveLocked(worker);
    }
}
