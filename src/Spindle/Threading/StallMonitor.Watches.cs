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

/// <summary>The stall monitor's watch of each worker: requested looks outside, stranded local work, deferrals.</summary>
internal sealed partial class StallMonitor
{
    /// <summary>
    /// Outside work has waited in the global queue for a tick and no worker is parked: every worker looks at the global
    /// queue at its next dispatch (see <see cref="WorkerRequests.RequestLookOutside"/>), so outside work waits at most about
    /// two ticks plus the items in progress, even behind long local items that a worker's look interval has not adapted
    /// to yet.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private void RequestLooksOutside()
    {
        foreach (Worker worker in _threads.Workers)
        {
            worker.Requests.RequestLookOutside();
        }
    }

    /// <summary>How long the pool must stay quiet, with a core idle, before the monitor compiles some rare paths ahead.</summary>
    internal const int PrepareAfterQuietMs = 10;

    /// <summary>How many rare paths the monitor compiles ahead after each such look (a few milliseconds of compilation).</summary>
    internal const int RarePathsPerQuietLook = 8;

    /// <summary>
    /// The pool is quiet and the monitor disarmed: each time it has stayed so for <see cref="PrepareAfterQuietMs"/> with
    /// at least one core of the process idle over that time (<see cref="IsSaturated"/> false), compiles the next
    /// <see cref="RarePathsPerQuietLook"/> rare paths ahead (see <c>RarePathWarmUp</c>), one method at a time, until none
    /// is left, someone arms the monitor (whose signal then ends the wait that follows at once) or the pool stops (a
    /// shutdown joins this thread). So a stall that begins meanwhile waits for one compilation at most (about a
    /// millisecond), where the first stall used to compile the monitor's whole judgement and injection first; and work
    /// that keeps the cores busy outside the workers (a cold process's long-running items starting, say) is not made
    /// to share them with the compiler: the compilation waits for a later quiet spell. Returns whether the blocker was
    /// signalled during a wait (the monitor is armed again: no wait may follow).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private bool PrepareRarePathsWhileQuiet()
    {
        while (true)
        {
            TimeSpan cpuBefore = Environment.CpuUsage.TotalTime;
            long from = Stopwatch.GetTimestamp();
            if (_monitorBlocker.Wait(PrepareAfterQuietMs))
            {
                return true;
            }
            double windowMs = Stopwatch.GetElapsedTime(from).TotalMilliseconds;
            if (IsSaturated((Environment.CpuUsage.TotalTime - cpuBefore).TotalMilliseconds, windowMs, Environment.ProcessorCount))
            {
                return false;
            }
            for (int i = 0; i < RarePathsPerQuietLook; i++)
            {
                if (_rarePathsPrepared || _monitorArmed != 0 || _threads.HasStopped)
                {
                    return false;
                }
                _rarePathsPrepared = !_prepareRarePath();
            }
        }
    }

    /// <summary>
    /// How long a worker must hold local work without completing an item before its work counts as stranded: long
    /// enough that a worker running one ordinary long item (a partition step that forked its halves) keeps its children,
    /// short enough that a blocked one's wait is a rescue, not a hang.
    /// </summary>
    internal const int StrandedAfterMs = 10;

    /// <summary>
    /// How long a stall may last, with the workers keeping the cores busy, before the monitor adds a thread:
    /// <see cref="SaturatedStallMs"/> or four times the recent gap between completions (<paramref name="completionGapMs"/>),
    /// whichever is longer, for the first thread (long CPU-bound items: only items that never end justify threads); the
    /// ramp's step, at least that gap, for each next one (<paramref name="injected"/>). <paramref name="strandedLone"/>:
    /// all the work that waits is single items stranded behind their owners' items (see <see cref="MarkStrandedWorkers"/>),
    /// such as a child forked by an item that then waits for it without blocking (spinning, say), which starts only when
    /// another thread takes it. Then the stall gets its first thread once such an item counts as stranded: the gap cannot
    /// judge that case, since every such stall lengthens the gap that the next allowance is computed from (on one core a
    /// child waited 0.25-0.8 s behind its parent). The monitor cannot tell that child from one its parent does not wait
    /// for; with other work waiting too (a backlog of long items that each leave one behind) the gap rule stands.
    /// </summary>
    internal static double SaturatedAllowanceMs(bool injected, bool strandedLone, double completionGapMs) =>
        injected ? Math.Max(SaturatedRampStepMs, completionGapMs)
        : strandedLone ? StrandedAfterMs
        : Math.Max(SaturatedStallMs, 4 * completionGapMs);

