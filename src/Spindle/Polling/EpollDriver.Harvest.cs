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
    // Harvests in flight: the descriptors close only once none is (see WaitForHarvests).
    private int _harvesting;
    private long _harvestedByWorkers;

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
    public void HarvestIfDue()
    {
        if (Volatile.Read(ref _workersHarvest) == 0)
        {
            return; // the poller waits on the kernel and delivers at once
        }
        long now = Stopwatch.GetTimestamp();
        long due = Volatile.Read(ref _harvestDueAt);
        if (now >= due && Interlocked.CompareExchange(ref _harvestDueAt, now + _harvestGap, due) == due)
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
    /// The poller's wait for events: in epoll_wait while workers await a wake-up (one parked, or none exists); otherwise
    /// it lets the workers harvest, sleeps a poll period (a parking worker or <see cref="Stop"/> ends the sleep), and
    /// polls without waiting. Returns what epoll_wait returned.
    /// </summary>
    private int WaitForEvents(byte* events, int capacity)
    {
        if (!_scheduler.WorkersAwaitWakeUp)
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
