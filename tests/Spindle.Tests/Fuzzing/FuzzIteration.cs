using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
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

    // ---- Producers and the shutdown driver --------------------------------------------------------------------

    private void Produce(int index)
    {
        s_local.Value = 100 + index;
        var producer = new ProducerState(new Random(ApiFuzzer.Mix(_seed, _iteration, index + 1)));
        int afterShutdown = 0;
        try
        {
            while (!_stopping)
            {
                bool seen = _pool.IsShutdownStarted;
                bool refused = IssueProducerOperation(producer, seen);
                Interlocked.Increment(ref _operationsIssued);
                if (refused)
                {
                    break;
                }
                if (seen && ++afterShutdown > 5000)
                {
                    Fail($"producer {index}: 5000 operations after shutdown began and none was refused");
                    break;
                }
            }
        }
        catch (Exception exception)
        {
            Fail($"producer {index}: an operation threw unexpectedly: {exception}");
        }
        finally
        {
            Interlocked.Decrement(ref _producersRunning);
        }
    }

    private void DriveShutdown()
    {
        try
        {
            Waits.Poll(() => Volatile.Read(ref _operationsIssued) >= _operationsBeforeShutdown
                || Volatile.Read(ref _producersRunning) == 0 || _stopping, Waits.MustHappen);
            _completionTimer = new Timer(static state => ((TaskCompletionSource)state!).TrySetResult(), _timerCompletion,
                _completionTimerDueMs, Timeout.Infinite);
            switch (_form)
            {
                case ShutdownForm.Dispose:
                    _pool.Dispose();
                    break;
                case ShutdownForm.DisposeAsync:
                    if (!_pool.DisposeAsync().AsTask().Wait(Waits.MustHappen))
                    {
                        Fail($"DisposeAsync did not complete within {Waits.MustHappen.TotalSeconds} s");
                    }
                    break;
                case ShutdownForm.Drain:
                    _pool.Shutdown(ShutdownMode.Drain);
                    break;
                case ShutdownForm.CancelPending:
                    _lastCancelFigure = _pool.Shutdown(ShutdownMode.CancelPending);
                    break;
                case ShutdownForm.DrainThenCancelPending:
                    Thread drainer = StartThread(() => _pool.Shutdown(ShutdownMode.Drain), "fuzz drain");
                    Waits.Poll(() => _pool.IsShutdownStarted, Waits.MustHappen);
                    Thread.SpinWait(_cancelDelaySpins);
                    _lastCancelFigure = _pool.Shutdown(ShutdownMode.CancelPending);
                    if (!drainer.Join(Waits.MustHappen))
                    {
                        Fail($"Shutdown(Drain) did not return within {Waits.MustHappen.TotalSeconds} s after Shutdown(CancelPending) did");
                    }
                    break;
                case ShutdownForm.DisposeFromInside:
                case ShutdownForm.CancelPendingFromInside:
                    bool cancel = _form == ShutdownForm.CancelPendingFromInside;
                    _pool.UnsafeQueueUserWorkItem(new ShutdownItem(this, cancel), preferLocal: false);
                    if (!Waits.Poll(() => _pool.IsShutdownStarted, Waits.MustHappen))
                    {
                        Fail($"the work item that shuts the pool down did not run within {Waits.MustHappen.TotalSeconds} s");
                    }
                    // The call from inside does not wait for the workers; this one (from outside) does.
                    if (cancel)
                    {
                        _lastCancelFigure = _pool.Shutdown(ShutdownMode.CancelPending);
                    }
                    else
                    {
                        _pool.Dispose();
                    }
                    break;
            }
        }
        catch (Exception exception)
        {
            Fail($"{_form} threw: {exception}");
        }
        finally
        {
            _shutdownReturned = true;
        }
    }

    private sealed class ShutdownItem(FuzzIteration iteration, bool cancel) : IWorkItem
    {
        public void Execute()
        {
            if (cancel)
            {
                iteration._insideFigure = iteration._pool.Shutdown(ShutdownMode.CancelPending);
            }
            else
            {
                iteration._pool.Dispose();
            }
        }
    }

    /// <summary>What one producer keeps between its operations (only that producer touches it).</summary>
    private sealed class ProducerState(Random random)
    {
        public readonly Random Random = random;
        public readonly List<TimerRecord> Timers = [];
        public readonly List<WaitRecord> Waits = [];
        public readonly List<CancellationTokenSource> Sources = [];

        /// <summary>Recent tasks of every kind (awaited by scheduler tasks, antecedents of ContinueWith).</summary>
        public readonly RecentTasks Any = new();

        /// <summary>
        /// Recent Run tasks only: what a Run delegate may await. An async Run item may hold the drain until its task
        /// completes, so it must never wait, even through another task, for a completion that comes only after shutdown
        /// returned; Run tasks never do.
        /// </summary>
        public readonly RecentTasks Runs = new();
    }

    private sealed class RecentTasks
    {
        private readonly Task?[] _recent = new Task?[8];
        private int _count;

        public void Add(Task task) => _recent[_count++ % _recent.Length] = task;

        public Task? Pick(Random random) => _count == 0 ? null : _recent[random.Next(Math.Min(_count, _recent.Length))];
    }

    // ---- After shutdown ----------------------------------------------------------------------------------------

    private void AfterShutdown()
    {
        // Tasks awaited under the pool's context complete now, from a thread that is not the pool's, after shutdown returned.
        Thread completer = StartThread(() =>
        {
            foreach (TaskCompletionSource late in _late)
            {
                late.TrySetResult();
            }
        }, "fuzz late completions");
        if (!completer.Join(Waits.MustHappen))
        {
            Fail("completing the late tasks (their continuations run inline) did not return within 30 s");
        }
        WaitForTasks("tasks the fuzzer started (Run, scheduler tasks, async flows)", _mustComplete);
        WaitForTasks("neighbour RunAsValueTask tasks", new ConcurrentQueue<(string, Task)>(_neighbours.Select(n => (n.Label, n.Task!))));
        Thread neighbourDisposer = StartThread(_neighbour.Dispose, "fuzz neighbour dispose");
        if (!neighbourDisposer.Join(Waits.MustHappen))
        {
            Fail("the neighbour pool's Dispose did not return within 30 s");
        }

        // Whatever is still registered goes now; a DisposeAsync that completed forbids every later callback.
        foreach (TimerRecord timer in _timers)
        {
            if (timer.Timer is { } live && Interlocked.Exchange(ref timer.Disposed, 1) == 0)
            {
                if (!live.DisposeAsync().AsTask().Wait(Waits.MustHappen))
                {
                    Fail($"{timer.Label}: DisposeAsync after shutdown did not complete within 30 s");
                }
                timer.DisposeAsyncCompleted = true;
            }
        }
        foreach (WaitRecord wait in _waits)
        {
            if (wait.Registration is { } registration && Interlocked.Increment(ref wait.UnregisterCalls) == 1)
            {
                using var done = new ManualResetEvent(false);
                if (registration.Unregister(done))
                {
                    if (done.WaitOne(Waits.MustHappen))
                    {
                        wait.UnregisterSettled = true;
                    }
                    else
                    {
                        Fail($"{wait.Label}: the wait object given to Unregister was not signalled within 30 s");
                    }
                }
            }
        }
        // Late arrivals (a plain item after shutdown returned, a timer after DisposeAsync) would show up now.
        Thread.Sleep(50);

        int final = _pool.Shutdown(ShutdownMode.CancelPending);
        CheckLedger(final);

        _completionTimer?.Dispose();
        foreach (CancellationTokenSource source in _sources)
        {
            source.Dispose();
        }
        foreach (AutoResetEvent handle in _autoEvents)
        {
            handle.Dispose();
        }
        _manualEvent.Dispose();
    }

    private void WaitForTasks(string what, ConcurrentQueue<(string Label, Task Task)> tasks)
    {
        long deadline = Environment.TickCount64 + Waits.MustHappenMilliseconds;
        while (true)
        {
            (string Label, Task Task)[] all = tasks.ToArray();
            foreach ((string _, Task task) in all)
            {
                long left = deadline - Environment.TickCount64;
                if (left <= 0)
                {
                    break;
                }
                if (!task.IsCompleted)
                {
                    // WhenAny never throws: a faulted or cancelled task is judged by the ledger, not here.
                    Task.WhenAny(task).Wait((int)left);
                }
            }
            bool allDone = all.All(entry => entry.Task.IsCompleted);
            if (allDone && tasks.Count == all.Length)
            {
                return;
            }
            if (Environment.TickCount64 >= deadline)
            {
                (string Label, Task Task)[] stuck = all.Where(entry => !entry.Task.IsCompleted).ToArray();
                Fail($"{stuck.Length} of {all.Length} {what} did not complete within {Waits.MustHappen.TotalSeconds} s after {_form} returned: "
                    + string.Join("; ", stuck.Take(12).Select(entry => $"{entry.Label} [{entry.Task.Status}]")));
                return;
            }
        }
    }

    // ---- The ledger --------------------------------------------------------------------------------------------

    private void CheckLedger(int finalFigure)
    {
        int plainNeverRan = 0;
        foreach (PlainItem item in _plain)
        {
            int state = Volatile.Read(ref item.State);
            int hits = Volatile.Read(ref item.Hits);
            if (state == CallState.Accepted)
            {
                if (hits == 0)
                {
                    plainNeverRan++;
                    if (!_cancelForm)
                    {
                        Fail($"{item.Label} was accepted but never ran, and the pool was drained");
                    }
                }
            }
            else if (hits != 0)
            {
                Fail($"{item.Label} ran although its queueing call {(state == CallState.BadInput ? "was rejected as bad input" : "threw")}");
            }
            if (item.Behaviour == PlainBehaviour.Throw && item.Reports != hits)
            {
                Fail($"{item.Label} threw {hits} time(s) but UnhandledException saw it {item.Reports} time(s)");
            }
        }

        int multiNeverRan = 0;
        foreach (MultiItem multi in _multi)
        {
            if (multi.Runs > multi.Accepted)
            {
                Fail($"IWorkItem #{multi.Id} ran {multi.Runs} times for {multi.Accepted} accepted queueings");
            }
            else if (multi.Runs < multi.Accepted)
            {
                multiNeverRan += multi.Accepted - multi.Runs;
                if (!_cancelForm)
                {
                    Fail($"IWorkItem #{multi.Id} ran {multi.Runs} times for {multi.Accepted} accepted queueings, and the pool was drained");
                }
            }
        }

        int cancelledByShutdown = 0;
        int cancelledByToken = 0;
        foreach (RunRecord run in _runs)
        {
            int state = Volatile.Read(ref run.State);
            if (state != CallState.Accepted)
            {
                if (run.Starts != 0)
                {
                    Fail($"{run.Label}: its delegate ran although the Run call threw");
                }
                continue;
            }
            Task task = run.Task!;
            if (!task.IsCompleted)
            {
                continue; // reported by WaitForTasks
            }
            switch (task.Status)
            {
                case TaskStatus.RanToCompletion:
                    if (run.Starts != 1 || run.Completions != 1)
                    {
                        Fail($"{run.Label}: RanToCompletion, but its delegate started {run.Starts} and completed {run.Completions} time(s)");
                    }
                    else if (task is Task<int> typed && typed.Result != run.Id)
                    {
                        Fail($"{run.Label}: RanToCompletion with result {typed.Result}, expected {run.Id}");
                    }
                    break;
                case TaskStatus.Faulted:
                    Exception inner = task.Exception!.InnerExceptions[0];
                    if (!(run.Throws && run.Starts == 1 && task.Exception.InnerExceptions.Count == 1 && inner is FuzzException { Run: { } thrower } && thrower == run))
                    {
                        Fail($"{run.Label}: Faulted (delegate started {run.Starts} time(s), throws on purpose: {run.Throws}): {inner}");
                    }
                    break;
                case TaskStatus.Canceled:
                    (CancellationToken token, string message) = CancellationOf(task);
                    if (run.Starts != 0)
                    {
                        Fail($"{run.Label}: Canceled ({message}) although its delegate ran");
                    }
                    else if (run.Token.CanBeCanceled && token == run.Token)
                    {
                        cancelledByToken++;
                        if (!run.Token.IsCancellationRequested)
                        {
                            Fail($"{run.Label}: Canceled with its token, which was never cancelled");
                        }
                    }
                    else
                    {
                        cancelledByShutdown++;
                        if (!_cancelForm)
                        {
                            Fail($"{run.Label}: cancelled by shutdown ({message}), but the pool was only drained");
                        }
                    }
                    break;
            }
        }

        foreach (SchedRecord scheduled in _scheduled)
        {
            int state = Volatile.Read(ref scheduled.State);
            if (state != CallState.Accepted)
            {
                if (scheduled.Starts != 0)
                {
                    Fail($"{scheduled.Label} ran although StartNew threw");
                }
                continue;
            }
            Task task = scheduled.Task!;
            if (!task.IsCompleted)
            {
                continue;
            }
            if (task.Status == TaskStatus.RanToCompletion)
            {
                if (scheduled.Starts != 1 || scheduled.Completions != 1)
                {
                    Fail($"{scheduled.Label}: RanToCompletion, but its delegate started {scheduled.Starts} and completed {scheduled.Completions} time(s)");
                }
            }
            else if (scheduled.Kind.StartsWith("ContinueWith", StringComparison.Ordinal) && task.IsFaulted
                && task.Exception!.InnerException is TaskSchedulerException { InnerException: ObjectDisposedException }
                && scheduled.Starts == 0 && _pool.IsShutdownStarted)
            {
                // A continuation whose antecedent completed once the pool refused work: faulted by the task framework, not stranded.
            }
            else
            {
                Fail($"{scheduled.Label}: {task.Status} (started {scheduled.Starts} time(s)): {task.Exception?.InnerException}");
            }
        }

        foreach (PostRecord post in _posts)
        {
            int state = Volatile.Read(ref post.State);
            if (state == CallState.Accepted && post.Hits != 1)
            {
                Fail($"{post.Label} was accepted and ran {post.Hits} times (posts are never cancelled: exactly once)");
            }
            else if (state != CallState.Accepted && post.Hits != 0)
            {
                Fail($"{post.Label} ran although Post threw");
            }
        }

        foreach (TimerRecord timer in _timers.Where(t => t.State == CallState.BadInput && t.Callbacks != 0))
        {
            Fail($"{timer.Label} fired although CreateTimer rejected it");
        }
        foreach (WaitRecord wait in _waits.Where(w => w.State == CallState.BadInput && w.Callbacks != 0))
        {
            Fail($"{wait.Label} called back although its registration was rejected");
        }

        foreach (NeighbourRecord neighbour in _neighbours)
        {
            Task task = neighbour.Task!;
            if (task.IsCompleted && (task.Status != TaskStatus.RanToCompletion || neighbour.Starts != 1
                || (task is Task<int> typed && typed.Result != neighbour.Id)))
            {
                Fail($"{neighbour.Label}: {task.Status} after {neighbour.Starts} start(s) ({task.Exception?.InnerException?.Message ?? CancellationOf(task).Message})");
            }
        }

        int expected = plainNeverRan + multiNeverRan + cancelledByShutdown;
        string breakdown = $"the ledger expects {expected}: {plainNeverRan} plain items and {multiNeverRan} IWorkItem queueings that never ran, "
            + $"and {cancelledByShutdown} Run items cancelled by shutdown. Not to be counted: {cancelledByToken} Run items cancelled by their own token, "
            + $"{_timers.Count(t => t.State == CallState.Accepted)} timers ({_timers.Count(t => t.DisposedByProducer)} disposed by producers, "
            + $"{_timers.Sum(t => t.Callbacks)} callbacks), {_waits.Count(w => w.State == CallState.Accepted)} registered waits "
            + $"({_waits.Sum(w => w.Callbacks)} callbacks), {_scheduled.Count} scheduler tasks and {_posts.Count} posts (these always run)";
        if (_cancelForm)
        {
            if (_lastCancelFigure != finalFigure)
            {
                Fail($"Shutdown(CancelPending) returned {_lastCancelFigure}, a later call {finalFigure}: the figure changed after the pool had stopped");
            }
            if (finalFigure != expected)
            {
                Fail($"Shutdown(CancelPending) reported {finalFigure} cancelled items; {breakdown}");
            }
        }
        else if (finalFigure != 0)
        {
            Fail($"the pool was drained, yet a later Shutdown(CancelPending) reports {finalFigure} cancelled items; {breakdown}");
        }
    }

    /// <summary>The token and message of a cancelled task's exception.</summary>
    private static (CancellationToken Token, string Message) CancellationOf(Task task)
    {
        try
        {
            task.GetAwaiter().GetResult();
        }
        catch (OperationCanceledException exception)
        {
            return (exception.CancellationToken, exception.Message);
        }
        catch (Exception)
        {
            return (default, "not cancelled");
        }
        return (default, "not cancelled");
    }

    private string LedgerSummary()
    {
        PlainItem[] accepted = _plain.Where(p => p.State == CallState.Accepted).ToArray();
        int[] neverRan = accepted.Where(p => p.Hits == 0).Select(p => p.Id).ToArray();
        RunRecord[] runs = _runs.Where(r => r.State == CallState.Accepted).ToArray();
        RunRecord[] pendingRuns = runs.Where(r => !r.Task!.IsCompleted).ToArray();
        SchedRecord[] scheduled = _scheduled.Where(s => s.State == CallState.Accepted).ToArray();
        PostRecord[] posts = _posts.Where(p => p.State == CallState.Accepted).ToArray();
        return $"plain items: {_plain.Count} issued, {accepted.Length} accepted, {accepted.Count(p => p.Hits == 1)} ran once, "
            + $"{neverRan.Length} never ran{Ids(neverRan)}, {_plain.Count(p => p.State == CallState.Refused)} refused, "
            + $"{_plain.Count(p => p.State == CallState.BadInput)} bad input; "
            + $"IWorkItem queueings: {_multi.Sum(m => m.Accepted)} accepted, {_multi.Sum(m => m.Runs)} runs; "
            + $"Run items: {runs.Length} accepted, {runs.Count(r => r.Task!.Status == TaskStatus.RanToCompletion)} ran to completion, "
            + $"{runs.Count(r => r.Task!.IsFaulted)} faulted, {runs.Count(r => r.Task!.IsCanceled)} cancelled, "
            + $"{pendingRuns.Length} not complete{Ids(pendingRuns.Select(r => r.Id))}; "
            + $"scheduler tasks: {scheduled.Length} accepted, {scheduled.Count(s => s.Starts == 1)} ran, "
            + $"{scheduled.Count(s => !s.Task!.IsCompleted)} not complete{Ids(scheduled.Where(s => !s.Task!.IsCompleted).Select(s => s.Id))}; "
            + $"posts: {posts.Length} accepted, {posts.Count(p => p.Hits == 1)} ran{Ids(posts.Where(p => p.Hits != 1).Select(p => p.Id))}; "
            + $"timers: {_timers.Count} ({_timers.Sum(t => t.Callbacks)} callbacks); registered waits: {_waits.Count} ({_waits.Sum(w => w.Callbacks)} callbacks); "
            + $"neighbour tasks: {_neighbours.Count} ({_neighbours.Count(n => n.Task is { IsCompleted: false })} not complete); "
            + $"CancelPending figures: outside {_lastCancelFigure}, inside {_insideFigure}";
    }

    private static string Ids(IEnumerable<int> ids)
    {
        int[] list = ids.Take(16).ToArray();
        return list.Length == 0 ? "" : $" (#{string.Join(", #", list)}{(ids.Skip(16).Any() ? ", ..." : "")})";
    }
}
