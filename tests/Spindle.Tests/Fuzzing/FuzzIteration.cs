using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Linq;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

/// <summary>
/// One fuzz iteration: a fresh pool, several producer threads issuing random operations, and one shutdown form racing
/// them; then an exact check of the ledger.
/// </summary>
/// <remarks>
/// <para>Contracts checked (never a speed):</para>
/// <list type="bullet">
/// <item>Every queueing call that returns normally is accepted: a plain item (every QueueUserWorkItem form, IWorkItem,
/// LongRunning) runs exactly once, or never, and then only when the pool was shut down with CancelPending. A second run
/// is reported as it happens. A refused call throws ObjectDisposedException, and only once IsShutdownStarted is true; a
/// call made after IsShutdownStarted was seen true is refused. Bad input throws the ArgumentException family and runs
/// nothing.</item>
/// <item>Run/RunAsValueTask: the task always ends; RanToCompletion when the delegate ran to completion, Faulted with the
/// delegate's exception, Canceled only when the delegate never ran, by its token (the exception carries that token) or by
/// CancelPending (it does not); the delegate never runs twice; a ValueTask is consumed exactly once.</item>
/// <item>The figure of the last Shutdown(CancelPending) equals the plain items that never ran plus the Run items that
/// shutdown cancelled; Run items cancelled by their own token, timer firings, wait callbacks, scheduler tasks and posts
/// are not in it (the last three always run).</item>
/// <item>Every Run task, scheduler task and async flow the fuzzer started completes within 30 s after shutdown returned,
/// including awaits (under the pool's SynchronizationContext or TaskScheduler) of tasks completed during the drain or
/// after the pool stopped, by a foreign thread or by a timer.</item>
/// <item>No plain item starts after an outside Dispose/Shutdown returned. Items run on their pool, without a
/// SynchronizationContext, with the ExecutionContext their form promises (flowed by the safe forms when the pool flows).</item>
/// <item>Throwing plain items reach UnhandledException exactly once; a Run delegate's exception never does.</item>
/// <item>Timers never fire early, never after their DisposeAsync completed, and a one-shot timer fires at most once per
/// arming. Registered waits never overlap, fire once when asked to, never time out early (the k-th timeout callback comes
/// at least k timeouts after the registration), and never run after Unregister's wait object was signalled.</item>
/// <item>A RunAsValueTask item of a second pool (the neighbour, which stays up) runs once, on that pool, and completes.</item>
/// <item>Lanes (shared ones created with the pool, and producers' own), with options over their whole valid range, get
/// every queueing form, Run, posts and scheduler tasks. A lane item runs exactly once, or never only when the pool or
/// the lane was shut down with CancelPending; a full lane refuses with WorkRejectedException (Reject mode) or a false
/// TryQueue result, and the refused item never runs; a QueueUserWorkItemAsync that waits for room always ends. Each
/// lane's CancelledWorkItemCount equals its accepted items that never ran plus its Run items cancelled by shutdown, and
/// the pool's figure includes them when its own CancelPending did the cancelling.</item>
/// <item>Shutdown of a lane or of the pool releases every producer waiting for room in a full lane, even while an item
/// holds the lane's only slot: a lane item that holds it watches for that (bounded) once shutdown has begun.</item>
/// <item>A serial lane (cap 1) never runs two pieces of its work at once, and starts one producer's items and posts in
/// the order they were queued, wherever they run (in the lane, after its stop, after the pool's). No lane item starts
/// after a lane shutdown that waits for the stop returned; pool.Lanes lists every lane not shutting down and none that
/// stopped.</item>
/// <item>Lane shutdowns in every form (Dispose, DisposeAsync, Shutdown and ShutdownAsync in each mode, a wait
/// cancelled, from the lane's own item) race the producers and the pool's shutdown: before it, during it, or after it.</item>
/// </list>
/// <para>Nothing assumes an order between items, and every wait is bounded (30 s); a timeout reports the ledger.</para>
/// </remarks>
internal sealed partial class FuzzIteration
{
    private static readonly AsyncLocal<int> s_local = new();
    private static readonly long s_ticksPerMillisecond = Stopwatch.Frequency / 1000;
    private const int MaxFailures = 40;

