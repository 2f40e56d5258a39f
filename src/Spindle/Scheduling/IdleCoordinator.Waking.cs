using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Threading;

namespace Spindle.Scheduling;

// Waking (see the protocol in IdleCoordinator.cs): who brings a parked worker back, and as what. The searching count and
// the idle stack are this component's; an enqueue, the timer service and the thread controller ask here.
internal sealed partial class IdleCoordinator
{
    /// <summary>Wakes a parked worker if work may be waiting and nobody is looking for it.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void WakeWorkerIfNeeded()
    {
        if (Volatile.Read(ref _searching.Value) == 0)
        {
            _ = WakeWorkerIfNeededSlow(queuedWork: false);
        }
    }

    /// <summary>
    /// <see cref="WakeWorkerIfNeeded"/> for an item just queued on the global queue: when no worker is free to take it
    /// (none parked, none searching, none to add), the relief thread may have to (see <see cref="OutsideRelief"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void WakeWorkerForOutsideWork()
    {
        if (Volatile.Read(ref _searching.Value) != 0)
        {
            return;
        }
        // Nobody parked and no thread missing (the demand target is at most the target): the slow path could only say
        // so. Checked here because it is the steady state of a backlog queued from outside, once per item.
        if ((_idle.Count == 0 && !_roster.IsBelowTarget) || !WakeWorkerIfNeededSlow(queuedWork: true))
        {
            _relief.OnOutsideWorkUnattended();
        }
    }

    /// <summary>
    /// Work is waiting that no enqueue will report and nobody is parked to take it (a lane's slot was given back while its
    /// queue held items): the relief thread may have to (see <see cref="OutsideRelief"/>).
    /// </summary>
    public void OnWorkUnattended()
    {
        if (Volatile.Read(ref _searching.Value) == 0)
        {
            _relief.OnOutsideWorkUnattended();
        }
    }

    /// <summary>
    /// Returns false when nobody was free to wake and no thread was added. <paramref name="queuedWork"/>: the caller has
    /// just queued shared work (the pool's queue or a lane), possibly from a thread outside the pool.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool WakeWorkerIfNeededSlow(bool queuedWork)
    {
        if (_idle.Count == 0)
        {
            // Nobody to wake: maybe the pool has not reached its thread target yet. An enqueue does not start the threads
            // of a starvation ramp: the stall monitor and the workers it adds start those, and an enqueue that started
            // them itself made the thread that queues wait for each start (Thread.Start returns once the thread runs:
            // on busy cores, a scheduler slice) while the ramp was already under way. The other wakes (a worker's local
            // push, the last searcher's hand-off, the monitor's rescue of a stalled deferral) still fill the whole target.
            if (!queuedWork)
            {
                return _roster.IsBelowTarget && _threads.TryAddWorker(ThreadInjectionReason.Demand);
            }
            if (_roster.IsBelowDemandTarget)
            {
                return _threads.TryAddWorkerBelowDemandTarget();
            }
            // A ramp under way (the boost above the threads that exist) will come for the item: the relief thread, which
            // the caller arms when this returns false, would only take a place the ramp fills. Not while thread starts
            // are refused and retried later: then nobody comes sooner than the relief.
            return _roster.IsBelowTarget && !_threads.CreationRetryPending;
        }
        if (Interlocked.CompareExchange(ref _searching.Value, 1, 0) != 0)
        {
            return true; // someone started searching meanwhile
        }
        return WakeParkedAsCountedSearcher();
    }

    /// <summary>
    /// Wakes workers for <paramref name="count"/> ready items handed over at once from outside the workers (a burst of
    /// timer firings): one, as <see cref="WakeWorkerIfNeeded"/> does, and for a burst into a pool whose workers were all
    /// parked a second one at the same time, while fewer workers are awake than there are cores.
    /// </summary>
    /// <remarks>
    /// The second wake cannot go through <see cref="WakeWorkerIfNeeded"/>: the first wake has just counted its worker as a
    /// searcher. Left to the search's hand-off, the second worker was woken by the first only once that one ran, after
    /// two wake-ups in a row: on a virtual machine whose idle cores halt, 0.2-4.4 ms after the first in 17 of 22 bursts
    /// of 1,000 firings (2 cores). Into a pool whose workers are awake the workers' own hand-offs bring in more as they
    /// find the firings; a wake there only added a worker to cores they held (firings into a pool saturated with 1 ms
    /// items, 2 cores: p99 lateness 2.2 ms against 2.6-2.8 ms with it).
    /// </remarks>
    public void WakeForBurst(int count)
    {
        bool allParked = _idle.Count == _roster.Count;
        WakeWorkerIfNeeded();
        if (count > 1 && allParked && _roster.Count - _idle.Count < Environment.ProcessorCount)
        {
            Interlocked.Increment(ref _searching.Value);
            _ = WakeParkedAsCountedSearcher();
        }
    }

    /// <summary>
    /// The caller has counted one more searcher for the worker it wakes: pops the most recently parked worker and wakes it
    /// as that searcher, or takes the count back when nobody is parked. Counting first keeps the count at or above the
    /// searchers in flight: a woken searcher decrements it as soon as it finds work.
    /// </summary>
    private bool WakeParkedAsCountedSearcher()
    {
        Worker? worker = _idle.TryPop();
        if (worker is null)
        {
            Interlocked.Decrement(ref _searching.Value);
            return false;
        }
        worker.Requests.MarkWokenAsSearcher();
        worker.Blocker.Signal();
        return true;
    }

    /// <summary>
    /// The thread controller is adding <paramref name="worker"/>: it counts as a searcher until it first looks for work,
    /// so the enqueues that follow do not each create another thread; it hands the role on like any searcher.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public void CountNewWorkerAsSearcher(Worker worker)
    {
        worker.Requests.MarkWokenAsSearcher();
        Interlocked.Increment(ref _searching.Value);
    }

    /// <summary>The new worker counted by <see cref="CountNewWorkerAsSearcher"/> never started.</summary>
    public void UncountUnstartedWorker() => Interlocked.Decrement(ref _searching.Value);
}
