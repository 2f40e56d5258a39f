using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Threading;

namespace Spindle.Scheduling;

/// <summary>
/// Searching, parking and waking: the searching count, the stack of parked workers, and the protocol between them.
/// Workers sleep on their own blocker (<see cref="ThreadBlocker"/>); this component decides who sleeps and who wakes.
/// </summary>
/// <remarks>
/// <para>State (owned here): <see cref="_searching"/> (atomics, alone on its cache line: every enqueue reads it) and
/// <see cref="_idle"/> (the idle stack, with its own small lock). A worker's <c>WokenAsSearcher</c> flag is written by
/// this component only.</para>
/// <para>Protocol (after Go's scheduler and Tokio's idle.rs, with the LIFO blocker of the runtime's own pool):</para>
/// <list type="bullet">
/// <item>The searching count counts workers that are looking for work (spinning over the queues). A worker may start
/// searching only while fewer than half of the non-parked workers (and fewer than <see cref="MinSearchers"/>, whichever
/// is more) are searching; otherwise it parks at once, since the searchers will find whatever there is.</item>
/// <item>An enqueue publishes its item and then calls <see cref="WakeWorkerIfNeeded"/>, which does nothing if anyone is
/// searching or nobody is parked. Otherwise it claims the count 0 -> 1 on behalf of the worker it is about to wake (so
/// that a burst of enqueues wakes one worker, not one per item), pops the most recently parked worker and signals it.</item>
/// <item>A searcher that finds work stops searching; if it was the last searcher and more work is visible, it wakes one
/// more worker (which arrives as a searcher), so parallelism ramps up one worker at a time without a thundering herd.</item>
/// <item>A searcher that finds nothing decrements the count, pushes itself on the idle stack, and only then looks at
/// every queue once more before blocking. Both the decrement and the push are full fences, and the global enqueue's
/// claim is a full fence before its read of the count and the idle count, so (store-buffering argument) either the
/// enqueuer sees this worker counted as searching or parked, or this worker's last look sees the item. A wake-up cannot
/// be lost for work queued from outside.</item>
/// <item>A local push by a worker is not fenced (it is the hot path). Even a lone local item, which the worker will
/// most likely run next, wakes a parked worker when nobody searches (see <c>Scheduler.TryEnqueueCore</c>): a forked
/// child whose parent computes on is then taken within microseconds (the woken worker leaves it to a running owner
/// for a short grace, see <see cref="WorkerLocalQueue.MayStealFrom"/>). With nobody parked and a thread missing, the
/// push opens a deferral instead, and the stall monitor wakes a helper if the pushing worker's current item blocks. The
/// store-buffering race between an unfenced push and a parking searcher is closed on the parking side: a worker that
/// parks while another is awake looks at the queues once more after <see cref="RecheckAfterParkMs"/> unless woken
/// first (see <see cref="PushIdleAndLookAgain"/>).</item>
/// <item>How long a searcher looks before it parks: a spin scaled by the free cores, then a few yields, and many more
/// yields while its latest park was a short gap between bursts of work (<see cref="BurstTracker"/>), so that
/// back-to-back bursts find a searcher instead of paying a wake-up each, while a trickle of single items still parks at
/// once; and neither spin nor yields (but for one probing search in 32) once the worker's latest searches all
/// found nothing, until work comes back within a spin's reach (<see cref="BurstTracker.SpinPays"/>). While other
/// processes keep the cores busy (<see cref="OtherProcessesLoad"/>) the yields are timed, and each becomes a short
/// spin while they hand the core to one of those processes for a whole slice (<see cref="YieldVerdict"/>).</item>
/// </list>
/// </remarks>
internal sealed partial class IdleCoordinator
{
    /// <summary>
    /// Searchers allowed however few workers are awake. Half of two awake workers is one searcher, so the other worker
    /// parked at once whenever it ran dry and was woken again by the next burst (a futex round trip per burst);
    /// measured in-process on 2 cores, outside batches of 1,000 Run items went from about 5.7M to 10.2M items/s when
    /// both workers may search. From three awake workers on, half of them (rounded up) is at least
    /// two anyway, so this changes nothing for larger pools.
    /// </summary>
    private const int MinSearchers = 2;