    private readonly ApiFuzzerOptions _options;
    private readonly int _seed;
    private readonly int _iteration;
    private readonly ShutdownForm _form;
    private readonly int _producerCount;
    private readonly long _operationsBeforeShutdown;
    private readonly int _completionTimerDueMs;
    private readonly int _cancelDelaySpins;
    private readonly bool _flows;
    private readonly bool _timerFirings;
    private readonly bool _waitFirings;
    private readonly bool _continuations;
    private readonly bool _cancelForm;
    private readonly string _poolDescription;
    private readonly WorkerPool _pool;
    private readonly WorkerPool _neighbour;

    // Tasks completed late: _late by a foreign thread once shutdown has returned, _timerCompletion by a
    // System.Threading.Timer started when shutdown starts (so during the drain or after the pool stopped).
    private readonly TaskCompletionSource[] _late = [new(), new(TaskCreationOptions.RunContinuationsAsynchronously)];
    private readonly TaskCompletionSource _timerCompletion = new();
    private Timer? _completionTimer;

    private readonly PoolSignal[] _signals =
    [
        new(false, PoolSignalMode.AutoReset),
        new(false, PoolSignalMode.AutoReset),
        new(false, PoolSignalMode.ManualReset),
        new(true, PoolSignalMode.ManualReset),
    ];
    private readonly AutoResetEvent[] _autoEvents = [new(false), new(false)];
    private readonly ManualResetEvent _manualEvent = new(false);

    private readonly ConcurrentQueue<PlainItem> _plain = new();
    private readonly ConcurrentQueue<MultiItem> _multi = new();
    private readonly ConcurrentQueue<RunRecord> _runs = new();
    private readonly ConcurrentQueue<SchedRecord> _scheduled = new();
    private readonly ConcurrentQueue<PostRecord> _posts = new();
    private readonly ConcurrentQueue<TimerRecord> _timers = new();
    private readonly ConcurrentQueue<WaitRecord> _waits = new();
    private readonly ConcurrentQueue<NeighbourRecord> _neighbours = new();
    private readonly ConcurrentQueue<CancellationTokenSource> _sources = new();
    private readonly ConcurrentQueue<(string Label, Task Task)> _mustComplete = new();
    private readonly List<LaneRecord> _sharedLanes = [];
    private readonly ConcurrentQueue<LaneRecord> _lanes = new();

    private readonly ConcurrentQueue<string> _failures = new();
    private readonly ConcurrentDictionary<string, int> _failureKinds = new();
    private int _failureCount;
    private int _nextId;
    private long _operationsIssued;
    private int _producersRunning;
    private int _producersWaiting;
    private volatile bool _shutdownReturned;
    private volatile bool _stopping;
    private int _lastCancelFigure = -1;
    private int _insideFigure = -1;

