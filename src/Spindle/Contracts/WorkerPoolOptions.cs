using System;
using System.Threading;

namespace Spindle;

/// <summary>
/// Settings for a <see cref="WorkerPool"/>. The pool validates them when it is constructed and keeps its own
/// copy, so changing an options object afterwards does not affect a pool built from it.
/// </summary>
public sealed class WorkerPoolOptions
{
    /// <summary>
    /// The most threads a pool runs (the same ceiling as the built-in pool): a larger <see cref="MaxThreads"/> is capped
    /// here, as <see cref="ThreadPool.SetMaxThreads(int, int)"/> caps it.
    /// </summary>
    public const int MaxThreadLimit = 32767;

    /// <summary>Name of the pool, used in diagnostics and, by default, in its threads' names. Defaults to "Spindle".</summary>
    public string Name { get; set; } = "Spindle";

    /// <summary>
    /// Threads the pool keeps once it has started (idle threads above it retire after <see cref="IdleTimeout"/>).
    /// Defaults to <see cref="Environment.ProcessorCount"/>. Threads are created lazily, when the first work arrives.
    /// Must be between 0 and <see cref="MaxThreads"/> (after its cap). 0 stays 0, unlike the built-in pool's minimum,
    /// which reads 1 after <see cref="ThreadPool.SetMinThreads(int, int)"/> with 0: it lets an idle pool retire every
    /// thread. Left unset, it is lowered to the maximum derived from the OS's thread limit when that is smaller (see
    /// <see cref="MaxThreads"/>). Changeable later with <see cref="WorkerPool.SetThreadLimits(int, int)"/>.
    /// </summary>
    public int MinThreads
    {
        get => _minThreads;
        set
        {
            _minThreads = value;
            _minThreadsSet = true;
        }
    }

    /// <summary>
    /// Upper bound on the pool's worker threads. Must be at least 1, and a larger value than <see cref="MaxThreadLimit"/>
    /// is capped there (so <see cref="int.MaxValue"/> means as many as a pool can have). Changeable later with
    /// <see cref="WorkerPool.SetThreadLimits(int, int)"/>.
    /// </summary>
    /// <remarks>
    /// <para>Left unset, it is derived from what limits the process's threads when the pool is created: on Linux the
    /// cgroup's <c>pids.max</c> (v1 or v2, containers' <c>--pids-limit</c> and pod PID limits), <c>RLIMIT_NPROC</c> and
    /// <c>/proc/sys/kernel/threads-max</c>, each less what is in use. The pool takes at most half of the smallest such
    /// headroom (at least 4 threads), leaving the rest to the runtime and the application, since a process that uses up
    /// its limit fails where the runtime itself needs a thread. Where no limit is known (other platforms, or none set),
    /// the default is <see cref="MaxThreadLimit"/>; the property itself reads <see cref="MaxThreadLimit"/> until set, and
    /// <see cref="WorkerPool.MaxThreads"/> reports what the pool derived. While the maximum is derived, dedicated
    /// threads of <see cref="WorkItemOptions.LongRunning"/> items count against it too (beyond it such items run on the
    /// workers); a maximum you set leaves them uncounted.</para>
    /// <para>A value you set is used as given, even above that headroom. The OS may then refuse threads: the pool counts
    /// each refusal (<see cref="ThreadInjectionReason.CreationFailed"/>), stops growing, retries with backoff, and keeps
    /// running every accepted item on the threads it has.</para>
    /// </remarks>
    public int MaxThreads
    {
        get => _maxThreads;
        set
        {
            _maxThreads = value;
            _maxThreadsSet = true;
        }
    }

    private int _minThreads = Environment.ProcessorCount;
    private bool _minThreadsSet;
    private int _maxThreads = MaxThreadLimit;
    private bool _maxThreadsSet;

    /// <summary>Whether the validated maximum was derived from the OS's thread limit rather than set.</summary>
    internal bool MaxThreadsDerived => !_maxThreadsSet;

