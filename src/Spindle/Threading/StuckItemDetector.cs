using System;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.Threading;
using Spindle.Lanes;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Threading;

/// <summary>
/// Stuck-item detection (<see cref="WorkerPoolOptions.StuckItemThreshold"/>): finds a worker (or the relief thread)
/// that has been inside one item for the threshold and reports it once, through the <c>Spindle</c> event source and
/// <see cref="WorkerPool.StuckWorkItemDetected"/>.
/// </summary>
/// <remarks>
/// <para>It runs on the pool's timer thread (<see cref="Timers.TimerService"/> calls <see cref="Check"/> every
/// <see cref="CheckPeriodMs"/> while the pool has workers), so it needs no free worker: every worker may be stuck. The
/// timer thread is the only caller, one check at a time, so the watch it keeps on each watched thread
/// (<see cref="StuckWatch"/>) needs no synchronization.</para>
/// <para>A worker counts the items it starts and completes, and publishes the callback of the one it runs (see
/// <see cref="Worker"/>). A check that finds the started count ahead of the completed count <c>n</c> notes <c>n</c> and
/// the time: item <c>n + 1</c> has started. A later check that reads the same completed count knows that item has not
/// completed since, so it has run at least since the noted time. Once that is the threshold, the item is reported and
/// <c>n</c> remembered, so it is reported once however long it runs. With a check every quarter threshold, an item is
/// reported between one and one and a half thresholds after it started (later only if the timer thread itself is held
/// up).</para>
/// <para>The relief thread (<see cref="OutsideRelief"/>) publishes what it runs in the same way and is watched after the
/// workers; its reports name worker number 0.</para>
/// <para>Items of a lane queued as long-running (<see cref="LongRunningLaneItem"/>) are not watched: they are long on
/// purpose, as the pool's own long-running items are, which run on dedicated threads that are not watched either.</para>
/// </remarks>
internal sealed class StuckItemDetector
{
    private readonly IPoolHost _pool;
    private readonly ThreadController _threads;
    private readonly OutsideRelief _relief;
    private readonly long _thresholdTicks; // Stopwatch ticks

    public StuckItemDetector(IPoolHost pool, WorkerPoolOptions options, ThreadController threads, OutsideRelief relief)
    {
        Debug.Assert(options.DetectsStuckItems);
        _pool = pool;
        _threads = threads;
        _relief = relief;
        TimeSpan threshold = options.StuckItemThreshold;
        _thresholdTicks = (long)(threshold.TotalSeconds * Stopwatch.Frequency);
        CheckPeriodMs = Math.Max(1, (long)threshold.TotalMilliseconds / 4);
    }

    /// <summary>How often the timer thread calls <see cref="Check"/> while the pool has workers: a quarter threshold, in wheel ticks (ms).</summary>
    public long CheckPeriodMs { get; }

    /// <summary>
    /// Whether the pool has a thread to watch: a worker, or the relief thread inside an item (which can outlast every
    /// worker's retirement). A snapshot; the timer service reads it under its lock.
    /// </summary>
    public bool HasWorkers => _threads.ThreadCount > 0 || _relief.StartedCount != _relief.CompletedCount;

    /// <summary>Timer thread only: looks at every worker and at the relief thread once, at the Stopwatch timestamp <paramref name="now"/>.</summary>
    public void Check(long now)
    {
        foreach (Worker worker in _threads.Workers)
        {
            long completed = worker.Record.CompletedCount; // first: see the remarks
            StuckWatch watch = worker.StuckWatch;
            if (!watch.IsDue(completed, worker.Record.StartedCount, now, _thresholdTicks))
            {
                continue;
            }
            object? callback = worker.Record.Callback;
            object? owner = worker.Record.Owner;
            Lane? lane = worker.CurrentLane;
            if (callback is null || worker.Record.CompletedCount != completed)
            {
                continue; // it ended while we looked: not stuck after all (its successor is watched afresh)
            }
            watch.MarkReported(completed);
            if (!ItemDescriber.IsLongRunning(callback))
            {
                Report(worker.Id, worker.Thread, callback, owner, lane, Stopwatch.GetElapsedTime(watch.Since, now));
            }
        }

        OutsideRelief relief = _relief;
        long reliefCompleted = relief.CompletedCount;
        StuckWatch reliefWatch = relief.StuckWatch;
        if (reliefWatch.IsDue(reliefCompleted, relief.StartedCount, now, _thresholdTicks))
        {
            object? callback = relief.RunningCallback;
            object? owner = relief.RunningOwner;
            Lane? lane = relief.RunningLane;
            if (callback is not null && relief.CompletedCount == reliefCompleted)
            {
                reliefWatch.MarkReported(reliefCompleted);
                if (!ItemDescriber.IsLongRunning(callback))
                {
                    Report(0, relief.Thread, callback, owner, lane, Stopwatch.GetElapsedTime(reliefWatch.Since, now));
                }
            }
        }
    }

    private void Report(int workerId, Thread? thread, object callback, object? owner, Lane? lane, TimeSpan runningTime)
    {
        _pool.Metrics.RecordStuck(lane);
        bool traced = SpindleEventSource.Log.IsOn(EventLevel.Warning, SpindleEventSource.Keywords.WorkItems);
        bool raised = _pool.HasStuckWorkItemHandlers;
        if (!traced && !raised)
        {
            return; // nobody listens: no description to build
        }
        string description = ItemDescriber.Describe(callback, owner, lane);
        if (traced)
        {
            SpindleEventSource.Log.StuckWorkItem(_pool.Name, description, workerId, runningTime.TotalMilliseconds);
        }
        if (raised)
        {
            _pool.RaiseStuckWorkItemDetected(description, thread, runningTime, lane?.Options.Name);
        }
    }
}