    /// <summary>Upper bound on a searcher's backoff attempts when every other core is free.</summary>
    internal const int DefaultMaxSpinAttempts = 7;

    /// <summary>How many times a searcher yields its core after spinning, before it parks.</summary>
    internal const int DefaultYieldAttempts = 4;

    /// <summary>
    /// Yields added to a search while work arrives in back-to-back bursts (<see cref="BurstTracker"/>). With nothing
    /// else runnable each attempt (a look at the queues and a yield; <c>sched_yield</c> alone takes about 0.4 µs on the
    /// 2-core VM) lasts under a microsecond, so this keeps the searcher available for some 0.3-0.5 ms more, longer than
    /// a park that still counts as a gap between bursts (<see cref="BurstTracker.ShortParkTicks"/>): the first park after
    /// the bursts stop is then long and turns the extension off, so one such search runs per idle period. With an
    /// outside producer runnable on the same core, each yield lets it queue on. (A cap at that gap's length kept the
    /// gain below, 85.7 against 83.7 ms, but it overrode a caller's count, which the pool's options allow.) Measured on
    /// 2 cores (a Xeon VM) against none, interleaved child processes of the comparison program, medians, with 128:
    /// outside batches of 1,000 Run items 4.54M to 5.67M items/s (12 runs each); 10,000-item bursts 81.0 to 56.6 ms (Run items) and 29.8 to 27.8 ms (plain
    /// items); socket round trips p99 1.45 to 0.90 ms (1 byte) and 3.68 to 0.96 ms (4 KB); channel ping-pong 4.1 to
    /// 2.9 µs a hop; the pool's CPU time under one item per 100 µs or per 1 ms unchanged (449 and 434 ms, 60.9 and
    /// 61.4 ms). From 128 to 512 (the same way, later): 50 rounds of 10,000 Run items from outside, each awaited with
    /// <c>Task.WaitAll</c>, 88.0 to 71.2 ms and, in a second set, 102.3 to 83.3 ms (8 runs each; the workers parked
    /// 22-30 and 5.5-7 times a run; the built-in pool 75.1 and 84.4), the plain items' rounds 37.4 to 31.4 ms, batches
    /// of 1,000 Run items 5.45M to 5.72M items/s; the pool's CPU under one item per 1 ms or per 100 µs, channel
    /// ping-pong, socket round trips, yields and mailbox throughput level (4 runs each), wake latency level (p99
    /// 112-1,479 against 105-1,964 µs over 20 runs each: a single item parks either way), and beside two busy loops
    /// level too (3 runs each).
    /// </summary>
    internal const int DefaultBurstYieldAttempts = 512;

    /// <summary>
    /// How long a worker that parked while another worker was awake sleeps before it looks at the queues once more,
    /// unless woken first: the bound on the wait of a local item whose push raced the worker's last look (see
    /// <see cref="PushIdleAndLookAgain"/>). The race is rare (a store still in flight at the look), and the stall monitor
    /// gives stranded local work the same bound (<see cref="Threading.StallMonitor.StrandedAfterMs"/>). A shorter bound
    /// costs the common case: the look's wake-up then falls between the items of a workload with sub-millisecond gaps,
    /// and the next real wake of that worker is slower: a forked child's start on a parked worker (the comparison
    /// program's fork-latency, gaps of 0-1 ms, 2 cores, interleaved sets of 5 or 6 runs) read a median p50 of 82-86 µs
    /// at 1 ms against 35-47 µs with a process-wide barrier instead, 20 µs at 50 ms, and 15 µs at 10 ms against 31 µs
    /// with the barrier.
    /// </summary>
    internal const int RecheckAfterParkMs = 10;

    private readonly IdleStack<Worker> _idle = new();
    private readonly int _maxSpinAttempts;
    private readonly int _yieldAttempts;
    private readonly int _burstYieldAttempts;
    private readonly int _idleTimeoutMs;
    private readonly long _recheckTicks;

    // Workers currently searching for work. Written by searchers and wakers with atomics; read by every enqueue.
    private PaddedInt32 _searching;

    // Set once by Connect, before any thread of the pool exists.
    private Scheduler _scheduler = null!;
    private IWorkerThreads _threads = null!;
    private WorkerRoster _roster = null!;
    private IStallWatch _monitor = null!;
    private IOutsideRelief _relief = null!;

