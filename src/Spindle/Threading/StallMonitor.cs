using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Diagnostics.Tracing;
using Spindle.Primitives;
using Spindle.Telemetry;
using Spindle.Parking;
using Spindle.Scheduling;

namespace Spindle.Threading;

// The stall monitor: one low-cost thread per pool that watches the workers while any of them is awake, and sleeps on its
// blocker when the pool has been quiet for a while. It does three jobs.
//
// 1. Stalled deferrals. A worker that queues a lone item to itself while nobody is parked does not create a thread for
//    it (it will most likely run the item right after the current one; with a worker parked, the enqueue wakes it, see
//    Scheduler.TryEnqueueCore). If the current item then blocks, the queued item would wait with it. So when a thread
//    is missing (below the target, nobody searching), the enqueue opens a deferral. (A lane's slot holder that gives
//    back a slot with work left wakes a parked worker instead: see LaneSet.OnSlotFreedWithWork.) OpenDeferral stores
//    Worker.OpenDeferral records the worker's completed count (with a full fence) and makes sure the monitor is running; a
//    worker whose DeferredAt has not moved for a whole tick (the same value two ticks running, its completed count
//    unchanged) is stalled, and the monitor wakes a parked helper (or the controller adds one), which steals the work.
//
// 2. Outside work behind local work. While no worker is parked and the global queue holds work at two ticks running,
//    the tick asks every worker to look at the global queue at its next dispatch (Worker.RequestLookOutside), which
//    bounds the wait of outside work by two ticks plus the items in progress even where a worker's timed look interval
//    is stale. Work that has just arrived is left to the workers' own looks (a yield's continuation, which asks to run
//    after the local work, is not pulled ahead of it).
//
// 3. Starvation (the thread controller's detector). Work is starving when it is visible in a queue, no worker is parked
//    or searching (nobody free to take it), and no item has completed (nor has a worker run a task inline: see
//    ThreadController.WorkerProgressCount) for the stall allowance. The allowance is StallThresholdMs while the workers
//    are blocked, not computing (fewer than all cores but one of them want a CPU, by their managed waits and the
//    kernel's word: see WorkersKeepCoresBusy; threads outside the pool and other processes do not count) and the
//    runtime itself (JIT compilation, GC pauses) did not take half the window while a worker was outside a managed wait
//    (workers waiting for the JIT's lock or a collection are not blocked; workers all in managed waits are, whatever the
//    background compiler does), and max(SaturatedStallMs, 4 x the recent gap between completions) while the cores are
//    busy (long CPU-bound items; adding threads then only helps items that never end, such as a spin-wait on a flag),
//    except where all the waiting work is single items stranded behind their owners' items, which gets a thread once
//    they count as stranded (a forked child its parent spins for: see SaturatedAllowanceMs).
//    On starvation the monitor raises the controller's starvation boost and adds threads: with the workers blocked, a
//    thread per waiting item at once (blocked workers cost no CPU, so this cannot oversubscribe computation, and
//    ramping from one made a burst of 200 blocking items wait for eight doublings); with the cores busy, a ramp, 1, 2,
//    4 ..., the first step after the allowance and the next ones every SaturatedRampStepMs (at least the recent gap
//    between completions) while the stall lasts. Both are capped by the waiting items and MaxThreads, and stop as soon
//    as an item completes: a step of a thread per item takes a few hundred microseconds per thread, long enough for the
//    stall to end meanwhile, so the monitor's loop and the workers that continue the ramp compare the progress count
//    with the mark taken when the step began, and the monitor holds the boost at the threads that exist
//    (ThreadController.HoldStarvationBoost). The boost decays (halves every DecayIntervalMs) while the queues are
//    empty, or while the cores are saturated and items complete (not while work waits behind blocked workers' long
//    items: see BoostUnneeded); surplus workers then retire. CPU-bound work keeps the thread count at the target.
//
// Ticks: 1 ms while something is suspicious (a deferral is open, or work waits with no free worker and no completion),
// otherwise the interval doubles up to MaxTickMs. So a stall is noticed within MaxTickMs and acted on within the
// allowance after that: about 2-3 ms from a quiet start, 10 ms at worst, while cores are idle.
//
// Arming protocol: work can only starve while no worker is parked (a parked worker is woken by whatever next puts an
// item where it can take it: an enqueue, a local push, the rest of a batch a worker took from the global queue), so
// the monitor watches while the idle stack is empty, while a deferral is open, and while a starvation boost decays.
// Every path that can empty the idle stack or open a deferral ends in EnsureMonitor / EnsureMonitorIfNoneIdle: a
// worker leaving the idle stack (woken, or changing its mind), a new worker, a retiring worker, a deferral, a limit
// change. These set _monitorArmed and signal the blocker if it was clear. The monitor disarms only after
// QuietMsBeforeDisarm of quiet ticks: it stores _monitorArmed = 0, fences, then looks once more; a worker that emptied
// the idle stack either is seen by that look or reads the cleared flag afterwards (its read follows a full fence: the
// waker's signal, a barrier, the creation lock or the DeferredAt store) and re-arms it. So a pool that could starve is
// never left unwatched, and a mostly idle pool (a trickle of work) costs no monitor ticks at all.
//
// State: everything here is written by the monitor thread only, except _monitorArmed (atomics, by armers and the
// monitor) and _monitorThread (under _lock, by the first armer). A worker's deferral and the monitor's watch of it are
// written by this class only. The boost and the target are the controller's: the monitor asks it to raise or halve them.
internal sealed partial class StallMonitor : IStallWatch
{
    /// <summary>The monitor's tick while something looks suspicious.</summary>
    internal const int MonitorTickMs = 1;

