using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Reflection;
using System.Runtime.CompilerServices;
using Spindle.Lanes;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Telemetry;

/// <summary>
/// The pool's instruments on a <see cref="Meter"/> named <c>Spindle</c> (one meter instance per pool, all with that
/// name, so a listener that enables the name sees every pool). Names follow the runtime's <c>dotnet.thread_pool.*</c>
/// instruments and the OpenTelemetry conventions; every measurement carries the pool's name
/// (<c>spindle.pool.name</c>), and the lane instruments the lane's name and priority. Attribute values that name a
/// kind (a reason, a priority, a kind of thread) are lowercase snake_case, as the semantic conventions write them.
/// </summary>
/// <remarks>
/// <para>One source of truth: every observable instrument reads the same counters as the pool's API
/// (<see cref="WorkerPool.ThreadCount"/>, <see cref="WorkerPool.CompletedWorkItemCount"/>,
/// <see cref="WorkerPool.PendingWorkItemCount"/>, <see cref="WorkerPoolLane.CompletedWorkItemCount"/>, ...), when a
/// listener collects, so they cost nothing between collections and nothing at all while nobody listens.</para>
/// <para>The meter is disposed when the pool stops. Until then the runtime's list of meters refers to it, and through
/// its callbacks to the pool: a pool that is never shut down stays reachable, as its threads already keep it.</para>
/// <para>Both histograms are sampled, paced by time (<see cref="SamplePacer"/>; a pace set during a burst does not
/// outlast it: a worker samples its first items after it parks, a thread outside the pool at least every 10 ms while it
/// keeps queueing), about one sample per 100 µs of each
/// thread, and every item when items are further apart than that). The queue-wait histogram
/// (<c>spindle.pool.work_item.wait.duration</c>, queued to started) is sampled at the enqueue: while a listener has it
/// enabled, an enqueue the calling thread's pacer chooses wraps its entry in a small object carrying the time it was queued (one allocation per sampled item), which records the wait when a worker
/// starts it. With the histogram off, an enqueue pays one check of the instrument's enabled state.</para>
/// <para>The run-time histogram (<c>spindle.pool.work_item.duration</c>): a worker times the items its pacer chooses
/// (two clock reads), only while a listener has the histogram enabled; the other items pay one decrement of a
/// worker-owned counter. Dedicated threads and the relief thread time every item while it is enabled
/// (<see cref="Scheduling.ItemRunner.Run"/> with <see cref="Primitives.SamplePacer.EveryItem"/>): their items are few and long. A first version timed one item in 32 and recorded one enqueue in 64: with a listener on every
/// instrument, a chain of 30 ns items ran at 0.78x its unobserved speed (24.9M against 32.0M items/s), the recorded
/// measurements costing more than the items.</para>
/// <para>Both histograms advise their bucket boundaries (<see cref="DurationBuckets"/>, 1 µs to 10 s): a collector's
/// default boundaries (OpenTelemetry's 0, 5, 10, 25 ... 10,000) are made for milliseconds and would put every item of a
/// pool, measured in seconds, in the first bucket.</para>
/// <para>Failures are counted too, so that an alert can be set on a metric: items that threw
/// (<c>spindle.pool.work_item.exception.count</c>, with the exception's type in <c>error.type</c>) and items reported
/// stuck (<c>spindle.pool.work_item.stuck.count</c>). Both are plain counters added to when it happens, which is rare.</para>
/// </remarks>
internal sealed class PoolMetrics : IDisposable
{
    /// <summary>The meter's name.</summary>
    public const string MeterName = "Spindle";

    /// <summary>
    /// The histograms' advised bucket boundaries, in seconds: 1, 2.5 and 5 of each decade from 1 µs to 10 s. Items of a
    /// pool take microseconds to seconds, and so do their waits.
    /// </summary>
    internal static readonly IReadOnlyList<double> DurationBuckets =
    [
        0.000_001, 0.000_002_5, 0.000_005,
        0.000_01, 0.000_025, 0.000_05,
        0.000_1, 0.000_25, 0.000_5,
        0.001, 0.002_5, 0.005,
        0.01, 0.025, 0.05,
        0.1, 0.25, 0.5,
        1, 2.5, 5,
        10,
    ];

    /// <summary>The meter's version: the package's (the informational version without its source revision).</summary>
    internal static readonly string? Version = VersionOf(typeof(PoolMetrics).Assembly);