    /// <summary>
    /// Whether the starvation boost may decay: the queues are empty, or items complete while the cores are busy
    /// (<paramref name="saturated"/>), unless the boost gave blocked workers a thread per waiting item
    /// (<paramref name="forBlockedWorkers"/>), work still waits, and the threads' items are long (fewer items ended over
    /// the decay interval than there are threads: <paramref name="threadsTurnOver"/> false): those threads take the
    /// waiting work as their own items end.
    /// </summary>
    /// <remarks>
    /// Busy cores are read from the process's CPU time, which is not the workers': the thread starts of a blocked burst
    /// and the compilation of their first code keep a core busy, and the first items to end then read as CPU-bound work
    /// completing. Halving the boost every 10 ms on that word retired the threads whose items ended while items still
    /// waited (200 items of a 100 ms sleep: 128 threads with 42 items queued, then 24 threads with 20 still queued 90 ms
    /// later), and each of those items waited for one of the blocked threads left. Where the threads turn over (a gated
    /// backlog of short items draining once the gate opens), the boost decays as before, and so does a boost raised
    /// by the ramp (busy cores).
    /// </remarks>
    internal static bool BoostUnneeded(bool pending, bool progress, bool saturated, bool forBlockedWorkers, bool threadsTurnOver) =>
        !pending || (saturated && progress && (!forBlockedWorkers || threadsTurnOver));

    /// <summary>Halves the starvation boost every <see cref="DecayIntervalMs"/> while it is unneeded (see <see cref="BoostUnneeded"/>).</summary>
    [MethodImpl(RarePath.Compile)]
    private void DecayBoost(long now, bool pending, bool progress, bool saturated)
    {
        if (_threads.StarvationBoost == 0)
        {
            _boostForBlockedWorkers = false;
        }
        // The rule for any boost at every tick of the interval; the blocked workers' part once it is up.
        if (!BoostUnneeded(pending, progress, saturated, forBlockedWorkers: false, threadsTurnOver: false) || _threads.StarvationBoost == 0)
        {
            _decayCheckedAt = now;
            _completedAtDecayCheck = _lastCompleted;
            return;
        }
        if (Stopwatch.GetElapsedTime(_decayCheckedAt, now).TotalMilliseconds < DecayIntervalMs)
        {
            return;
        }
        bool threadsTurnOver = _lastCompleted - _completedAtDecayCheck >= _threads.ThreadCount;
        _decayCheckedAt = now;
        _completedAtDecayCheck = _lastCompleted;
        if (!BoostUnneeded(pending, progress, saturated, _boostForBlockedWorkers, threadsTurnOver))
        {
            return;
        }
        // Busy surplus workers retire after their current item; parked ones would wait for the idle timeout, so wake
        // that many: each finds nothing, goes back to Park, sees the pool above its target and retires.
        _idle.WakeParked(_threads.HalveStarvationBoost());
    }

    /// <summary>
    /// Marks the workers that have held local work for <see cref="StrandedAfterMs"/> without completing an item (see
    /// <see cref="WorkerRequests.Stranded"/>) and clears the mark of those that completed one or have none left. Returns whether
    /// some worker is marked: its work waits for it while the others keep busy with their own, and when nobody is parked
    /// (the caller's condition for acting on it) no wake-up or deferral will bring anyone to it, so the caller asks for
    /// looks at every tick until the mark clears (a look takes one item). <paramref name="lone"/>: how many marked
    /// workers hold exactly one queued item (a snapshot), such as the one a lone local push left for its owner to run
    /// next (see <see cref="WorkerLocalQueue.MayStealFrom"/>) or what is left of a batch. Monitor thread only.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private bool MarkStrandedWorkers(long now, out int lone)
    {
        bool marked = false;
        lone = 0;
        Worker[] workers = _threads.Workers;
        foreach (Worker worker in workers)
        {
            WorkerWatch watch = WatchOf(worker);
            if (worker.Local.IsEmpty)
            {
                watch.StrandCount = -1;
                worker.Requests.MarkStranded(false);
                continue;
            }
            long completed = worker.Record.CompletedCount;
            if (completed != watch.StrandCount)
            {
                watch.StrandCount = completed;
                watch.StrandSince = now;
                worker.Requests.MarkStranded(false);
                continue;
            }
            if (Stopwatch.GetElapsedTime(watch.StrandSince, now).TotalMilliseconds >= StrandedAfterMs)
            {
                worker.Requests.MarkStranded(true);
                marked = true;
                lone += worker.Local.Count == 1 ? 1 : 0;
            }
        }
        ForgetExitedWorkers(workers);
        return marked;
    }