    public IdleCoordinator(WorkerPoolOptions options)
    {
        _maxSpinAttempts = options.MaxSpinAttempts ?? DefaultMaxSpinAttempts;
        _yieldAttempts = options.YieldAttempts ?? DefaultYieldAttempts;
        _burstYieldAttempts = options.BurstYieldAttempts ?? DefaultBurstYieldAttempts;
        _idleTimeoutMs = options.IdleTimeoutMilliseconds;
        _recheckTicks = Stopwatch.Frequency * (options.RecheckAfterParkMs ?? RecheckAfterParkMs) / 1_000;
    }

    public void Connect(Scheduler scheduler, IWorkerThreads threads, IStallWatch monitor, IOutsideRelief relief)
    {
        _scheduler = scheduler;
        _threads = threads;
        _roster = threads.Roster;
        _monitor = monitor;
        _relief = relief;
    }

    /// <summary>Parked workers (a snapshot).</summary>
    public int IdleCount => _idle.Count;

    /// <summary>Searching workers (a snapshot).</summary>
    public int SearchingCount => Volatile.Read(ref _searching.Value);

    /// <summary>Looks for work in the global queue and in other workers' rings, spinning with backoff and yielding between looks while that pays (see <see cref="BurstTracker.SpinPays"/>).</summary>
    public bool Search(Worker self, out WorkItemEntry item)
    {
        bool counted = self.Requests.WokenAsSearcher;
        if (counted)
        {
            self.Requests.ClearWokenAsSearcher();
        }
        else if (!TryBeginSearching())
        {
            item = default;
            return false;
        }

        // A worker arriving as a searcher skipped its own queues (and a start hook may have queued locally), so its own
        // slot and ring are looked at once here; otherwise the dispatch loop has just found them empty, and only their
        // owner fills them.
        bool checkOwnWork = counted;
        // Past the spin, the yields: more of them while work comes in back-to-back bursts, none of either while the
        // latest searches spun in vain (see BurstTracker.SpinPays).
        bool bursts = self.Bursts.InBackToBackBursts(self.Record.StartedCount);
        bool spin = bursts || self.Bursts.SpinPays;
        int attempts = spin ? SpinAttemptsForFreeCores() : 0;
        int yields = bursts ? _yieldAttempts + _burstYieldAttempts : spin ? _yieldAttempts : 0;
        WorkSources sources = _scheduler.Sources;
        bool coresShared = false;
        long yieldsFrom = 0; // when the yields began (read only if the item is found after one)
        for (int attempt = 0; ; attempt++)
        {
            if (sources.TakeForSearcher(self, checkOwnWork, out item))
            {
                self.Bursts.NoteFound(attempt);
                if (attempt > attempts)
                {
                    self.Bursts.NoteFoundAfterYielding(Stopwatch.GetTimestamp() - yieldsFrom, self.Record.StartedCount);
                }
                int left = Interlocked.Decrement(ref _searching.Value);
                Debug.Assert(left >= 0);
                if (left == 0 && sources.AnyWorkVisible())
                {
                    WakeWorkerIfNeeded(); // the last searcher to find work brings in one more
                }
                return true;
            }
            checkOwnWork = false;
            if (attempt < attempts)
            {
                self.Backoff.Spin(attempt);
            }
            else if (attempt < attempts + yields)
            {
                // While other processes keep the cores busy, whether a yield pays depends on where it sends the core
                // (see YieldVerdict): to one of their threads for a whole slice when they share this process's
                // scheduling group (enqueue-to-start p50 2.3 ms beside two busy loops in the same session, 2 cores), or
                // nowhere but this process's own threads when they do not, and then a spin in its place only spends
                // the process's share of the core (channel ping-pong beside two busy loops in sessions of their own:
                // 23-34 us a hop spinning, 11-20 yielding, a third of the CPU). So the yields are timed, and spun
                // instead while they hand the core away.
                if (attempt == attempts)
                {
                    coresShared = OtherProcessesLoad.Process.CoresShared();
                    yieldsFrom = Stopwatch.GetTimestamp();
                }
                if (coresShared)
                {
                    self.Backoff.YieldOnSharedCores(YieldVerdict.Process);
                    continue;
                }
                // Past the spin budget, offer the core to other runnable threads before parking. When threads outnumber
                // cores (an outside producer sharing the machine with the workers) this lets the producer run without
                // this worker parking, so the producer's next enqueue finds a searcher and pays no wake-up system call.
                // With nothing else runnable, a yield returns at once and costs about a microsecond.
                Thread.Yield();
            }
            else
            {
                break;
            }
        }
        self.Bursts.NoteFutileSearch();
        int remaining = Interlocked.Decrement(ref _searching.Value);
        Debug.Assert(remaining >= 0);
        item = default;
        return false;
    }