    /// <summary>The longest tick, while the pool is busy but healthy.</summary>
    internal const int MaxTickMs = 4;

    /// <summary>How long work must wait, with no worker free and no item completing, before threads are added while cores are idle.</summary>
    internal const int StallThresholdMs = 2;

    /// <summary>The stall allowance while the pool's threads keep every core busy.</summary>
    internal const int SaturatedStallMs = 20;

    /// <summary>
    /// The step of the ramp while the cores are busy, once the stall has earned its first thread: no item completed for
    /// the whole allowance, nor since (items that never end; the recent gap between completions lengthens it).
    /// </summary>
    internal const int SaturatedRampStepMs = 5;

    /// <summary>How often the starvation boost halves while it is not needed.</summary>
    internal const int DecayIntervalMs = 10;

    /// <summary>How long the pool must be quiet before the monitor sleeps until it is needed again.</summary>
    internal const int QuietMsBeforeDisarm = 20;

    private readonly Lock _lock = new();
    private readonly string _threadNamePrefix;
    private readonly Scheduler _scheduler;
    private readonly IdleCoordinator _idle;
    private readonly ThreadController _threads;
    private readonly ThreadBlocker _monitorBlocker = ThreadBlocker.Create();
    private Thread? _monitorThread; // created under _lock on first arming
    private volatile int _monitorArmed;
    private readonly Func<bool> _prepareRarePath;
    private bool _rarePathsPrepared; // monitor thread only

    // Monitor-thread-only state of the starvation detector.
    private long _lastCompleted;
    private long _lastProgressAt;        // Stopwatch timestamp of the last tick that saw an item complete
    // Process CPU time and timestamp when the monitor began judging the current stall (0: not yet). Read lazily, only
    // while a stall or a boost is being judged: Environment.CpuUsage is getrusage, which sums over every thread of the
    // process under a kernel lock, so reading it on every tick with progress costs a lot in a process with a thousand
    // threads (wait threads, say) and contends with their wake-ups.
    private TimeSpan _cpuAtStallStart;
    // The runtime's own time (JIT compilation, summed over threads, and GC pauses) at the same moment: see RuntimeBusy.
    private TimeSpan _runtimeAtStallStart;
    private long _stallStartAt;
    private double _completionGapMs;      // moving average of the time between ticks that saw completions
    private bool _outsideWaitingAtLastTick; // the previous tick saw outside work waiting with no worker parked
    private long _lastInjectionAt;        // 0: nothing injected in the current stall
    private int _ramp = 1;
    private bool _boostForBlockedWorkers; // the boost was raised for workers judged blocked (see BoostUnneeded)
    private long _decayCheckedAt, _completedAtDecayCheck; // and the progress count then
    private long _quietSince;

