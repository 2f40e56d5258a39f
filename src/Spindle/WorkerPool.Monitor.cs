using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;

namespace Spindle;

// The stall monitor: a safety net for wake-ups the enqueue path skips on purpose.
//
// A worker that queues a lone item to itself does not wake a helper (it will run the item right after the current
// one). If the current item then blocks (sync-over-async, a lock, I/O), the queued item would wait with it while other
// workers sleep. So the skipping worker records the fact (Worker.DeferredAt = its completed count, stored with a full
// fence) and arms the monitor. The monitor thread ticks every MonitorTickMs while armed; a worker whose DeferredAt has
// not moved for a whole tick (the same value two ticks running, its completed count unchanged) is stalled, and the
// monitor wakes a helper, which steals the queued item. Once no worker has anything deferred, the monitor disarms and
// sleeps on its blocker until the next arming.
//
// Arming protocol: a worker stores DeferredAt (Interlocked, a full fence) and then reads _monitorArmed; the monitor
// stores _monitorArmed = 0, fences, then reads every DeferredAt. Either the monitor sees the deferral, or the worker
// sees the monitor disarmed and re-arms it (signalling its blocker), so a deferral is never left unwatched.
//
// This is the seam where the injection controller's starvation detection (progress counters at millisecond
// granularity) will live; today it only wakes parked workers, it never adds threads.
public sealed partial class WorkerPool
{
    /// <summary>How often the armed monitor checks for stalled deferrals.</summary>
    internal const int MonitorTickMs = 1;

    private readonly ThreadBlocker _monitorBlocker = ThreadBlocker.Create();
    private Thread? _monitorThread; // created under _threadLock on first arming
    private volatile int _monitorArmed;

    /// <summary>Records that <paramref name="worker"/> skipped a wake-up a parked worker could have served.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void DeferWake(Worker worker)
    {
        if (Volatile.Read(ref _searching.Value) == 0 && (_idle.Count != 0 || Volatile.Read(ref _threadCount) < _threadTarget))
        {
            Interlocked.Exchange(ref worker.DeferredAt, worker.CompletedCountByOwner);
            if (_monitorArmed == 0)
            {
                ArmMonitor();
            }
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void ArmMonitor()
    {
        if (Interlocked.Exchange(ref _monitorArmed, 1) != 0)
        {
            return;
        }
        if (Volatile.Read(ref _monitorThread) is null)
        {
            lock (_threadLock)
            {
                if (_monitorThread is null && _state == StateRunning)
                {
                    try
                    {
                        var thread = new Thread(MonitorMain, 256 * 1024)
                        {
                            IsBackground = true,
                            Name = $"{_threadNamePrefix} monitor",
                        };
                        thread.UnsafeStart();
                        _monitorThread = thread;
                    }
                    catch (Exception)
                    {
                        // No monitor thread (the OS refused one): the item is already accepted, so the enqueue must not
                        // throw. Fall back to the eager wake-up the deferral was saving, and let a later deferral retry.
                        _monitorArmed = 0;
                        WakeWorkerIfNeeded();
                        return;
                    }
                }
            }
        }
        _monitorBlocker.Signal();
    }

    private void MonitorMain()
    {
        while (_state == StateRunning)
        {
            if (!CheckDeferrals())
            {
                _monitorArmed = 0;
                Interlocked.MemoryBarrier();
                if (!AnyDeferral())
                {
                    _monitorBlocker.Wait();
                    continue;
                }
                _monitorArmed = 1;
            }
            _monitorBlocker.Wait(MonitorTickMs);
        }
    }

    /// <summary>One tick: settles finished deferrals, rescues stalled ones. Returns whether any deferral is still open.</summary>
    private bool CheckDeferrals()
    {
        bool open = false;
        foreach (Worker worker in Volatile.Read(ref _workers))
        {
            long deferredAt = Volatile.Read(ref worker.DeferredAt);
            if (deferredAt < 0)
            {
                continue;
            }
            if (worker.CompletedCount > deferredAt || worker.HasNoLocalWork)
            {
                // The item that deferred has returned, or the queued item was taken: nothing to rescue.
                Interlocked.CompareExchange(ref worker.DeferredAt, -1, deferredAt);
                worker.MonitorSeen = -1;
                continue;
            }
            if (worker.MonitorSeen == deferredAt)
            {
                Interlocked.CompareExchange(ref worker.DeferredAt, -1, deferredAt);
                worker.MonitorSeen = -1;
                WakeWorkerIfNeeded();
                continue;
            }
            worker.MonitorSeen = deferredAt;
            open = true;
        }
        return open;
    }

    private bool AnyDeferral()
    {
        foreach (Worker worker in Volatile.Read(ref _workers))
        {
            if (Volatile.Read(ref worker.DeferredAt) >= 0)
            {
                return true;
            }
        }
        return false;
    }

    private void StopMonitor()
    {
        Thread? thread;
        lock (_threadLock)
        {
            thread = _monitorThread;
        }
        if (thread is null)
        {
            return;
        }
        _monitorBlocker.Signal();
        if (thread != Thread.CurrentThread)
        {
            thread.Join();
        }
        Debug.Assert(!thread.IsAlive || thread == Thread.CurrentThread);
    }
}