    private bool TryBeginSearching()
    {
        while (true)
        {
            int searching = Volatile.Read(ref _searching.Value);
            int active = _roster.Count - _idle.Count;
            if (searching >= Math.Max(MinSearchers, (active + 1) / 2))
            {
                return false;
            }
            if (Interlocked.CompareExchange(ref _searching.Value, searching + 1, searching) == searching)
            {
                return true;
            }
        }
    }

    /// <summary>
    /// How long to spin before parking: scaled by the cores not occupied by this pool's other running threads, and zero
    /// when they occupy them all (spinning then only steals CPU from the threads doing the work).
    /// </summary>
    private int SpinAttemptsForFreeCores()
    {
        int running = _roster.Count - _idle.Count - 1; // other non-parked workers
        int free = Environment.ProcessorCount - Math.Max(running, 0);
        if (free <= 0 || _maxSpinAttempts <= 0)
        {
            return 0;
        }
        // Each extra attempt roughly doubles the spin; giving up one attempt per busy core halves it per busy core.
        int attempts = _maxSpinAttempts - (Environment.ProcessorCount - free);
        return Math.Max(attempts, 1);
    }

    /// <summary>
    /// Blocks the worker until it is woken. Returns false when the worker should exit instead: shutdown with nothing
    /// left, or retirement (surplus above the target, or idle for the idle timeout above the minimum).
    /// </summary>
    public bool Park(Worker self)
    {
        Debug.Assert(self.Local.IsEmpty, "A worker parks only with an empty ring and LIFO slot.");
        self.Local.Ring.ReleaseTakenSlots(); // an idle worker must not keep stolen items' state alive
        if (_scheduler.IsShutdownStarted && _threads.TryExitForShutdown(self))
        {
            return false;
        }
        if (_roster.IsAboveTarget && _threads.TryRetire(self, ThreadInjectionReason.RetiredSurplus))
        {
            return false;
        }
        if (!PushIdleAndLookAgain(self, out bool recheck))
        {
            self.Bursts.NoteFoundWhileParking();
            return LookAgainAfterPark();
        }
        self.Counts.CountPark();
        long parkedAt = Stopwatch.GetTimestamp();
        while (true)
        {
            if (recheck)
            {
                // One precise sleep (the blocker's deadline is in Stopwatch ticks), not a timeout in milliseconds, which
                // a coarse clock can stretch over several wake-ups.
                if (self.Blocker.WaitUntil(Stopwatch.GetTimestamp() + _recheckTicks))
                {
                    break;
                }
                // The look that a local push may have raced (see PushIdleAndLookAgain). Still on the idle stack: if a
                // waker popped this worker meanwhile, its signal is on the way.
                recheck = false;
                if (WorkVisibleToParked())
                {
                    if (_idle.TryRemove(self))
                    {
                        return LookAgainAfterPark();
                    }
                    self.Blocker.Wait();
                    break;
                }
                continue; // nothing: sleep on, now until woken (or the idle timeout)
            }
            int timeout = _idleTimeoutMs != Timeout.Infinite && _roster.Count > _threads.MinThreads
                ? _idleTimeoutMs
                : Timeout.Infinite;
            if (self.Blocker.Wait(timeout))
            {
                break;
            }
            // Timed out. Leave the idle stack first: once out of it no waker can pick this worker, so retiring cannot
            // strand an item a waker meant for it. If a waker popped it already, its signal is on the way: take it.
            if (!_idle.TryRemove(self))
            {
                self.Blocker.Wait();
                break;
            }
            if (_threads.TryRetire(self, ThreadInjectionReason.RetiredIdle))
            {
                return false;
            }
            if (!PushIdleAndLookAgain(self, out recheck))
            {
                return LookAgainAfterPark();
            }
        }
        self.Bursts.NoteWoken(Stopwatch.GetTimestamp() - parkedAt, self.Record.StartedCount);
        _monitor.EnsureMonitorIfNoneIdle(); // this worker is busy again: if nobody is left parked, the monitor must watch
        return true;
    }