    // Reasons for a thread added and for one retired, with their attribute values (CreationFailed is neither: failed
    // creations have their own instrument, by kind of thread).
    private static readonly (ThreadInjectionReason Reason, string Value)[] s_addedReasons =
    [
        (ThreadInjectionReason.Demand, "demand"),
        (ThreadInjectionReason.Starvation, "starvation"),
        (ThreadInjectionReason.BlockingRegion, "blocking_region"),
        (ThreadInjectionReason.LongRunning, "long_running"),
        (ThreadInjectionReason.MinimumRaised, "minimum_raised"),
    ];

    private static readonly (ThreadInjectionReason Reason, string Value)[] s_retiredReasons =
    [
        (ThreadInjectionReason.RetiredIdle, "idle"),
        (ThreadInjectionReason.RetiredSurplus, "surplus"),
    ];

    private static readonly (Primitives.PoolThreadKind Kind, string Value)[] s_threadKinds =
        Array.ConvertAll(Enum.GetValues<PoolThreadKind>(), static kind => (kind, TagValues.SnakeCase(kind.ToString())));

    private readonly Meter _meter;
    private readonly Histogram<double> _duration;
    private readonly Histogram<double> _wait;
    private readonly Counter<long> _exceptions;
    private readonly Counter<long> _stuck;
    // Per thread, not per pool: a shared pacer written by every enqueue while the histogram is on would put one cache
    // line under every producer and worker. A thread's pace runs across pools. A worker's enqueues use the worker's own
    // pacer (Worker.WaitPacer): the enqueue has already read Worker.Current, and a field of it costs less than a second
    // thread-static access, which on a chain of 20 ns items measured a few percent.
    [ThreadStatic]
    private static SamplePacer t_waitPacer;
    private readonly KeyValuePair<string, object?> _poolTag;
    private readonly bool _ownsMeter;

