using System;
using System.Collections.Concurrent;
using System.Diagnostics;
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

    private readonly ConcurrentQueue<string> _failures = new();
    private readonly ConcurrentDictionary<string, int> _failureKinds = new();
    private int _failureCount;
    private int _nextId;
    private long _operationsIssued;
    private int _producersRunning;
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
        int minThreads = random.Next(0, 3);
        int maxThreads = random.Next(3) == 0 ? Math.Max(1, minThreads) + random.Next(0, 4) : WorkerPoolOptions.MaxThreadLimit;
        TimeSpan idle = random.Next(2) == 0 ? TimeSpan.FromSeconds(20) : TimeSpan.FromMilliseconds(random.Next(5, 60));
        _flows = random.Next(5) != 0;
        _poolDescription = $"min {minThreads}, max {maxThreads}, idle {idle.TotalMilliseconds} ms, flow {_flows}";
        _pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = $"fuzz-{_seed}-{iteration}",
            MinThreads = minThreads,
            MaxThreads = maxThreads,
            IdleTimeout = idle,
            FlowExecutionContext = _flows,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        _pool.UnhandledException += (_, e) => OnUnhandled(e.Exception);
        _neighbour = new WorkerPool(new WorkerPoolOptions
        {
            Name = $"fuzz-neighbour-{_seed}-{iteration}",
            MinThreads = 1,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        _neighbour.UnhandledException += (_, e) => Fail($"the neighbour pool reported an exception: {e.Exception}");
    }

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
        Thread driver = StartThread(DriveShutdown, "fuzz shutdown");
        if (!driver.Join(Waits.MustHappen))
        {
            return Abort($"{_form} did not return within {Waits.MustHappen.TotalSeconds} s");
        }
        for (int i = 0; i < producers.Length; i++)
        {
            if (!producers[i].Join(Waits.MustHappen))
            {
                return Abort($"producer {i} did not stop within {Waits.MustHappen.TotalSeconds} s (it stops at its first refused call)");
            }
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