    /// <summary>
    /// Work (or shutdown) appeared while parking, and the worker took itself back off the idle stack: it looks again
    /// without sleeping. It was counted idle for a moment, so the monitor may have judged the pool quiet and disarmed:
    /// re-arm it if nobody else is parked. The barrier orders the idle-stack removal before the monitor's armed flag is
    /// read (see the arming protocol in StallMonitor).
    /// </summary>
    private bool LookAgainAfterPark()
    {
        Interlocked.MemoryBarrier();
        _monitor.EnsureMonitorIfNoneIdle();
        return true;
    }

    /// <summary>
    /// Pushes the worker on the idle stack, then looks at every queue once more. Returns true when the worker should
    /// sleep, false when it took itself back off the stack because work (or shutdown) appeared. <paramref name="recheck"/>
    /// says whether the sleep must end for one more look after <see cref="RecheckAfterParkMs"/>.
    /// </summary>
    /// <remarks>
    /// Local pushes are not fenced (they are the hot path), so a pusher's store of its item may still sit in its store
    /// buffer while it reads the searching count as non-zero and skips both the wake-up and the stall monitor. Then the
    /// look below can miss the item, and nothing else brings this worker to it: the pusher runs it only after its
    /// current item, which may block (on that very item's result, say). A full fence on both sides would close the race
    /// at a cost on every local push. A process-wide barrier here would close it on the parking side only, but it
    /// interrupts every core that runs a thread of the process and waits for each to answer: on a virtual machine an
    /// interrupt between cores is an exit to the hypervisor on both sides, measured at 58 µs a barrier on a 2-core VM
    /// with the other core running a thread of the process (1.5 µs with it idle). Every park would pay it while another
    /// worker is busy, and a worker signalled meanwhile would wake that much later. So while another worker is awake
    /// the first sleep is bounded instead: the store has long become visible after <see cref="RecheckAfterParkMs"/>,
    /// and one more look then finds an item the first look missed. The race needs a
    /// store still in flight at the look, so it is rare, and it costs at most that long. With every other worker
    /// parked, no worker can be between an unfenced push and its read (a worker woken after this push runs only after
    /// its waker's pop, which follows this push in the stack's order, so its later push-and-read sees this worker
    /// parked and wakes it): a full fence suffices and the sleep is not bounded.
    /// </remarks>
    private bool PushIdleAndLookAgain(Worker self, out bool recheck)
    {
        _idle.Push(self);
        recheck = _roster.Count - _idle.Count > 0;
        Interlocked.MemoryBarrier();
        if (WorkVisibleToParked() && _idle.TryRemove(self))
        {
            return false;
        }
        // Either nothing is visible, or a waker popped us first and has signalled (or is about to): sleep and take it.
        return true;
    }

    /// <summary>
    /// Whether a parking worker must look for work instead: an item is visible, or the pool is shutting down with no
    /// drain hold out (a shutting-down pool with holds parks its idle workers like a running one, since continuations may
    /// still come; once the holds are gone it wakes them all, and this look, after a full fence, sees the count).
    /// </summary>
    private bool WorkVisibleToParked() =>
        _scheduler.Sources.AnyWorkVisible() || (_scheduler.IsShutdownStarted && !_threads.HasDrainHolds);

    /// <summary>Wakes up to <paramref name="count"/> parked workers (each finds nothing and re-evaluates in <see cref="Park"/>).</summary>
    [MethodImpl(RarePath.Compile)]
    public void WakeParked(int count)
    {
        for (int i = 0; i < count && _idle.TryPop() is Worker worker; i++)
        {
            worker.Blocker.Signal();
        }
    }

    /// <summary>Wakes every parked worker (shutdown, or a limit change they must re-evaluate).</summary>
    public void WakeAll()
    {
        while (_idle.TryPop() is Worker worker)
        {
            worker.Blocker.Signal();
        }
    }
}