    private readonly string _poolName;

    /// <summary>
    /// A monitor for the pool of <paramref name="options"/>, <paramref name="scheduler"/>, <paramref name="idle"/> and
    /// <paramref name="threads"/>; <paramref name="prepareRarePath"/> compiles the next of the rare paths ahead of its
    /// first call, false when none is left (see PrepareRarePathsWhileQuiet).
    /// </summary>
    public StallMonitor(WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, ThreadController threads, Func<bool> prepareRarePath)
    {
        _prepareRarePath = prepareRarePath;
        _threadNamePrefix = options.ThreadNamePrefixOrName;
        _poolName = options.Name;
        _scheduler = scheduler;
        _idle = idle;
        _threads = threads;
    }

    /// <summary>Diagnostics for tests: the controller's state in one line.</summary>
    public string Describe() =>
        $"threads {_threads.ThreadCount}, target {_threads.ThreadTarget}, idle {_idle.IdleCount}, searching {_idle.SearchingCount}, " +
        $"pending {_scheduler.Sources.PendingCount}, drain holds {_threads.DrainHoldCount}, stopped {_threads.HasStopped}, boost {_threads.StarvationBoost}, blocking {_threads.BlockingCount}, " +
        $"monitor armed {_monitorArmed}, monitor alive {Volatile.Read(ref _monitorThread)?.IsAlive}, starvation injections " +
        $"{_threads.GetInjectionCount(ThreadInjectionReason.Starvation)}, creation failures {_threads.GetInjectionCount(ThreadInjectionReason.CreationFailed)}";

    /// <summary>
    /// Records that <paramref name="worker"/> (the calling thread) queued work it will most likely run itself, where a
    /// helper could have served it (nobody searches, and a thread is missing or someone is parked), and makes sure the
    /// monitor watches.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void OpenDeferral(Worker worker)
    {
        worker.OpenDeferral();
        EnsureMonitor();
    }

    /// <summary>
    /// Makes sure the monitor is watching when no worker is parked: only then can work starve (with a worker parked,
    /// an enqueue wakes it). Called by a worker that leaves the idle stack, a new worker, and a retiring one.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void EnsureMonitorIfNoneIdle()
    {
        if (_idle.IdleCount == 0 && _monitorArmed == 0)
        {
            ArmMonitor();
        }
    }

    /// <summary>Makes sure the monitor is watching (see the arming protocol).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void EnsureMonitor()
    {
        if (_monitorArmed == 0)
        {
            ArmMonitor();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining | RarePath.Compile)]
    private void ArmMonitor()
    {
        if (Interlocked.Exchange(ref _monitorArmed, 1) != 0)
        {
            return;
        }
        bool refused = false;
        if (Volatile.Read(ref _monitorThread) is null)
        {
            lock (_lock)
            {
                if (_monitorThread is null && !_threads.HasStopped)
                {
                    try
                    {
                        var thread = new Thread(MonitorMain, 256 * 1024)
                        {
                            IsBackground = true,
                            Name = $"{_threadNamePrefix} monitor",
                        };
                        _threads.Starts.Start(thread, PoolThreadKind.Monitor); // counts a refusal
                        _monitorThread = thread;
                    }
                    catch (Exception)
                    {
                        // No monitor thread (the OS refused one): the item is already accepted, so the caller must not
                        // throw. Fall back to the eager wake-up a deferral was saving (outside the lock), and let a later
                        // call retry.
                        _monitorArmed = 0;
                        refused = true;
                    }
                }
            }
        }
        if (refused)
        {
            _idle.WakeWorkerIfNeeded();
            return;
        }
        _monitorBlocker.Signal();
    }