    public PoolMetrics(IPoolReadings pool, IMeterFactory? meterFactory = null)
    {
        // From the host's factory when it has one (the container owns, and disposes, what it hands out; a factory
        // hands the same meter to pools of the same options, so the pool does not dispose it); else the pool's own.
        var meterOptions = new MeterOptions(MeterName) { Version = Version };
        _meter = meterFactory is null ? new Meter(meterOptions) : meterFactory.Create(meterOptions);
        _ownsMeter = meterFactory is null;
        _poolTag = new KeyValuePair<string, object?>("spindle.pool.name", pool.Name);
        KeyValuePair<string, object?> poolTag = _poolTag;

        _meter.CreateObservableUpDownCounter("spindle.pool.thread.count", () => new Measurement<long>(pool.ThreadCount, poolTag),
            "{thread}", "Worker threads of the pool (created and not yet retired), blocked ones included.");
        _meter.CreateObservableUpDownCounter("spindle.pool.dedicated_thread.count", () => new Measurement<long>(pool.DedicatedThreadCount, poolTag),
            "{thread}", "Dedicated threads of long-running items, running or idle.");
        _meter.CreateObservableUpDownCounter("spindle.pool.thread.blocking.count", () => new Measurement<long>(pool.BlockingCount, poolTag),
            "{thread}", "Workers inside a blocking region.");
        _meter.CreateObservableCounter("spindle.pool.work_item.count", () => new Measurement<long>(pool.CompletedWorkItemCount, poolTag),
            "{work_item}", "Work items that have finished running (normally or by throwing), lanes included.");
        _meter.CreateObservableUpDownCounter("spindle.pool.queue.length", () => new Measurement<long>(pool.PendingWorkItemCount, poolTag),
            "{work_item}", "Accepted work items that have not started, lanes included.");
        _meter.CreateObservableCounter("spindle.pool.work_item.cancelled.count", () => new Measurement<long>(pool.CancelledWorkItemCount, poolTag),
            "{work_item}", "Accepted work items the pool's shutdown cancelled.");
        _meter.CreateObservableCounter("spindle.pool.callback.redirected.count", () => new Measurement<long>(pool.RedirectedCallbackCount, poolTag),
            "{work_item}", "Callbacks that arrived after the pool stopped and ran on the built-in thread pool.");
        _meter.CreateObservableCounter("spindle.pool.thread.added.count", () => InjectionCounts(pool, poolTag, s_addedReasons),
            "{thread}", "Threads the pool started, by reason (spindle.thread.reason: demand, starvation, blocking_region, long_running, minimum_raised).");
        _meter.CreateObservableCounter("spindle.pool.thread.retired.count", () => InjectionCounts(pool, poolTag, s_retiredReasons),
            "{thread}", "Worker threads that exited while the pool ran, by reason (spindle.thread.reason: idle, surplus).");
        _meter.CreateObservableCounter("spindle.pool.thread.creation_failure.count", () => CreationFailures(pool, poolTag),
            "{thread}", "Thread starts the OS refused, by kind of thread (spindle.thread.kind); the pool carries on without them.");
        _meter.CreateObservableUpDownCounter("spindle.pool.thread.limit", () => new Measurement<long>(pool.MaxThreads, poolTag),
            "{thread}", "The pool's maximum worker threads (set, or derived from the OS's thread limit).");
        _meter.CreateObservableCounter("spindle.pool.steal.count", () => new Measurement<long>(pool.StealCount, poolTag),
            "{steal}", "Items a worker took from another worker's local queue.");
        _meter.CreateObservableCounter("spindle.pool.park.count", () => new Measurement<long>(pool.ParkCount, poolTag),
            "{park}", "Times a worker went to sleep for lack of work.");
        _meter.CreateObservableUpDownCounter("spindle.pool.timer.count", () => new Measurement<long>(pool.TimerCount, poolTag),
            "{timer}", "Timers scheduled on the pool's timing wheel.");
        _meter.CreateObservableUpDownCounter("spindle.pool.registered_wait.count", () => new Measurement<long>(pool.WaitCount, poolTag),
            "{registration}", "Live registered waits.");

        _meter.CreateObservableCounter("spindle.lane.work_item.count", () => LaneMeasurements(pool, poolTag, static lane => lane.CompletedCount),
            "{work_item}", "Work items of a lane that have finished running.");
        _meter.CreateObservableUpDownCounter("spindle.lane.queue.length", () => LaneMeasurements(pool, poolTag, static lane => lane.QueuedCount),
            "{work_item}", "Work items queued in a lane that have not started.");
        _meter.CreateObservableUpDownCounter("spindle.lane.work_item.running", () => LaneMeasurements(pool, poolTag, static lane => lane.RunningCount),
            "{work_item}", "Work items of a lane running now, blocked ones included.");
        _meter.CreateObservableCounter("spindle.lane.work_item.cancelled.count", () => LaneMeasurements(pool, poolTag, static lane => lane.CancelledCount),
            "{work_item}", "Work items of a lane cancelled by its shutdown or the pool's.");

        _exceptions = _meter.CreateCounter<long>("spindle.pool.work_item.exception.count", "{work_item}",
            "Work items (and worker hooks) that threw, by the exception's type (error.type).");
        _stuck = _meter.CreateCounter<long>("spindle.pool.work_item.stuck.count", "{work_item}",
            "Work items that ran past the pool's stuck-item threshold (each counted once).");

        var advice = new InstrumentAdvice<double> { HistogramBucketBoundaries = DurationBuckets };
        _duration = _meter.CreateHistogram("spindle.pool.work_item.duration", "s",
            "Run time of work items: on workers sampled, about one item per 100 µs of each worker's time; on dedicated threads and the relief thread every item.",
            tags: null, advice);
        _wait = _meter.CreateHistogram("spindle.pool.work_item.wait.duration", "s",
            "Time work items wait from being queued to starting, sampled: about one enqueue per 100 µs of each queueing thread.",
            tags: null, advice);
    }

    /// <summary>The queue-wait histogram (a lane keeps it to read <see cref="Instrument.Enabled"/> on every enqueue).</summary>
    public Instrument WaitInstrument => _wait;

    /// <summary>Whether a listener wants the queue-wait histogram (checked on every enqueue: two dependent loads).</summary>
    public bool WaitEnabled
    {
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        get => _wait.Enabled;
    }

    /// <summary>
    /// Caller saw <see cref="WaitEnabled"/>: whether the calling thread's pacer chooses this enqueue.
    /// <paramref name="worker"/> is the calling worker (Worker.Current): a worker's own pacer, or null for the thread's.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static bool ShouldSampleWait(IWaitPacer? worker) =>
        worker is not null ? worker.ShouldSampleWait() : t_waitPacer.IsDue();

    /// <summary>An enqueue the pacer chose: an entry that records its wait when it starts.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public WorkItemEntry SampleWait(in WorkItemEntry entry, Lane? lane, IWaitPacer? worker)
    {
        long now = Stopwatch.GetTimestamp();
        if (worker is not null)
        {
            worker.NoteWaitSampled(now);
        }
        else
        {
            t_waitPacer.Sampled(now);
        }
        return new WorkItemEntry(new WaitSampledItem(entry, now, this, lane), WorkItemEntry.WorkItemMarker, null);
    }

