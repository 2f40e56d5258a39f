using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Scheduling;

namespace Spindle.Threading;

// The reserve: threads of workers retired from service as surplus, kept parked so that the next injection reuses one
// instead of starting a thread.
//
// A blocking burst or a stall raises the target, the pool grows by tens or hundreds of threads in milliseconds, and
// when the burst ends the target falls back and the surplus retires. Were each retirement the end of its thread, every
// repeat of the burst would start those threads again: a start costs a system call, a stack, and about 10 KB of managed
// objects (the worker, its ring, the thread object), and a burst that repeats every few seconds pays it every time. So
// a surplus retirement takes the worker out of service only; its thread waits here on its own blocker, for at most the
// idle timeout, the same time a parked worker above the minimum waits before it exits. The built-in pool keeps its idle
// threads the same way.
//
// Protocol (every decision under the controller's _lock):
// - Entering: TryRetire(RetiredSurplus) moves the worker from service to the reserve: uncounted in the roster's Count
//   (ReserveLocked), still listed, pushed on _reserve. Its local queues are empty (checked under the lock), and it is not
//   on the idle stack (a parked worker retires before it pushes itself, or after it took itself off), so no waker and
//   no thief can hand it anything. After the lock it looks at the queues once more, as every retirement does. Then its
//   dispatch loop returns and the thread calls WaitInReserve.
// - Taking: TryAddWorker, for any reason, pops the most recently reserved worker (LIFO: the warmest stack and caches)
//   instead of creating one, counts it back in service (UnreserveLocked), counts it as a searcher as for a new worker,
//   records the reason, moves it to _returning and signals its blocker, still under the lock. The worker, woken (or
//   arriving late: a taker can pop it between its retirement and its first look), finds itself in _returning under the
//   lock, leaves it, and returns to a fresh dispatch loop. (Without _returning, a worker taken before its first look
//   could not tell that from a retirement for good: it would exit while counted in service and as a searcher, and with
//   the searcher count stuck above zero no enqueue would wake anyone.)
// - Signals: a reserved worker's blocker is signalled only under the lock, by a taker or by WakeReserve, and only while
//   the worker is in _reserve. So once the worker has seen itself out of both lists under the lock, no signal is on its
//   way, and it clears the one permit that may be left (a taker's signal it did not sleep for, or a WakeReserve's that
//   coalesced with it). Its next park then starts without a permit, as the idle coordinator's protocol requires.
// - Leaving: the thread exits when its wait times out (the idle timeout), when the pool shuts down, or when the maximum
//   was lowered below the listed threads (both signal every reserved thread): under the lock, if it is still in
//   _reserve, it leaves it and the list. If a taker popped it first, it is in _returning and serves instead.
// - The pool cannot stop while a reserved thread is listed (TryStopLocked), so shutdown, which wakes the reserve, joins
//   every such thread like any other worker's.
internal sealed partial class ThreadController
{
    // Workers out of service whose threads wait in WaitInReserve, the most recently reserved last; and workers taken
    // back into service whose threads have not yet seen it. Both under _lock.
    private readonly List<Worker> _reserve = [];
    private readonly List<Worker> _returning = [];

    /// <summary>Threads of workers retired from service that wait to be reused (see the protocol above).</summary>
    public int ReservedThreadCount => _roster.ReservedCount;

    /// <summary>
    /// Caller holds the lock and has decided to add a worker for <paramref name="reason"/>: takes the most recently
    /// reserved worker back into service, if any, and wakes it.
    /// </summary>
    private bool TryTakeFromReserveLocked(ThreadInjectionReason reason, out Worker worker)
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        if (_reserve.Count == 0)
        {
            worker = null!;
            return false;
        }
        worker = _reserve[^1];
        _reserve.RemoveAt(_reserve.Count - 1);
        Debug.Assert(worker.Local.IsEmpty, "A reserved worker holds no work.");
        _returning.Add(worker);
        _roster.UnreserveLocked();
        worker.Reinject(reason);
        _idle.CountNewWorkerAsSearcher(worker);
        Record(reason);
        worker.Blocker.Signal(); // under the lock: see "Signals" above
        return true;
    }

    /// <summary>Caller holds the lock: <paramref name="worker"/> (retiring as surplus) leaves service for the reserve.</summary>
    private void ReserveLocked(Worker worker)
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        Debug.Assert(worker.Local.IsEmpty && !_reserve.Contains(worker) && !_returning.Contains(worker));
        _roster.ReserveLocked();
        _reserve.Add(worker);
    }

    /// <summary>
    /// The calling worker's dispatch loop has ended. If the worker retired into the reserve, waits there until an
    /// injection takes it back (true: serve again) or its time is up (false: the thread exits, out of the list). False
    /// at once for a worker that was not reserved (it exits).
    /// </summary>
    public bool WaitInReserve(Worker worker)
    {
        Debug.Assert(worker.IsCurrentThread);
        int timeoutMs = _options.IdleTimeoutMilliseconds;
        long deadline = timeoutMs == Timeout.Infinite ? long.MaxValue : Stopwatch.GetTimestamp() + timeoutMs * (Stopwatch.Frequency / 1000);
        while (true)
        {
            lock (_lock)
            {
                if (_returning.Remove(worker))
                {
                    Debug.Assert(!_reserve.Contains(worker));
                    break; // taken back into service
                }
                if (!_reserve.Contains(worker))
                {
                    return false; // retired for good, or exiting at shutdown: it never entered the reserve
                }
                bool expired = deadline != long.MaxValue && Stopwatch.GetTimestamp() >= deadline;
                if (expired || _scheduler.IsShutdownStarted || _roster.Workers.Length > _maxThreads)
                {
                    _reserve.Remove(worker);
                    RemoveWorkerLocked(worker, reserved: true);
                    _retiredThreads.RemoveAll(static t => !t.IsAlive);
                    _retiredThreads.Add(worker.Thread!);
                    return false;
                }
            }
            // Not yet slept, or woken for a check that did not concern this thread: wait (on).
            _ = deadline == long.MaxValue ? worker.Blocker.Wait() : worker.Blocker.WaitUntil(deadline);
        }
        _ = worker.Blocker.Wait(0); // no signal can come any more: clear the permit one may have left (see "Signals")
        return true;
    }

    /// <summary>Wakes every reserved thread to look at the pool's state (shutdown, a lowered maximum).</summary>
    private void WakeReserve()
    {
        lock (_lock)
        {
            foreach (Worker worker in _reserve)
            {
                worker.Blocker.Signal(); // under the lock: see "Signals" above
            }
        }
    }
}