    public FuzzIteration(ApiFuzzerOptions options, int iteration)
    {
        _options = options;
        _seed = options.Seed;
        _iteration = iteration;
        var random = new Random(ApiFuzzer.Mix(_seed, iteration, 0));
        // The seed picks the first form; later iterations take the next ones, so seven iterations cover them all.
        int forms = Enum.GetValues<ShutdownForm>().Length;
        _form = (ShutdownForm)((new Random(ApiFuzzer.Mix(_seed, 0, 0)).Next(forms) + iteration) % forms);
        _producerCount = 3 + random.Next(2);
        _operationsBeforeShutdown = random.Next(300, 1500);
        _completionTimerDueMs = random.Next(0, 16);
        _cancelDelaySpins = random.Next(0, 4000);
        _cancelForm = _form is ShutdownForm.CancelPending or ShutdownForm.DrainThenCancelPending or ShutdownForm.CancelPendingFromInside;
        _timerFirings = options.TimerFiringsAcrossCancelPending || !_cancelForm;
        _waitFirings = options.WaitFiringsAcrossCancelPending || !_cancelForm;
        _continuations = options.ContinuationsAcrossShutdown;
        _flows = random.Next(5) != 0;
        WorkerPoolOptions poolOptions = options.LimitOptions && random.Next(2) == 0 ? LimitPoolOptions(random) : OrdinaryPoolOptions(random);
        poolOptions.Name = $"fuzz-{_seed}-{iteration}";
        poolOptions.FlowExecutionContext = _flows;
        poolOptions.ExceptionPolicy = UnhandledExceptionPolicy.Report;
        _pool = new WorkerPool(poolOptions);
        _poolDescription = Describe(poolOptions);
        _pool.UnhandledException += (_, e) => OnUnhandled(e.Exception);
        _neighbour = new WorkerPool(new WorkerPoolOptions
        {
            Name = $"fuzz-neighbour-{_seed}-{iteration}",
            MinThreads = 1,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        _neighbour.UnhandledException += (_, e) => Fail($"the neighbour pool reported an exception: {e.Exception}");
        if (options.Lanes)
        {
            var laneRandom = new Random(ApiFuzzer.Mix(_seed, iteration, 0x1a4e));
            int shared = laneRandom.Next(1, 5);
            for (int i = 0; i < shared; i++)
            {
                _sharedLanes.Add(CreateLaneRecord(laneRandom, owner: -1));
            }
            PlanLaneShutdowns(laneRandom);
        }
    }

    /// <summary>The options of most iterations: few threads or many, a short or long idle timeout.</summary>
    private static WorkerPoolOptions OrdinaryPoolOptions(Random random)
    {
        int minThreads = random.Next(0, 3);
        int maxThreads = random.Next(3) == 0 ? Math.Max(1, minThreads) + random.Next(0, 4) : WorkerPoolOptions.MaxThreadLimit;
        return new WorkerPoolOptions
        {
            MinThreads = minThreads,
            MaxThreads = maxThreads,
            IdleTimeout = random.Next(2) == 0 ? TimeSpan.FromSeconds(20) : TimeSpan.FromMilliseconds(random.Next(5, 60)),
        };
    }

    /// <summary>
    /// Options at the limits of their valid ranges: one thread or the most there may be, the shortest and longest idle
    /// timeout, stuck-item threshold and relief delay, the smallest stack and local queue, no spinning.
    /// </summary>
    private static WorkerPoolOptions LimitPoolOptions(Random random)
    {
        (int min, int max) = random.Next(5) switch
        {
            0 => (1, 1),
            1 => (0, 1),
            2 => (32, WorkerPoolOptions.MaxThreadLimit),
            3 => (1, WorkerPoolOptions.MaxThreadLimit),
            _ => (0, 2),
        };
        TimeSpan Pick(TimeSpan smallest, TimeSpan largest) => random.Next(3) switch
        {
            0 => smallest,
            1 => largest,
            _ => Timeout.InfiniteTimeSpan,
        };
        return new WorkerPoolOptions
        {
            MinThreads = min,
            MaxThreads = max,
            IdleTimeout = Pick(TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(int.MaxValue)),
            StuckItemThreshold = Pick(TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(int.MaxValue)),
            OutsideWorkReliefDelay = Pick(TimeSpan.FromMicroseconds(1), TimeSpan.FromSeconds(1)),
            StackSize = random.Next(2) == 0 ? WorkerPoolOptions.MinStackSize : 0,
            LocalQueueCapacity = random.Next(2) == 0 ? 2 : null,
            MaxSpinAttempts = random.Next(2) == 0 ? 0 : null,
            YieldAttempts = random.Next(2) == 0 ? 0 : null,
            BurstYieldAttempts = random.Next(2) == 0 ? 0 : null,
            LaneStarvationIntervalMs = random.Next(2) == 0 ? 1 : null,
        };
    }

    private static string Describe(WorkerPoolOptions options) =>
        $"min {options.MinThreads}, max {options.MaxThreads}, idle {Ms(options.IdleTimeout)}, stuck {Ms(options.StuckItemThreshold)}, "
        + $"relief {Ms(options.OutsideWorkReliefDelay)}, stack {options.StackSize}, local queue {options.LocalQueueCapacity?.ToString(CultureInfo.InvariantCulture) ?? "default"}, "
        + $"spins {options.MaxSpinAttempts?.ToString(CultureInfo.InvariantCulture) ?? "default"}, lane starvation {options.LaneStarvationIntervalMs?.ToString(CultureInfo.InvariantCulture) ?? "default"} ms, "
        + $"flow {options.FlowExecutionContext}";

    private static string Ms(TimeSpan span) => span == Timeout.InfiniteTimeSpan ? "infinite" : $"{span.TotalMilliseconds.ToString(CultureInfo.InvariantCulture)} ms";

    /// <summary>How the iteration ends; chosen by the seed.</summary>
    private enum ShutdownForm
    {
        Dispose,
        DisposeAsync,
        Drain,
        CancelPending,
        DrainThenCancelPending,
        DisposeFromInside,
        CancelPendingFromInside,
    }

    /// <summary>Runs the iteration; returns null when every contract held, or the failure report.</summary>
    public string? Run()
    {
        var producers = new Thread[_producerCount];
        _producersRunning = _producerCount;
        for (int i = 0; i < producers.Length; i++)
        {
            int index = i;
            producers[i] = StartThread(() => Produce(index), $"fuzz producer {index}");
        }
        Thread closer = StartThread(CloseLanesBeforeShutdown, "fuzz lane closer");
        Thread driver = StartThread(DriveShutdown, "fuzz shutdown");
        if (!driver.Join(Waits.MustHappen))
        {
            return Abort($"{_form} did not return within {Waits.MustHappen.TotalSeconds} s; {DescribeStall()}");
        }
        for (int i = 0; i < producers.Length; i++)
        {
            if (!producers[i].Join(Waits.MustHappen))
            {
                return Abort($"producer {i} did not stop within {Waits.MustHappen.TotalSeconds} s (it stops at its first refused call; "
                    + $"a producer waiting for room in a full lane must be released by the shutdown)");
            }
        }
        if (!closer.Join(Waits.MustHappen))
        {
            return Abort($"the lane closer (lane shutdowns planned before the pool's) did not return within {Waits.MustHappen.TotalSeconds} s");
        }
        AfterShutdown();
        return Report();
    }

    private static Thread StartThread(Action body, string name)
    {
        var thread = new Thread(() => body()) { IsBackground = true, Name = name };
        thread.Start();
        return thread;
    }

    // ---- Failures ----------------------------------------------------------------------------------------------

    /// <summary>Records a broken contract (any thread; never throws). The iteration fails at its end.</summary>
    internal void Fail(string message)
    {
        int total = Interlocked.Increment(ref _failureCount);
        // Failures of one kind (the same message but for its numbers) are listed three times and counted.
        string kind = Numbers().Replace(message, "N");
        if (_failureKinds.AddOrUpdate(kind, 1, static (_, count) => count + 1) <= 3 && _failures.Count < MaxFailures)
        {
            _failures.Enqueue(message);
        }
        if (total > 1000)
        {
            _stopping = true;
        }
    }

    [GeneratedRegex("[0-9]+(\\.[0-9]+)?")]
    private static partial Regex Numbers();

    private string Abort(string message)
    {
        _stopping = true;
        Fail(message);
        return Report()!;
    }

    private string? Report()
    {
        if (_failures.IsEmpty)
        {
            return null;
        }
        var text = new StringBuilder();
        text.Append(_failureCount).Append(" broken contract(s); pool ").Append(_poolDescription).Append(", shutdown ").Append(_form)
            .Append(", ").Append(Volatile.Read(ref _operationsIssued)).Append(" operations by ").Append(_producerCount).Append(" producers")
            .Append(_timerFirings ? "" : ", no timers").Append(_waitFirings ? "" : ", no registered waits").Append(':');
        foreach (string failure in _failures)
        {
            text.Append("\n  - ").Append(failure);
        }
        foreach ((string kind, int count) in _failureKinds.Where(entry => entry.Value > 3))
        {
            text.Append("\n  - (").Append(count - 3).Append(" more of the kind: ").Append(kind).Append(')');
        }
        text.Append("\nLedger: ").Append(LedgerSummary());
        return text.ToString();
    }

    private void OnUnhandled(Exception exception)
    {
        switch (exception)
        {
            case FuzzException { Plain: { } item }:
                if (Interlocked.Increment(ref item.Reports) > 1)
                {
                    Fail($"{item.Label}: its exception reached UnhandledException {item.Reports} times");
                }
                break;
            case FuzzException { Run: { } run }:
                Fail($"{run.Label}: the delegate's exception reached UnhandledException instead of its task");
                break;
            default:
                Fail($"the pool reported an exception no item threw on purpose: {exception}");
                break;
        }
    }

    private static string Describe(WorkerPool? pool) => pool is null ? "a thread of no pool" : $"pool '{pool.Name}'";

    /// <summary>Items run on their pool's threads, or on the thread that shuts the pool down (leftovers).</summary>
    private void CheckOnPool(string label)
    {
        WorkerPool? current = WorkerPool.Current;
        if (current != _pool && !(current is null && _pool.IsShutdownStarted))
        {
            Fail($"{label} ran on {Describe(current)}, not on its pool");
        }
    }

    private void CheckLocal(string label, int expected)
    {
        int actual = s_local.Value;
        if (actual != expected)
        {
            Fail($"{label} saw AsyncLocal value {actual}, expected {expected} (ExecutionContext flow is wrong)");
        }
    }
}