    /// <summary>Records one sampled wait (a worker, as the sampled item starts).</summary>
    public void RecordWait(long queuedAt, long startedAt, Lane? lane)
    {
        double seconds = (startedAt - queuedAt) / (double)Stopwatch.Frequency;
        if (lane is null)
        {
            _wait.Record(seconds, _poolTag);
        }
        else
        {
            _wait.Record(seconds, _poolTag, new KeyValuePair<string, object?>("spindle.lane.name", lane.Options.Name));
        }
    }

    /// <summary>Whether a listener wants the run-time histogram (one field read; checked only on sampled items).</summary>
    public bool DurationEnabled
    {
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        get => _duration.Enabled;
    }

    /// <summary>Records one sampled run time (a worker, after a timed item).</summary>
    public void RecordDuration(long startTimestamp, long endTimestamp, Lane? lane)
    {
        double seconds = (endTimestamp - startTimestamp) / (double)Stopwatch.Frequency;
        if (lane is null)
        {
            _duration.Record(seconds, _poolTag);
        }
        else
        {
            _duration.Record(seconds, _poolTag, new KeyValuePair<string, object?>("spindle.lane.name", lane.Options.Name));
        }
    }

    /// <summary>Counts an item that threw (the item runner's report, whatever the policy does next).</summary>
    public void RecordException(Exception exception)
    {
        if (_exceptions.Enabled)
        {
            _exceptions.Add(1, _poolTag, new KeyValuePair<string, object?>("error.type", exception.GetType().FullName ?? exception.GetType().Name));
        }
    }

    /// <summary>Counts an item reported stuck (the detector, once per item).</summary>
    public void RecordStuck(Lane? lane)
    {
        if (!_stuck.Enabled)
        {
            return;
        }
        if (lane is null)
        {
            _stuck.Add(1, _poolTag);
        }
        else
        {
            _stuck.Add(1, _poolTag, new KeyValuePair<string, object?>("spindle.lane.name", lane.Options.Name));
        }
    }

    private static IEnumerable<Measurement<long>> InjectionCounts(IPoolReadings pool, KeyValuePair<string, object?> poolTag,
        (ThreadInjectionReason Reason, string Value)[] reasons)
    {
        foreach ((ThreadInjectionReason reason, string value) in reasons)
        {
            yield return new Measurement<long>(pool.GetThreadInjectionCount(reason), poolTag,
                new KeyValuePair<string, object?>("spindle.thread.reason", value));
        }
    }

    private static IEnumerable<Measurement<long>> CreationFailures(IPoolReadings pool, KeyValuePair<string, object?> poolTag)
    {
        foreach ((Primitives.PoolThreadKind kind, string value) in s_threadKinds)
        {
            yield return new Measurement<long>(pool.GetCreationFailures(kind), poolTag,
                new KeyValuePair<string, object?>("spindle.thread.kind", value));
        }
    }

    private static IEnumerable<Measurement<long>> LaneMeasurements(IPoolReadings pool, KeyValuePair<string, object?> poolTag, Func<Lane, long> read)
    {
        foreach (Lane lane in pool.LiveLanes())
        {
            yield return new Measurement<long>(read(lane), poolTag,
                new KeyValuePair<string, object?>("spindle.lane.name", lane.Options.Name),
                new KeyValuePair<string, object?>("spindle.lane.priority", TagValues.Priority(lane.Options.Priority)));
        }
    }

    /// <summary>
    /// The pool has stopped: its instruments end (a listener sees them unpublished). A meter from a host's
    /// <see cref="IMeterFactory"/> belongs to the factory, which may have handed it to other pools too: it stays, and its
    /// instruments read this pool's final counts until the factory is disposed.
    /// </summary>
    public void Dispose()
    {
        if (_ownsMeter)
        {
            _meter.Dispose();
        }
    }

    private static string? VersionOf(Assembly assembly)
    {
        string? version = assembly.GetCustomAttribute<AssemblyInformationalVersionAttribute>()?.InformationalVersion;
        if (version is null)
        {
            return assembly.GetName().Version?.ToString(3);
        }
        int plus = version.IndexOf('+', StringComparison.Ordinal);
        return plus < 0 ? version : version[..plus];
    }
}