    /// <summary>
    /// Whether <see cref="WorkTarget.QueueUserWorkItem(WaitCallback, object?)"/> and its generic form capture the caller's
    /// <see cref="ExecutionContext"/> and run the item inside it (so <see cref="AsyncLocal{T}"/> values flow).
    /// Defaults to <see langword="true"/>. The <c>Unsafe…</c> methods never flow it.
    /// </summary>
    public bool FlowExecutionContext { get; set; } = true;

    /// <summary>Prefix of worker thread names; a worker is named "<c>{prefix} #{n}</c>". Defaults to <see cref="Name"/>.</summary>
    /// <remarks>
    /// The pool's other threads take the same prefix (<c>{prefix} timer</c>, <c>{prefix} relief</c>,
    /// <c>{prefix} monitor</c>, <c>{prefix} wait {n}</c>, <c>{prefix} long-running</c>, and the socket poller
    /// <c>{prefix} io</c>). On Linux the kernel keeps the
    /// first 15 bytes of a thread's name, and that is what <c>top -H</c>, <c>ps -L</c>, <c>perf</c> and
    /// <c>/proc/PID/task/TID/comm</c> show: with a prefix of 15 bytes or more every thread of the pool reads the same
    /// there, so keep it short (the managed <see cref="System.Threading.Thread.Name"/> keeps the whole name).
    /// </remarks>
    public string? ThreadNamePrefix { get; set; }

    /// <summary>Stack size of worker threads in bytes; 0 (the default) uses the runtime's default. Must be 0 or at least 64 KiB.</summary>
    public int StackSize { get; set; }

    /// <summary>Whether workers are background threads, which do not keep the process alive. Defaults to <see langword="true"/>.</summary>
    public bool UseBackgroundThreads { get; set; } = true;

    /// <summary>
    /// How long a parked worker waits for work before it exits, when the pool has more threads than
    /// <see cref="MinThreads"/> (threads added for bursts, starvation or blocking retire this way); the same timeout
    /// applies to idle dedicated threads of <see cref="WorkItemOptions.LongRunning"/> items. Defaults to 20 seconds;
    /// <see cref="Timeout.InfiniteTimeSpan"/> keeps idle threads forever. Must be positive (at least 1 ms) or infinite.
    /// </summary>
    public TimeSpan IdleTimeout { get; set; } = TimeSpan.FromSeconds(20);

    /// <summary>
    /// How long an item may run on a worker (or on the relief thread, see <see cref="OutsideWorkReliefDelay"/>) before
    /// the pool reports it as stuck: once, through
    /// <see cref="WorkerPool.StuckWorkItemDetected"/> and the <c>Spindle</c> event source's <c>StuckWorkItem</c> event
    /// (keyword <c>WorkItems</c>). Defaults to 30 seconds; <see cref="Timeout.InfiniteTimeSpan"/> turns detection off.
    /// Must be at least 1 ms (and at most <see cref="int.MaxValue"/> ms) or infinite.
    /// </summary>
    /// <remarks>
    /// <para>Reporting changes nothing for the item: it keeps running, and the pool's starvation handling adds threads as
    /// usual. An item is reported between one and about one and a half thresholds after it started (the pool's timer
    /// thread looks at the workers, and at the relief thread (see <see cref="OutsideWorkReliefDelay"/>), every quarter
    /// threshold), and the reported running time is a lower bound.</para>
    /// <para>The cost: each worker counts the items it starts and publishes their callback (one plain store per item, and
    /// a reference store when the callback changes; on or off alike; the relief thread, which runs few items, two
    /// interlocked increments and three stores per item), and, while detection is on, the pool's timer thread
    /// (started with the first worker rather than with the first timer) wakes every quarter threshold while the pool has
    /// workers. Items queued with <see cref="WorkItemOptions.LongRunning"/> are not watched: they run on
    /// dedicated threads, or, in a lane, are declared long on purpose.</para>
    /// </remarks>
    public TimeSpan StuckItemThreshold { get; set; } = TimeSpan.FromSeconds(30);