    /// <summary>
    /// The most kernel states one judgement reads beyond the runnable workers it needs: a pool of hundreds of threads
    /// blocked in system calls (synchronous socket reads, say) costs a few microseconds each, and workers left unread
    /// count as waiting.
    /// </summary>
    internal const int MaxStateReadsBeyondNeeded = 64;

    /// <summary>
    /// Whether the workers' own work keeps the cores busy, for a stall that has lasted the shorter allowance: whether
    /// at least <see cref="RunnableWorkersForBusyCores"/> of them want a CPU. A worker in a managed wait (a lock, an
    /// event, a sleep: <see cref="System.Threading.ThreadState.WaitSleepJoin"/>) is blocked; on Linux the kernel says
    /// of each other one whether it runs or waits for a CPU, or sleeps in a wait of another kind (a system call, a native
    /// lock: see <see cref="KernelThreadState"/>). Where the kernel cannot say, a worker outside a managed wait may be
    /// computing, and the process's CPU time over the stall (<paramref name="cpuBusy"/>) must agree before the cores
    /// count as busy.
    /// </summary>
    /// <remarks>
    /// <para>The process's CPU time alone judged wrong both ways: a thread outside the pool that keeps one core of two
    /// busy (a producer queueing behind a gate that holds every worker) made blocked workers look busy, so a backlog
    /// behind them got a ramp from one instead of a thread per item, or the opposite from one stall to the next, whenever
    /// the producer's share sat at the one-core line; and beside other busy processes, workers computing on two cores got
    /// one core between them, which read as a core left idle, so CPU-bound items got a thread per waiting item (34-49
    /// threads for 100 items of about 27 ms of CPU on two cores beside two busy loops; 3-22 now, all from the ramp).</para>
    /// <para>The workers' CPU time over the stall does not do either: the stall is often the workers' preemption itself
    /// (both wait in the run queue for the same slice, using no CPU). The state is a snapshot, and a worker still on its
    /// way into a wait (spinning before it blocks) reads as runnable: the stall is then judged busy, which costs the
    /// long allowance and a ramp, not oversubscription; with the cores contended, a worker can take a whole slice to
    /// get there.</para>
    /// </remarks>
    [MethodImpl(RarePath.Compile)]
    private bool WorkersKeepCoresBusy(bool cpuBusy, long now)
    {
        // A verdict of busy holds for RejudgeBusyMs: a long stall of CPU-bound items is judged every tick, and on many
        // cores each judgement reads as many states as cores (a few microseconds each). A verdict of blocked acts at once
        // (a thread per waiting item), so it is never kept.
        if (_busySeenAt != 0 && Stopwatch.GetElapsedTime(_busySeenAt, now).TotalMilliseconds < RejudgeBusyMs)
        {
            return true;
        }
        int needed = RunnableWorkersForBusyCores(Environment.ProcessorCount);
        bool kernelKnows = KernelThreadState.IsAvailable;
        int runnable = CountRunnableWorkers(needed, kernelKnows);
        bool busy = runnable >= needed && (kernelKnows || cpuBusy);
        _busySeenAt = busy ? now : 0;
        return busy;
    }

    /// <summary>How long a verdict that the workers keep the cores busy holds within one stall (see WorkersKeepCoresBusy).</summary>
    internal const int RejudgeBusyMs = MaxTickMs;

    // Monitor thread only: when the current stall was last judged busy by its workers (0: not busy, or a new stall).
    private long _busySeenAt;

    /// <summary>An item completed: the stall is over, and so is the verdict on its workers.</summary>
    private void ForgetWorkersVerdict() => _busySeenAt = 0;

    /// <summary>The most workers whose managed state one look reads (a field read each, no system call).</summary>
    internal const int MaxManagedStateReads = 256;

