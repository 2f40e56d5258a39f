using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Scheduling;

namespace Spindle.Polling;

// Who collects readiness: the poller while a worker is parked, the busy workers otherwise (see the class remarks).
internal sealed unsafe partial class EpollDriver
{
    /// <summary>The most events one harvest takes (a stack buffer; the rest wait for the next harvest or poll).</summary>
    private const int HarvestEvents = 64;

    /// <summary>A harvest that found events makes the next one due this soon: 50 µs.</summary>
    private static readonly long s_shortestHarvestGap = Math.Max(1, Stopwatch.Frequency / 20_000);

    /// <summary>A harvest that found nothing doubles the gap up to this: 1 ms, the poller's own period.</summary>
    private static readonly long s_longestHarvestGap = Stopwatch.Frequency / 1_000;

    /// <summary>
    /// A searching worker, which has nothing else to do, harvests this often whatever the busy workers' gap: 10 µs. The
    /// gap's back-off suits workers with work of their own, not a searcher waiting for the next event of a lightly
    /// loaded connection (one connection's round trips on 2 cores, p99: 141 µs with the shared gap, 123 with this one,
    /// 96 with the poller alone; the rest of the difference went with the rule in WaitForEvents).
    /// </summary>
    private static readonly long s_searchingHarvestGap = Math.Max(1, Stopwatch.Frequency / 100_000);

    // _workersHarvest: 1 while the poller leaves readiness to the busy workers (it sleeps on _pollerSleep between
    // polls), 0 while it waits in epoll_wait. Written by the poller only.
    private int _workersHarvest;
    private readonly ThreadBlocker _pollerSleep = ThreadBlocker.Create();
    // The workers' rate limit: the next harvest is due at _harvestDueAt (Stopwatch ticks), claimed by compare-exchange,
    // so one worker harvests at a time. _harvestGap doubles after a harvest that found nothing (up to 1 ms) and drops to
    // the shortest after one that found events: idle sockets beside busy workers cost about one system call a
    // millisecond.
    private long _harvestDueAt;
    private long _harvestGap = s_shortestHarvestGap;
    private long _searchingHarvestDueAt; // the same for searching workers, with the fixed s_searchingHarvestGap
    // Harvests in flight: the descriptors close only once none is (see WaitForHarvests).
    private int _harvesting;
    private long _harvestedByWorkers;

    /// <summary>
    /// How many events a wake-up of the waiting poller must bring for it to leave readiness to busy workers (see
    /// <see cref="WaitForEvents"/>; tests lower it to one).
    /// </summary>
    internal int EventsToLeaveToWorkers { get; set; } = 2;

    /// <summary>How often the poller polls while the workers harvest (milliseconds; tests lengthen it).</summary>
    internal int PollPeriodMs { get; set; } = 1;

    /// <summary>Events that workers delivered (not the poller): tests read it.</summary>
    internal long HarvestedByWorkers => Interlocked.Read(ref _harvestedByWorkers);

    /// <summary>Whether the workers collect readiness now (the poller sleeps between polls): tests read it.</summary>
    internal bool WorkersHarvest => Volatile.Read(ref _workersHarvest) != 0;

    /// <summary>Whether the epoll and event descriptors have closed (the poller has exited, or never started): tests read it.</summary>
    internal bool IsClosed => Volatile.Read(ref _descriptorsClosed);

    /// <inheritdoc/>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void HarvestIfDue(bool searching)
    {
        if (Volatile.Read(ref _workersHarvest) == 0)
        {
            return; // the poller waits on the kernel and delivers at once
        }
        long now = Stopwatch.GetTimestamp();
        ref long dueAt = ref searching ? ref _searchingHarvestDueAt : ref _harvestDueAt;
        long due = Volatile.Read(ref dueAt);
        if (now >= due && Interlocked.CompareExchange(ref dueAt, now + (searching ? s_searchingHarvestGap : _harvestGap), due) == due)
        {
            Harvest();
        }
    }

    /// <inheritdoc/>
    public void OnWorkerParked()
    {
        // The worker's push on the idle stack is fenced before this read, and the poller reads the idle count after its
        // fenced write of the flag: if the poller missed the parked worker, the worker sees the flag and ends its sleep.
        if (Volatile.Read(ref _workersHarvest) != 0)
        {
            _pollerSleep.Signal();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void Harvest()
    {
        Interlocked.Increment(ref _harvesting); // a full fence before the descriptors' state is read
        try
        {
            if (Volatile.Read(ref _descriptorsClosed))
            {
                return;
            }
            byte* events = stackalloc byte[HarvestEvents * 16];
            int count = LinuxIo.EpollWait(_epoll, events, HarvestEvents, 0);
            if (count > 0)
            {
                Interlocked.Add(ref _harvestedByWorkers, count);
                _harvestGap = s_shortestHarvestGap;
                Deliver(events, count, poller: false);
            }
            else
            {
                _harvestGap = Math.Min(_harvestGap * 2, s_longestHarvestGap);
            }
        }
        finally
        {
            Interlocked.Decrement(ref _harvesting);
        }
    }

    /// <summary>
    /// The poller's wait for events: in epoll_wait while workers await a wake-up (see
    /// <see cref="Scheduler.WorkersAwaitWakeUp"/>); otherwise it lets the workers harvest, sleeps a poll period (a parking
    /// worker or <see cref="Stop"/> ends the sleep), and polls without waiting. Returns what epoll_wait returned.
    /// </summary>
    private int WaitForEvents(byte* events, int capacity, int lastCount)
    {
        // Into the workers' hands only from a wake-up that brought several events: one event per wake-up is a light
        // load, whose workers park between events, and switching would cost a wake-up of the poller by each parking
        // worker (one connection's round trips, p99: 123 µs with a switch at any wake-up, 110 with this rule, 104 with
        // the poller alone; 2 cores). Once there, the poller stays while the workers stay busy (its own polls then
        // mostly find nothing).
        if (!_scheduler.WorkersAwaitWakeUp && (lastCount >= EventsToLeaveToWorkers || _workersHarvest != 0))
        {
            Volatile.Write(ref _workersHarvest, 1);
            Interlocked.MemoryBarrier(); // the flag before the idle count (see OnWorkerParked)
            if (!_scheduler.WorkersAwaitWakeUp && !Volatile.Read(ref _stopping))
            {
                _pollerSleep.Wait(PollPeriodMs);
                return LinuxIo.EpollWait(_epoll, events, capacity, 0);
            }
        }
        Volatile.Write(ref _workersHarvest, 0);
        return LinuxIo.EpollWait(_epoll, events, capacity, -1);
    }

    /// <summary>The descriptors are about to close (<see cref="_descriptorsClosed"/> is set): waits out harvests in flight.</summary>
    private void WaitForHarvests()
    {
        Interlocked.MemoryBarrier(); // the flag before the count (see Harvest)
        var spinner = default(SpinWait);
        while (Volatile.Read(ref _harvesting) != 0)
        {
            spinner.SpinOnce();
        }
    }
}