    /// <summary>
    /// How long work queued from outside the pool (to its queue or to one of its lanes) may wait, while every worker is
    /// inside a long item, before the pool's relief thread runs it. Defaults to 20 µs (the shortest delay after which
    /// Go's scheduler takes a processor back from a thread stuck in a system call); <see cref="Timeout.InfiniteTimeSpan"/>
    /// turns relief off. Must be between 1 µs and 1 s, or infinite.
    /// </summary>
    /// <remarks>
    /// <para>A busy worker looks at the pool's queue for outside work about every 100 µs of work, and at the lanes at each
    /// dispatch, but only between items: no item is ever interrupted. So behind items of 1 ms an item queued from outside
    /// (by a request handler, a timer, a socket completion) waits for the first running item to end, about a third of a
    /// millisecond at the median on two workers, and behind items of 10 ms ten times that. The relief thread bounds that
    /// wait: once no worker has taken queued work for this long while items wait and no worker is free, it runs them
    /// itself until a worker takes queued work again or none is left, and then sleeps. It takes a High lane's items
    /// first, then the oldest of the pool's queue, then the Normal and Low lanes', a lane's item only within the lane's
    /// <see cref="LaneOptions.MaxConcurrency"/> (a serial lane's items still run one at a time, in order), and leaves
    /// alone the lanes given long-running items (<see cref="WorkItemOptions.LongRunning"/>), which would hold it for
    /// their whole length. A lane item it runs is its lane's own: <see cref="WorkerPoolLane.Current"/> names the
    /// lane.</para>
    /// <para>It is one thread more than the cores while it runs (the relieved items share the cores with the long
    /// items), so it counts against <see cref="MaxThreads"/>: it takes an item only while the pool has fewer workers than
    /// that, and a pool at its maximum, such as a one-thread pool used to run items one at a time, never gets one. It is
    /// created the first time a pool needs it and stops with the pool, and the workers' hooks
    /// (<see cref="OnWorkerStarted"/>, <see cref="OnWorkerStopping"/>) run on it too. It watches only while some worker's
    /// items take 200 µs or more (the pool's items or a lane's), so pools whose items are short never wake it.</para>
    /// <para>The bound is the usual case, not a guarantee: an outside item that itself runs long holds the relief thread;
    /// items that were already waiting when the workers' items turned long, or that reached a queue while a worker was
    /// searching, wait for the next enqueue or a worker's look; while any worker takes queued work (a High lane's short
    /// items, say) the relief counts the workers as keeping up; and on platforms other than Linux the thread's sleep is
    /// rounded up to whole milliseconds. The stuck-item detector (<see cref="StuckItemThreshold"/>) watches the items it
    /// runs as it watches a worker's, and names it as worker number 0.</para>
    /// </remarks>
    public TimeSpan OutsideWorkReliefDelay { get; set; } = TimeSpan.FromMicroseconds(20);

    /// <summary>Called on each worker thread when it starts, before it runs any item. Exceptions go through <see cref="ExceptionPolicy"/>.</summary>
    public Action? OnWorkerStarted { get; set; }

    /// <summary>Called on each worker thread just before it exits. Exceptions go through <see cref="ExceptionPolicy"/>.</summary>
    public Action? OnWorkerStopping { get; set; }

    /// <summary>What the pool does when a work item throws. Defaults to <see cref="UnhandledExceptionPolicy.FailProcess"/>, like the built-in pool.</summary>
    public UnhandledExceptionPolicy ExceptionPolicy { get; set; } = UnhandledExceptionPolicy.FailProcess;

    /// <summary>
    /// Where the pool gets its <c>Spindle</c> meter: a host's <see cref="System.Diagnostics.Metrics.IMeterFactory"/>
    /// (the hosting package sets the container's), which owns the meter and disposes it with itself. Null (the default):
    /// the pool creates its own meter and disposes it when it stops.
    /// </summary>
    public System.Diagnostics.Metrics.IMeterFactory? MeterFactory { get; set; }

    /// <summary>Test seam: creates (but does not start) a worker thread. May throw to simulate creation failure.</summary>
    internal Func<ThreadStart, int, Thread>? ThreadFactory { get; set; }

    /// <summary>Test seam: creates (but does not start) the pool's timer thread. May throw to simulate creation failure.</summary>
    internal Func<ThreadStart, Thread>? TimerThreadFactory { get; set; }