    [MethodImpl(RarePath.Compile)]
    private void MonitorMain()
    {
        int interval = MonitorTickMs;
        _lastProgressAt = Stopwatch.GetTimestamp();
        _stallStartAt = 0;
        // Until the pool has stopped, not only until shutdown begins: during a drain, workers blocked on continuations
        // queued by the drain itself need threads as much as before it (Release wakes the monitor after the stop).
        while (!_threads.HasStopped)
        {
            long now = Stopwatch.GetTimestamp();
            bool urgent = Tick(now, out bool quiet);
            if (!quiet)
            {
                _quietSince = now;
            }
            else if (Stopwatch.GetElapsedTime(_quietSince, now).TotalMilliseconds >= QuietMsBeforeDisarm)
            {
                _monitorArmed = 0;
                Interlocked.MemoryBarrier();
                if (IsQuiet())
                {
                    if (_rarePathsPrepared || !PrepareRarePathsWhileQuiet())
                    {
                        _monitorBlocker.Wait();
                    }
                    interval = MonitorTickMs;
                    _quietSince = Stopwatch.GetTimestamp();
                    ResetProgress(_quietSince);
                    continue;
                }
                _monitorArmed = 1;
            }
            interval = urgent ? MonitorTickMs : Math.Min(interval * 2, MaxTickMs);
            _monitorBlocker.Wait(interval);
        }
    }

    private void ResetProgress(long now)
    {
        ForgetWorkersVerdict();
        _lastProgressAt = now;
        _lastInjectionAt = 0;
        _ramp = 1;
    }

    /// <summary>
    /// Nothing to watch: some worker is parked (or none exists), no deferral is open, no boost is left to decay, and no
    /// refused worker waits for its retry.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private bool IsQuiet() =>
        (_idle.IdleCount != 0 || _threads.ThreadCount == 0) && !AnyDeferral() && _threads.StarvationBoost == 0
        && !_threads.CreationRetryPending;

    /// <summary>Whether the monitor's thread has been started (it runs until the pool stops).</summary>
    public bool HasThread => Volatile.Read(ref _monitorThread) is not null;

