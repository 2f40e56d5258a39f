using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;

namespace Spindle;

// Searching, parking and waking.
//
// Protocol (after Go's scheduler and Tokio's idle.rs, with the LIFO blocker of dotnet/runtime PR 123921):
// - _searching counts workers that are looking for work (spinning over the queues). A worker may start searching only
//   while fewer than half of the non-parked workers (and fewer than MinSearchers, whichever is more) are searching;
//   otherwise it parks at once, since the searchers will find whatever there is.
// - An enqueue publishes its item and then calls WakeWorkerIfNeeded, which does nothing if anyone is searching or
//   nobody is parked. Otherwise it claims _searching 0 -> 1 on behalf of the worker it is about to wake (so that a
//   burst of enqueues wakes one worker, not one per item), pops the most recently parked worker and signals it.
// - A searcher that finds work stops searching; if it was the last searcher and more work is visible, it wakes one
//   more worker (which arrives as a searcher), so parallelism ramps up one worker at a time without a thundering herd.
// - A searcher that finds nothing decrements _searching, pushes itself on the idle stack, and only then looks at every
//   queue once more before blocking. Both the decrement and the push are full fences, and the global enqueue's claim
//   is a full fence before its read of _searching / the idle count, so (store-buffering argument) either the enqueuer
//   sees this worker counted as searching or parked, or this worker's last look sees the item. A wake-up cannot be lost
//   for work queued from outside.
// - A local push by a worker is not fenced (it is the hot path), and a lone local item deliberately wakes nobody (the
//   worker runs it next). If the pushing worker's current item then blocks, the stall monitor wakes a helper
//   (WorkerPool.Monitor.cs). The store-buffering race between an unfenced push and a parking searcher is closed on the
//   parking side by a process-wide barrier (see Park).
public sealed partial class WorkerPool
{
    /// <summary>Test seam: upper bound on a searcher's backoff attempts when every other core is free.</summary>
    internal static int s_maxSpinAttempts = 7;

    /// <summary>Test seam: how many times a searcher yields its core after spinning, before it parks.</summary>
    internal static int s_yieldAttempts = 4;

    /// <summary>
    /// Searchers allowed however few workers are awake. Half of two awake workers is one searcher, so the other worker
    /// parked at once whenever it ran dry and was woken again by the next burst (a futex round trip, and a process-wide
    /// barrier, per burst); measured in-process on 2 cores, outside batches of 1,000 Run items went from about 5.7M to
    /// 10.2M items/s when both workers may search. From three awake workers on, half of them (rounded up) is at least
    /// two anyway, so this changes nothing for larger pools.
    /// </summary>
    private const int MinSearchers = 2;