    /// <summary>
    /// Test seam: creates (but does not start) a wait thread of the pool's registered waits; the pool then names it and
    /// makes it a background thread. A factory may run code around the thread's start routine (keep the thread alive
    /// after the pool's code in it has returned, for instance).
    /// </summary>
    internal Func<ThreadStart, Thread>? WaitThreadFactory { get; set; }

    /// <summary>
    /// Test seam: called just before the pool starts a thread of any kind (on the starting thread, possibly under a lock
    /// of the pool). May throw to simulate the OS refusing the thread.
    /// </summary>
    internal Action<Primitives.PoolThreadKind>? OnThreadStarting { get; set; }

    /// <summary>Test seam: what <see cref="Primitives.ThreadLimits.ReadHeadroom"/> would return (null: read the OS).</summary>
    internal Func<long?>? ThreadHeadroom { get; set; }

    /// <summary>
    /// Test seam: called under the pool's timer lock just before the firings of expired timers are handed over (by the
    /// timer thread or by a worker expiring timers). May throw to simulate a fault in the pool's own timer code.
    /// </summary>
    internal Action? OnTimerFiringsHandOver { get; set; }

    /// <summary>Test seam: the blocker parked workers sleep on (null: the platform's best, see <see cref="Parking.ThreadBlocker.PlatformKind"/>).</summary>
    internal Parking.BlockerKind? BlockerKind { get; set; }

    /// <summary>Test seam: the capacity of each worker's local ring (a power of two, at least 2; null: the default).</summary>
    internal int? LocalQueueCapacity { get; set; }

    /// <summary>Test seam: upper bound on a searching worker's backoff attempts (null: the default; 0: never spin).</summary>
    internal int? MaxSpinAttempts { get; set; }

    /// <summary>Test seam: how many times a searching worker yields its core before it parks (null: the default).</summary>
    internal int? YieldAttempts { get; set; }

    /// <summary>Test seam: the yields a search adds while work arrives in back-to-back bursts (null: the default; 0: none).</summary>
    internal int? BurstYieldAttempts { get; set; }

    /// <summary>
    /// Test seam: how long a worker that parks while another is awake sleeps before its one more look, in milliseconds
    /// (null: <see cref="Scheduling.IdleCoordinator.RecheckAfterParkMs"/>).
    /// </summary>
    internal int? RecheckAfterParkMs { get; set; }

    /// <summary>Test seam: the lanes' starvation interval in milliseconds (null: <see cref="Lanes.LaneSet.StarvationIntervalMs"/>).</summary>
    internal int? LaneStarvationIntervalMs { get; set; }

    /// <summary>What the pool's thread names start with: <see cref="ThreadNamePrefix"/>, else <see cref="Name"/>.</summary>
    internal string ThreadNamePrefixOrName => ThreadNamePrefix ?? Name;

    /// <summary>The idle timeout in milliseconds, or <see cref="Timeout.Infinite"/>.</summary>
    internal int IdleTimeoutMilliseconds =>
        IdleTimeout == Timeout.InfiniteTimeSpan ? Timeout.Infinite : (int)IdleTimeout.TotalMilliseconds;

    /// <summary>Whether stuck-item detection is on (<see cref="StuckItemThreshold"/> is not infinite).</summary>
    internal bool DetectsStuckItems => StuckItemThreshold != Timeout.InfiniteTimeSpan;

    internal const int MinStackSize = 64 * 1024;