    /// <summary>One monitor tick. Returns whether the next tick should come soon; <paramref name="quiet"/>: nothing to watch.</summary>
    [MethodImpl(RarePath.Compile)]
    private bool Tick(long now, out bool quiet)
    {
        bool deferralsOpen = CheckDeferrals();
        _threads.RetryCreationIfDue();

        long completed = _threads.WorkerProgressCount;
        bool progress = completed != _lastCompleted;
        _lastCompleted = completed;
        if (progress)
        {
            if (_lastInjectionAt != 0)
            {
                // Threads were added for this stall and an item has now completed: the stall is over, so the ramp
                // stops here (the threads being started by the ramp's own workers included).
                _threads.HoldStarvationBoost();
            }
            double gap = Stopwatch.GetElapsedTime(_lastProgressAt, now).TotalMilliseconds;
            _completionGapMs = _completionGapMs == 0 ? gap : 0.75 * _completionGapMs + 0.25 * gap;
            ResetProgress(now);
        }

        int threads = _threads.ThreadCount;
        int idle = _idle.IdleCount;
        bool pending = _scheduler.Sources.AnyWorkVisible();
        // Outside work seen waiting at two ticks running (so it has waited at least a tick, not just arrived): every
        // worker looks outside at its next dispatch.
        bool outsideWaiting = idle == 0 && pending && !_scheduler.GlobalQueueIsEmpty;
        // The marks first, so that the looks requested below never act on a stale one.
        bool stranded = MarkStrandedWorkers(now, out int strandedLone);
        if ((outsideWaiting && _outsideWaitingAtLastTick) || (stranded && idle == 0))
        {
            RequestLooksOutside();
        }
        _outsideWaitingAtLastTick = outsideWaiting;
        bool starving = pending && !progress && idle == 0 && _idle.SearchingCount == 0;
        bool cpuBusy = false;     // the process's CPU time says the cores are busy (see IsSaturated)
        bool runtimeBusy = false; // the runtime's own time took half the window, with a worker outside a managed wait (see RuntimeBusy)
        bool judged = true;
        if (starving || _threads.StarvationBoost > 0)
        {
            if (_stallStartAt == 0)
            {
                // First look at this stall: take the CPU baseline now and judge from the next tick (1 ms later).
                _stallStartAt = now;
                _cpuAtStallStart = Environment.CpuUsage.TotalTime;
                _runtimeAtStallStart = RuntimeTime();
                judged = false;
            }
            else
            {
                double windowMs = Stopwatch.GetElapsedTime(_stallStartAt, now).TotalMilliseconds;
                TimeSpan cpu = Environment.CpuUsage.TotalTime;
                TimeSpan runtime = RuntimeTime();
                double cpuMs = (cpu - _cpuAtStallStart).TotalMilliseconds;
                double runtimeMs = (runtime - _runtimeAtStallStart).TotalMilliseconds;
                int cores = Environment.ProcessorCount;
                cpuBusy = IsSaturated(cpuMs, windowMs, cores);
                // The runtime's time counts only while a worker is outside a managed wait: a worker held by the JIT's
                // lock or a collection is, one blocked on an event, a lock or a sleep is not, whatever the background
                // compiler does meanwhile (its tier-up compilations run for tens of milliseconds after a busy start).
                runtimeBusy = RuntimeBusy(runtimeMs, windowMs) && AnyWorkerOutsideManagedWait();
                if (windowMs >= 100)
                {
                    _stallStartAt = now; // a rolling window while a long stall or boost lasts
                    _cpuAtStallStart = cpu;
                    _runtimeAtStallStart = runtime;
                }
            }
        }
        else
        {
            _stallStartAt = 0;
        }
        if (starving && judged)
        {
            long since = _lastInjectionAt != 0 ? _lastInjectionAt : _lastProgressAt;
            double stalledMs = Stopwatch.GetElapsedTime(since, now).TotalMilliseconds;
            double shortest = _lastInjectionAt == 0 ? StallThresholdMs : MonitorTickMs;
            // The workers' states are read only once the stall has lasted the shorter allowance: before that nothing
            // is added whatever they say.
            if (stalledMs >= shortest)
            {
                bool saturated = runtimeBusy || WorkersKeepCoresBusy(cpuBusy, now);
                // Saturated by long CPU-bound items, only items that never end justify threads, so the allowance is
                // long. Not for fired timers: a timer callback waiting behind such items gets a thread after the short
                // allowance, so timers stay punctual however long the running items are.
                // Once a saturated stall has earned its first thread, the next steps of the ramp come sooner: still no
                // item has completed, so what runs does not end, and each step of 20 ms made ten such items wait 80-100 ms.
                double allowance = saturated && !_scheduler.Urgent.MayBeWaiting
                    ? SaturatedAllowanceMs(injected: _lastInjectionAt != 0,
                        strandedLone: strandedLone > 0 && _scheduler.Sources.PendingCount <= strandedLone, _completionGapMs)
                    : shortest;
                if (stalledMs >= allowance)
                {
                    InjectForStarvation(threads, stalledMs, saturated);
                    _lastInjectionAt = now;
                }
            }
        }
        DecayBoost(now, pending, progress, cpuBusy || runtimeBusy);
        quiet = !deferralsOpen && (idle != 0 || threads == 0) && _threads.StarvationBoost == 0 && !_threads.CreationRetryPending;
        return deferralsOpen || starving;
    }

    /// <summary>
    /// Whether <paramref name="cpuMs"/> of process CPU time over <paramref name="windowMs"/> means the cores are busy
    /// (ramp slowly) rather than idle (the workers are blocked: a thread per waiting item). The stall itself is judged
    /// by the workers (see WorkersKeepCoresBusy), with this as the check where the kernel cannot be asked; the boost's
    /// decay reads it as it is.
    /// </summary>
    /// <remarks>
    /// Idle means at least one whole core unused over the window (a blocked worker uses none); on one core, at most
    /// half of it used. Half a core was too fine a line for windows of a millisecond or two: two workers JIT-compiling
    /// a cold pool's first items for 20 ms measured 1.4 cores of 2, were judged idle, and got a thread per waiting
    /// item, after which the surplus threads' own descheduling kept the judgement wrong (100-600 threads for 1,000
    /// yield loops).
    /// </remarks>
    [MethodImpl(RarePath.Compile)]
    internal static bool IsSaturated(double cpuMs, double windowMs, int cores) =>
        windowMs > 0 && cpuMs / windowMs >= Math.Max(0.5, cores - 1);