    /// <summary>Wakes a parked worker if work may be waiting and nobody is looking for it.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    internal void WakeWorkerIfNeeded()
    {
        if (Volatile.Read(ref _searching.Value) == 0)
        {
            WakeWorkerIfNeededSlow();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void WakeWorkerIfNeededSlow()
    {
        if (_idle.Count == 0)
        {
            // Nobody to wake: maybe the pool has not reached its thread target yet.
            if (Volatile.Read(ref _threadCount) < _threadTarget)
            {
                TryAddWorker(ThreadInjectionReason.Demand);
            }
            return;
        }
        if (Interlocked.CompareExchange(ref _searching.Value, 1, 0) != 0)
        {
            return; // someone started searching meanwhile
        }
        Worker? worker = _idle.TryPop();
        if (worker is null)
        {
            Interlocked.Decrement(ref _searching.Value);
            return;
        }
        worker.WokenAsSearcher = true;
        worker.Blocker.Signal();
    }

    /// <summary>Looks for work in the global queue and in other workers' rings, spinning with backoff between looks.</summary>
    private bool Search(Worker self, out WorkItemEntry item)
    {
        bool counted = self.WokenAsSearcher;
        if (counted)
        {
            self.WokenAsSearcher = false;
        }
        else if (!TryBeginSearching())
        {
            item = default;
            return false;
        }

        // A worker arriving as a searcher skipped TryTakeWork (and a start hook may have queued locally), so its own slot
        // and ring are looked at once here; otherwise Dispatch has just found them empty, and only its owner fills them.
        bool checkOwnWork = counted;
        int attempts = SpinAttemptsForFreeCores();
        for (int attempt = 0; ; attempt++)
        {
            if ((checkOwnWork && (self.TryTakeLifoSlot(out item) || self.Ring.TryPop(out item)))
                || TryStealOrTakeGlobal(self, out item))
            {
                int left = Interlocked.Decrement(ref _searching.Value);
                Debug.Assert(left >= 0);
                if (left == 0 && AnyWorkVisible())
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
            else if (attempt < attempts + s_yieldAttempts)
            {
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
            int active = Volatile.Read(ref _threadCount) - _idle.Count;
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
        int running = Volatile.Read(ref _threadCount) - _idle.Count - 1; // other non-parked workers
        int free = Environment.ProcessorCount - Math.Max(running, 0);
        if (free <= 0 || s_maxSpinAttempts <= 0)
        {
            return 0;
        }
        // Each extra attempt roughly doubles the spin; giving up one attempt per busy core halves it per busy core.
        int attempts = s_maxSpinAttempts - (Environment.ProcessorCount - free);
        return Math.Max(attempts, 1);
    }

    private bool TryStealOrTakeGlobal(Worker self, out WorkItemEntry item)
    {
        if (UrgentWorkMayBeWaiting && TryTakeUrgent(out item))
        {
            self.NoteTimerCallback();
            return true;
        }
        if (self.TryTakeGlobalBatch(out item))
        {
            return true;
        }
        Worker[] workers = Volatile.Read(ref _workers);
        int count = workers.Length;
        if (count > 1)
        {
            int start = (int)((uint)self.Backoff.SpinCount(Backoff.MaxExponent) % (uint)count);
            for (int i = 0; i < count; i++)
            {
                Worker victim = workers[(start + i) % count];
                if (victim == self)
                {
                    continue;
                }
                if ((!victim.Ring.IsEmpty && victim.Ring.StealHalfInto(self.Ring, out item) > 0) || victim.TryTakeLifoSlot(out item))
                {
                    return true;
                }
            }
        }
        item = default;
        return false;
    }

    /// <summary>Whether any queue of the pool holds an item right now.</summary>
    private bool AnyWorkVisible()
    {
        if (!_globalQueue.IsEmpty || UrgentWorkMayBeWaiting)
        {
            return true;
        }
        foreach (Worker worker in Volatile.Read(ref _workers))
        {
            if (!worker.HasNoLocalWork)
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>
    /// Blocks the worker until it is woken. Returns false when the worker should exit instead: shutdown with nothing
    /// left, or retirement (surplus above the target, or idle for the idle timeout above the minimum).
    /// </summary>
    private bool Park(Worker self)
    {
        Debug.Assert(self.HasNoLocalWork, "A worker parks only with an empty ring and LIFO slot.");
        self.Ring.ReleaseTakenSlots(); // an idle worker must not keep stolen items' state alive
        if (_state != StateRunning && MayExitForShutdown())
        {
            return false;
        }
        if (Volatile.Read(ref _threadCount) > _threadTarget && TryRetire(self, ThreadInjectionReason.RetiredSurplus))
        {
            return false;
        }
        if (!PushIdleAndLookAgain(self))
        {
            // Work appeared (or shutdown started) while parking: look again without sleeping. This worker was counted
            // idle for a moment, so the monitor may have judged the pool quiet and disarmed: re-arm it if nobody else is
            // parked. The barrier orders the idle-stack removal before the read of _monitorArmed (see the arming
            // protocol in WorkerPool.Monitor.cs).
            Interlocked.MemoryBarrier();
            EnsureMonitorIfNoneIdle();
            return true;
        }
        while (true)
        {
            int timeout = _idleTimeoutMs != Timeout.Infinite && Volatile.Read(ref _threadCount) > Volatile.Read(ref _minThreads)
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
            if (TryRetire(self, ThreadInjectionReason.RetiredIdle))
            {
                return false;
            }
            if (!PushIdleAndLookAgain(self))
            {
                Interlocked.MemoryBarrier();
                EnsureMonitorIfNoneIdle();
                return true;
            }
        }
        EnsureMonitorIfNoneIdle(); // this worker is busy again: if nobody is left parked, the monitor must watch
        return true;
    }

    /// <summary>
    /// Pushes the worker on the idle stack, then looks at every queue once more. Returns true when the worker should
    /// sleep, false when it took itself back off the stack because work (or shutdown) appeared.
    /// </summary>
    private bool PushIdleAndLookAgain(Worker self)
    {
        _idle.Push(self);
        // Local pushes are not fenced (they are the hot path), so a pusher's store of its item may still sit in its
        // store buffer while it reads _searching as non-zero and skips both the wake-up and the stall monitor. A
        // process-wide barrier here flushes every other core's pending stores before the look below: either this look
        // sees the item, or the pusher's read came after our _searching decrement and idle push, and it wakes us or
        // arms the monitor. The barrier interrupts every core running the process (an IPI, expensive in a VM), so it
        // is skipped when every worker is parked: then no worker can be between an unfenced push and its read (a worker
        // woken after our count runs only after its waker's pop, which follows our push and count in the lock's order,
        // so its later push-and-read sees us parked and wakes us).
        if (Volatile.Read(ref _threadCount) - _idle.Count > 0)
        {
            Interlocked.MemoryBarrierProcessWide();
        }
        else
        {
            Interlocked.MemoryBarrier();
        }
        // A shutting-down pool with a drain hold out parks its idle workers like a running one (continuations may still
        // come); once the holds are gone it wakes them all, and this look (after the push, a full fence) sees the count.
        if ((AnyWorkVisible() || (_state != StateRunning && Volatile.Read(ref _drainHolds) == 0)) && _idle.TryRemove(self))
        {
            return false;
        }
        // Either nothing is visible, or a waker popped us first and has signalled (or is about to): sleep and take it.
        return true;
    }

    /// <summary>Wakes every parked worker (shutdown, or a limit change they must re-evaluate).</summary>
    private void WakeAllWorkers()
    {
        while (_idle.TryPop() is Worker worker)
        {
            worker.Blocker.Signal();
        }
    }
}