    /// <summary>
    /// Checks a minimum and a maximum thread count and returns the maximum to use: one above
    /// <see cref="MaxThreadLimit"/> is capped there, as the built-in pool's <c>SetMaxThreads</c> caps it (the minimum
    /// is not: a minimum above the limit exceeds every maximum, which the built-in pool's <c>SetMinThreads</c> refuses).
    /// </summary>
    internal static int ValidateThreadLimits(int minThreads, int maxThreads, string minName, string maxName)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(minThreads, minName);
        ArgumentOutOfRangeException.ThrowIfLessThan(maxThreads, 1, maxName);
        int cappedMax = Math.Min(maxThreads, MaxThreadLimit);
        if (minThreads > cappedMax)
        {
            throw new ArgumentOutOfRangeException(minName, minThreads,
                $"MinThreads ({minThreads}) must not exceed MaxThreads ({cappedMax}).");
        }
        return cappedMax;
    }

    internal WorkerPoolOptions Validate()
    {
        ArgumentNullException.ThrowIfNull(Name, nameof(Name));
        if (Name.Length == 0)
        {
            throw new ArgumentException("The pool name must not be empty.", nameof(Name));
        }
        int minThreads = MinThreads;
        int maxThreads = ValidateThreadLimits(minThreads, MaxThreads, nameof(MinThreads), nameof(MaxThreads));
        if (!_maxThreadsSet)
        {
            int derived = Primitives.ThreadLimits.DeriveMaxThreads(ThreadHeadroom is { } headroom ? headroom() : Primitives.ThreadLimits.ReadHeadroom());
            // A minimum that was set stays the user's: the maximum rises to it. An unset one comes down to the maximum.
            maxThreads = _minThreadsSet ? Math.Max(derived, minThreads) : derived;
            minThreads = Math.Min(minThreads, maxThreads);
        }
        if (IdleTimeout != Timeout.InfiniteTimeSpan
            && (IdleTimeout < TimeSpan.FromMilliseconds(1) || IdleTimeout.TotalMilliseconds > int.MaxValue))
        {
            throw new ArgumentOutOfRangeException(nameof(IdleTimeout), IdleTimeout,
                "The idle timeout must be between 1 ms and int.MaxValue ms, or Timeout.InfiniteTimeSpan.");
        }
        if (StuckItemThreshold != Timeout.InfiniteTimeSpan
            && (StuckItemThreshold < TimeSpan.FromMilliseconds(1) || StuckItemThreshold.TotalMilliseconds > int.MaxValue))
        {
            throw new ArgumentOutOfRangeException(nameof(StuckItemThreshold), StuckItemThreshold,
                "The stuck-item threshold must be between 1 ms and int.MaxValue ms, or Timeout.InfiniteTimeSpan to turn detection off.");
        }
        if (OutsideWorkReliefDelay != Timeout.InfiniteTimeSpan
            && (OutsideWorkReliefDelay < TimeSpan.FromMicroseconds(1) || OutsideWorkReliefDelay > TimeSpan.FromSeconds(1)))
        {
            throw new ArgumentOutOfRangeException(nameof(OutsideWorkReliefDelay), OutsideWorkReliefDelay,
                "The outside work relief delay must be between 1 µs and 1 s, or Timeout.InfiniteTimeSpan to turn relief off.");
        }
        if (StackSize != 0)
        {
            ArgumentOutOfRangeException.ThrowIfLessThan(StackSize, MinStackSize, nameof(StackSize));
        }
        if (ThreadNamePrefix is { Length: 0 })
        {
            throw new ArgumentException("The thread name prefix must not be empty; leave it null to use the pool name.", nameof(ThreadNamePrefix));
        }
        if (LocalQueueCapacity is int capacity && (capacity < 2 || (capacity & (capacity - 1)) != 0))
        {
            throw new ArgumentOutOfRangeException(nameof(LocalQueueCapacity), capacity, "The local queue capacity must be a power of two, at least 2.");
        }
        if (MaxSpinAttempts < 0 || YieldAttempts < 0 || BurstYieldAttempts < 0)
        {
            string name = MaxSpinAttempts < 0 ? nameof(MaxSpinAttempts) : YieldAttempts < 0 ? nameof(YieldAttempts) : nameof(BurstYieldAttempts);
            throw new ArgumentOutOfRangeException(name, "Spin and yield attempts must not be negative.");
        }
        if (!Enum.IsDefined(ExceptionPolicy))
        {
            throw new ArgumentOutOfRangeException(nameof(ExceptionPolicy), ExceptionPolicy, "Unknown exception policy.");
        }
        var validated = (WorkerPoolOptions)MemberwiseClone();
        validated._maxThreads = maxThreads;
        validated._minThreads = minThreads;
        return validated;
    }
}