    /// <summary>
    /// Whether some started worker is outside a managed wait (<see cref="System.Threading.ThreadState.WaitSleepJoin"/>):
    /// only such a worker can be waiting for the runtime (the JIT's lock, a collection), which waits natively. Monitor
    /// thread only.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private bool AnyWorkerOutsideManagedWait()
    {
        int reads = 0;
        foreach (Worker worker in _threads.Workers)
        {
            if (++reads > MaxManagedStateReads)
            {
                return false; // workers left unread count as waiting, as in CountRunnableWorkers
            }
            Thread? thread = worker.Thread;
            if (thread is not null && (thread.ThreadState & (System.Threading.ThreadState.WaitSleepJoin | System.Threading.ThreadState.Unstarted | System.Threading.ThreadState.Stopped)) == 0)
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>
    /// How many workers must want a CPU for the cores to count as busy: all cores but one (a whole core left idle means
    /// the workers are blocked), at least one.
    /// </summary>
    internal static int RunnableWorkersForBusyCores(int cores) => Math.Max(1, cores - 1);

    /// <summary>
    /// Counts the workers that want a CPU now, stopping at <paramref name="needed"/>. <paramref name="kernelKnows"/>: the
    /// kernel can be asked here (<see cref="KernelThreadState.IsAvailable"/>); where not, a worker outside a managed wait
    /// counts as runnable. A worker that has not yet published its kernel id (the monitor has just
    /// started it: it has run nothing) or whose state cannot be read (it has exited) does not count. Monitor thread
    /// only.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    private int CountRunnableWorkers(int needed, bool kernelKnows)
    {
        int runnable = 0;
        int reads = 0;
        foreach (Worker worker in _threads.Workers)
        {
            if (runnable >= needed || reads >= needed + MaxStateReadsBeyondNeeded)
            {
                break;
            }
            Thread? thread = worker.Thread;
            if (thread is null || (thread.ThreadState & (System.Threading.ThreadState.WaitSleepJoin | System.Threading.ThreadState.Unstarted)) != 0)
            {
                continue; // blocked in a managed wait, or not started yet: no CPU either way
            }
            if (!kernelKnows)
            {
                runnable++;
                continue;
            }
            int id = worker.Record.KernelThreadId;
            if (id == 0)
            {
                continue; // just started: its first item will say what it does
            }
            reads++;
            if (KernelThreadState.Read(id) == KernelThreadState.State.Runnable)
            {
                runnable++;
            }
        }
        return runnable;
    }

    /// <summary>Settles finished deferrals, rescues stalled ones. Returns whether any deferral is still open.</summary>
    [MethodImpl(RarePath.Compile)]
    private bool CheckDeferrals()
    {
        bool open = false;
        foreach (Worker worker in _threads.Workers)
        {
            long deferredAt = worker.Requests.DeferredAt;
            if (deferredAt < 0)
            {
                continue;
            }
            WorkerWatch watch = WatchOf(worker);
            if (worker.Record.CompletedCount > deferredAt || worker.Local.IsEmpty)
            {
                // The item that deferred has returned, or the queued item was taken: nothing to rescue.
                worker.Requests.TryCloseDeferral(deferredAt);
                watch.SeenDeferral = -1;
                continue;
            }
            if (watch.SeenDeferral == deferredAt)
            {
                worker.Requests.TryCloseDeferral(deferredAt);
                watch.SeenDeferral = -1;
                _idle.WakeWorkerIfNeeded();
                continue;
            }
            watch.SeenDeferral = deferredAt;
            open = true;
        }
        return open;
    }

    [MethodImpl(RarePath.Compile)]
    private bool AnyDeferral()
    {
        foreach (Worker worker in _threads.Workers)
        {
            if (worker.Requests.DeferredAt >= 0)
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>The monitor's own record of one worker (monitor thread only).</summary>
    private sealed class WorkerWatch
    {
        /// <summary>The worker's deferral (<see cref="WorkerRequests.DeferredAt"/>) as the previous tick saw it; -1: none.</summary>
        public long SeenDeferral = -1;

        /// <summary>The completed count last seen with local work present (-1: none), and when it was first seen.</summary>
        public long StrandCount = -1;
        public long StrandSince;
    }

    /// <summary>Monitor thread only: the record of each listed worker, made when the monitor first looks at it.</summary>
    private readonly Dictionary<Worker, WorkerWatch> _watches = new(ReferenceEqualityComparer.Instance);

    private WorkerWatch WatchOf(Worker worker)
    {
        if (!_watches.TryGetValue(worker, out WorkerWatch? watch))
        {
            watch = new WorkerWatch();
            _watches.Add(worker, watch);
        }
        return watch;
    }

    /// <summary>Monitor thread only: drops the records of workers no longer listed (exited ones).</summary>
    [MethodImpl(RarePath.Compile)]
    private void ForgetExitedWorkers(Worker[] workers)
    {
        if (_watches.Count > workers.Length)
        {
            ForgetUnlistedWatches(workers);
        }
    }

    /// <summary>
    /// The rare part of <see cref="ForgetExitedWorkers"/>, a method of its own: a lambda over <c>listed</c> in the same
    /// method made every tick allocate its closure, whether a worker had exited or not.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining | RarePath.Compile)]
    private void ForgetUnlistedWatches(Worker[] workers)
    {
        var listed = new HashSet<Worker>(workers, ReferenceEqualityComparer.Instance);
        var gone = new List<Worker>();
        foreach (Worker watched in _watches.Keys)
        {
            if (!listed.Contains(watched))
            {
                gone.Add(watched);
            }
        }
        foreach (Worker worker in gone)
        {
            _watches.Remove(worker);
        }
    }
}