    /// <summary>
    /// Whether the runtime itself took at least half of the stall's window (<paramref name="runtimeMs"/>: time spent
    /// JIT-compiling, summed over threads, plus GC pauses): then the workers are waiting for code or for the collector,
    /// not blocked in a wait of their own, and a thread per waiting item would only wait for the same.
    /// </summary>
    /// <remarks>
    /// A cold pool's first items are compiled by one worker while the others wait for the same methods on the JIT's
    /// lock: one core busy, the rest idle, no item completing. Judged by CPU alone, that looked like blocked workers:
    /// 1,000 yield loops that met such a moment got 300-460 threads (1 process in 3 or 4), and their p99 latency went
    /// from about 4 ms to 70-80 ms. The stall is then judged saturated (the long allowance and a ramp), which
    /// still adds threads if the stall outlasts the compilation. Only while some worker is outside a managed wait
    /// (<c>AnyWorkerOutsideManagedWait</c>): workers all blocked on events, locks or sleeps wait for none of it, and the
    /// background compiler's tier-ups after a busy start (tens of milliseconds of JIT on another core) made one gated
    /// backlog get a ramp in one round and a thread per item in the next. The boost's decay reads the same verdict.
    /// </remarks>
    internal static bool RuntimeBusy(double runtimeMs, double windowMs) => windowMs > 0 && runtimeMs >= windowMs / 2;

    /// <summary>The runtime's own time so far: JIT compilation (all threads) and GC pauses. Zero where there is no JIT.</summary>
    [MethodImpl(RarePath.Compile)]
    private static TimeSpan RuntimeTime() => JitInfo.GetCompilationTime(currentThread: false) + GC.GetTotalPauseDuration();

    [MethodImpl(RarePath.Compile)]
    private void InjectForStarvation(int threads, double stalledMs, bool saturated)
    {
        bool fresh = _threads.StarvationBoost == 0;
        long waiting = _scheduler.Sources.PendingCount;
        // Cores idle: the workers are blocked, so a thread per waiting item (up to the maximum) is what ends the stall,
        // and adding them all at once costs no CPU-bound throughput. Cores busy: ramp 1, 2, 4 ... (see the remarks).
        long wanted = saturated ? _ramp : waiting;
        int add = _threads.RaiseStarvationBoost(threads, (int)Math.Min(wanted, Math.Max(waiting, 1)));
        if (add == 0)
        {
            return;
        }
        // A ramp's step (busy cores) makes the whole boost the ramp's; a thread per item keeps a fresh boost blocked.
        _boostForBlockedWorkers = !saturated && (fresh || _boostForBlockedWorkers);
        if (SpindleEventSource.Log.IsOn(EventLevel.Warning, SpindleEventSource.Keywords.Threads))
        {
            SpindleEventSource.Log.StarvationDetected(_poolName, stalledMs, threads, waiting, add);
        }
        // Thread starts take a few hundred microseconds each on a busy machine, so a large step lasts long enough for
        // the stall to end meanwhile (a gate opening, a lock released): an item completing stops it, as it stops the
        // workers that continue the ramp (ThreadController.ContinueRamp reads the mark).
        long mark = _threads.WorkerProgressCount;
        _threads.RampProgressMark = mark;
        for (int i = 0; i < add; i++)
        {
            if (_threads.WorkerProgressCount != mark)
            {
                _threads.HoldStarvationBoost();
                break;
            }
            if (!_threads.TryAddWorker(ThreadInjectionReason.Starvation))
            {
                break;
            }
        }
        _ramp = Math.Min(_ramp * 2, 1024);
    }

    /// <summary>Wakes the monitor thread to look at the pool now (shutdown: it exits).</summary>
    public void Signal() => _monitorBlocker.Signal();

    /// <summary>The pool has stopped: wakes the monitor thread to exit and returns it (null when it never started).</summary>
    public Thread? Release()
    {
        Thread? thread;
        lock (_lock)
        {
            thread = _monitorThread;
        }
        _monitorBlocker.Signal();
        return thread;
    }
}
