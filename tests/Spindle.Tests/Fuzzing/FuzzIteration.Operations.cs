using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// The operations. Each Issue* method draws everything it needs from the caller's Random before the call (so the
// sequence is the seed's), records the work in the ledger, makes the call, and returns true when the pool refused it
// with ObjectDisposedException (a producer stops at its first refusal). `seen` says whether IsShutdownStarted was
// already true before the call: a call that must be refused then is a broken contract if it is accepted.
internal sealed partial class FuzzIteration
{
    private static readonly TimerCallback s_onTimer = static state => ((TimerRecord)state!).Iteration.OnTimer((TimerRecord)state!);
    private static readonly WaitOrTimerCallback s_onWait = static (state, timedOut) => ((WaitRecord)state!).Iteration.OnWait((WaitRecord)state!, timedOut);
    private static readonly SendOrPostCallback s_onPost = static state => ((PostRecord)state!).Iteration.RunPost((PostRecord)state!);

    private int NextId() => Interlocked.Increment(ref _nextId);

    /// <summary>The AsyncLocal value that work queued now must see: the caller's when the form and the pool flow it.</summary>
    private int Flowed(bool safeForm) => safeForm && _flows ? s_local.Value : 0;

    private bool Refuse(ref int state, string label, ObjectDisposedException exception)
    {
        Volatile.Write(ref state, CallState.Refused);
        if (!_pool.IsShutdownStarted)
        {
            Fail($"{label}: refused with ObjectDisposedException although shutdown had not begun: {exception.Message}");
        }
        return true;
    }

    private void Accept(ref int state, string label, bool seen)
    {
        Volatile.Write(ref state, CallState.Accepted);
        if (seen)
        {
            Fail($"{label}: accepted although IsShutdownStarted was already true before the call");
        }
    }

    private bool RefuseCall(string what, ObjectDisposedException exception)
    {
        int state = 0;
        return Refuse(ref state, what, exception);
    }

    private bool IssueProducerOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(100);
        return roll switch
        {
            < 30 => QueuePlain(random, depth: 0, seen),
            < 32 => QueueMulti(random, seen),
            < 50 => IssueRun(random, producer, seen),
            < 53 => IssueNeighbour(random),
            < 58 => IssueStartNew(random, producer, seen),
            < 61 => IssueContinueWith(random, producer),
            < 65 => IssuePost(random, seen),
            < 68 => CancelSome(producer),
            < 77 => _timerFirings ? TimerOperation(producer, seen) : QueuePlain(random, 0, seen),
            < 78 => _timerFirings ? PoolDelay(random, seen) : QueuePlain(random, 0, seen),
            < 90 => WaitOperation(producer, seen),
            < 92 => SetThreadLimits(random, seen),
            < 94 => ReadProperties(random),
            < 96 => BadCall(random),
            _ => QueuePlain(random, 0, seen),
        };
    }

    /// <summary>What a work item issues from inside (local queueing when it prefers local).</summary>
    private bool IssueFromItem(Random random, int depth)
    {
        bool seen = _pool.IsShutdownStarted;
        int roll = random.Next(100);
        return roll switch
        {
            < 65 => QueuePlain(random, depth, seen),
            < 85 => IssueRun(random, producer: null, seen),
            < 93 => IssuePost(random, seen),
            _ => IssueStartNew(random, producer: null, seen),
        };
    }

    // ---- Plain work items --------------------------------------------------------------------------------------

    private bool QueuePlain(Random random, int depth, bool seen)
    {
        int form = random.Next(14);
        PlainBehaviour behaviour = random.Next(100) switch
        {
            < 60 => PlainBehaviour.Plain,
            < 66 => PlainBehaviour.Throw,
            < 76 => depth < 2 ? PlainBehaviour.Nest : PlainBehaviour.Plain,
            < 80 => PlainBehaviour.BlockingRegion,
            < 83 => PlainBehaviour.Block,
            < 88 => PlainBehaviour.Post,
            < 93 => PlainBehaviour.StartTask,
            _ => PlainBehaviour.RunInside,
        };
        int childSeed = random.Next();
        bool preferLocal = random.Next(3) != 0;
        // Long-running items get a dedicated thread each (reused once idle): a few, not a flood.
        WorkItemOptions options = random.Next(8) switch
        {
            0 => WorkItemOptions.LongRunning,
            1 => WorkItemOptions.LongRunning | WorkItemOptions.PreferLocal,
            2 or 3 or 4 => WorkItemOptions.PreferLocal,
            _ => WorkItemOptions.None,
        };
        (string name, bool safe) = form switch
        {
            0 => ("QueueUserWorkItem(WaitCallback) from a closure", true),
            1 => ("QueueUserWorkItem(WaitCallback, state)", true),
            2 => ($"QueueUserWorkItem<class>(preferLocal: {preferLocal})", true),
            3 => ($"QueueUserWorkItem<struct>(preferLocal: {preferLocal})", true),
            4 => ("UnsafeQueueUserWorkItem(WaitCallback, state)", false),
            5 => ($"UnsafeQueueUserWorkItem<class>(preferLocal: {preferLocal})", false),
            6 => ($"UnsafeQueueUserWorkItem<struct>(preferLocal: {preferLocal})", false),
            7 => ($"UnsafeQueueUserWorkItem(IWorkItem, preferLocal: {preferLocal})", false),
            8 => ($"QueueUserWorkItem<class>({options})", true),
            9 => ($"QueueUserWorkItem<struct>({options})", true),
            10 => ($"UnsafeQueueUserWorkItem<class>({options})", false),
            11 => ($"UnsafeQueueUserWorkItem<struct>({options})", false),
            12 => ($"UnsafeQueueUserWorkItem(IWorkItem, {options})", false),
            _ => ("QueueUserWorkItem(WaitCallback, null) from a closure", true),
        };
        var item = new PlainItem(this, NextId(), name, behaviour, childSeed, Flowed(safe), depth);
        _plain.Enqueue(item);
        try
        {
            switch (form)
            {
                case 0:
                    _pool.QueueUserWorkItem(_ => item.Execute());
                    break;
                case 1:
                    _pool.QueueUserWorkItem(PlainItem.WaitCallback, item);
                    break;
                case 2:
                    _pool.QueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 3:
                    _pool.QueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), preferLocal);
                    break;
                case 4:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.WaitCallback, item);
                    break;
                case 5:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 6:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), preferLocal);
                    break;
                case 7:
                    _pool.UnsafeQueueUserWorkItem(item, preferLocal);
                    break;
                case 8:
                    _pool.QueueUserWorkItem(PlainItem.Action, item, options);
                    break;
                case 9:
                    _pool.QueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), options);
                    break;
                case 10:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.Action, item, options);
                    break;
                case 11:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), options);
                    break;
                case 12:
                    _pool.UnsafeQueueUserWorkItem(item, options);
                    break;
                default:
                    _pool.QueueUserWorkItem(_ => item.Execute(), null);
                    break;
            }
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref item.State, item.Label, exception);
        }
        Accept(ref item.State, item.Label, seen);
        return false;
    }

    /// <summary>One IWorkItem object queued a few times in a row: it runs once per accepted queueing.</summary>
    private bool QueueMulti(Random random, bool seen)
    {
        var multi = new MultiItem(this, NextId());
        _multi.Enqueue(multi);
        int times = random.Next(2, 5);
        for (int i = 0; i < times; i++)
        {
            bool preferLocal = random.Next(2) == 0;
            Interlocked.Increment(ref multi.Attempts);
            try
            {
                _pool.UnsafeQueueUserWorkItem(multi, preferLocal);
            }
            catch (ObjectDisposedException exception)
            {
                Interlocked.Decrement(ref multi.Attempts);
                return RefuseCall($"IWorkItem #{multi.Id} queueing {i + 1}", exception);
            }
            Interlocked.Increment(ref multi.Accepted);
            if (seen)
            {
                Fail($"IWorkItem #{multi.Id} queueing {i + 1}: accepted although IsShutdownStarted was already true before the call");
            }
        }
        return false;
    }

    internal void RunMulti(MultiItem multi)
    {
        int runs = Interlocked.Increment(ref multi.Runs);
        if (runs > Volatile.Read(ref multi.Attempts))
        {
            Fail($"IWorkItem #{multi.Id} ran {runs} times but was queued only {multi.Attempts} times");
        }
        if (_shutdownReturned)
        {
            Fail($"IWorkItem #{multi.Id} started after {_form} had returned");
        }
        CheckOnPool($"IWorkItem #{multi.Id}");
        CheckLocal($"IWorkItem #{multi.Id}", 0);
    }

    internal void RunPlain(PlainItem item)
    {
        int hits = Interlocked.Increment(ref item.Hits);
        if (hits > 1)
        {
            Fail($"{item.Label} ran {hits} times");
        }
        if (_shutdownReturned)
        {
            Fail($"{item.Label} started after {_form} had returned");
        }
        CheckOnPool(item.Label);
        if (SynchronizationContext.Current is { } context)
        {
            Fail($"{item.Label} ran with a SynchronizationContext installed ({context.GetType().Name})");
        }
        CheckLocal(item.Label, item.ExpectedLocal);
        switch (item.Behaviour)
        {
            case PlainBehaviour.Throw:
                throw new FuzzException(item.Label) { Plain = item };
            case PlainBehaviour.Nest:
                var random = new Random(item.ChildSeed);
                int children = random.Next(1, 4);
                for (int i = 0; i < children && !IssueFromItem(random, item.Depth + 1); i++)
                {
                }
                break;
            case PlainBehaviour.BlockingRegion:
                using (BlockingRegion region = WorkerPool.EnterBlockingRegion())
                {
                    if (region.IsActive && WorkerPool.Current != _pool)
                    {
                        Fail($"{item.Label}: a blocking region is active off the pool's workers");
                    }
                    Thread.Sleep(1);
                }
                break;
            case PlainBehaviour.Block:
                if ((item.ChildSeed & 1) == 0)
                {
                    Thread.Sleep(item.ChildSeed % 3 == 0 ? 1 : 0);
                }
                else
                {
                    Thread.SpinWait(2000);
                }
                break;
            case PlainBehaviour.Post:
                IssuePost(new Random(item.ChildSeed), _pool.IsShutdownStarted);
                break;
            case PlainBehaviour.StartTask:
                IssueStartNew(new Random(item.ChildSeed), producer: null, _pool.IsShutdownStarted);
                break;
            case PlainBehaviour.RunInside:
                IssueRun(new Random(item.ChildSeed), producer: null, _pool.IsShutdownStarted);
                break;
        }
    }

    // ---- Run and RunAsValueTask --------------------------------------------------------------------------------

    private bool IssueRun(Random random, ProducerState? producer, bool seen)
    {
        RunForm form = random.Next(100) switch
        {
            < 18 => RunForm.RunAction,
            < 32 => RunForm.RunFunc,
            < 52 => RunForm.RunAsync,
            < 66 => RunForm.RunAsyncFunc,
            < 83 => RunForm.ValueTaskAction,
            _ => RunForm.ValueTaskFunc,
        };
        bool valueTask = form is RunForm.ValueTaskAction or RunForm.ValueTaskFunc;
        TokenKind kind = random.Next(20) switch
        {
            < 7 => TokenKind.None,
            < 11 => TokenKind.NeverCancelled,
            < 17 => TokenKind.CancelledLater,
            _ => TokenKind.AlreadyCancelled,
        };
        if (kind == TokenKind.CancelledLater
            && !(valueTask ? _options.ValueTaskTokensCancelledWhileQueued : _options.RunTokensCancelledWhileQueued))
        {
            kind = TokenKind.NeverCancelled;
        }
        CancellationTokenSource? source = null;
        switch (kind)
        {
            case TokenKind.NeverCancelled:
                source = new CancellationTokenSource();
                break;
            case TokenKind.AlreadyCancelled:
                source = new CancellationTokenSource();
                source.Cancel();
                break;
            case TokenKind.CancelledLater:
                int how = random.Next(4);
                int delay = random.Next(0, 4);
                if (producer is not null && how < 2)
                {
                    source = new CancellationTokenSource();
                    producer.Sources.Add(source); // cancelled by a later CancelSome of this producer, or never
                }
                else if (how == 3 && _timerFirings)
                {
                    try
                    {
                        source = new CancellationTokenSource(TimeSpan.FromMilliseconds(delay + 1), _pool.TimeProvider);
                    }
                    catch (ObjectDisposedException exception)
                    {
                        return RefuseCall("CancellationTokenSource on pool.TimeProvider", exception);
                    }
                    if (seen)
                    {
                        Fail("CancellationTokenSource on pool.TimeProvider: its timer was accepted although IsShutdownStarted was already true");
                    }
                }
                else
                {
                    source = new CancellationTokenSource();
                    source.CancelAfter(delay);
                }
                break;
        }
        if (source is not null)
        {
            _sources.Enqueue(source);
        }
        bool throws = random.Next(12) == 0;
        Task? other = producer?.Runs.Pick(random);
        AwaitStep[] steps = form is RunForm.RunAsync or RunForm.RunAsyncFunc ? PlanSteps(random, other is not null, late: false) : [];
        bool explicitNone = random.Next(2) == 0;
        bool viaAwait = random.Next(2) == 0;
        var run = new RunRecord(NextId(), form, kind, source, throws, steps, other, Flowed(safeForm: true), inside: producer is null);
        _runs.Enqueue(run);
        CancellationToken token = kind == TokenKind.None && explicitNone ? CancellationToken.None : run.Token;
        Task task;
        try
        {
            switch (form)
            {
                case RunForm.RunAction:
                    task = kind == TokenKind.None && !explicitNone ? _pool.Run(() => RunSync(run)) : _pool.Run(() => RunSync(run), token);
                    break;
                case RunForm.RunFunc:
                    task = _pool.Run(() => RunFunc(run), token);
                    break;
                case RunForm.RunAsync:
                    task = _pool.Run(() => RunAsyncBody(run), token);
                    break;
                case RunForm.RunAsyncFunc:
                    task = _pool.Run(() => RunAsyncFuncBody(run), token);
                    break;
                case RunForm.ValueTaskAction:
                    task = Consume(_pool.RunAsValueTask(() => RunSync(run), token), viaAwait);
                    break;
                default:
                    task = Consume(_pool.RunAsValueTask(() => RunFunc(run), token), viaAwait);
                    break;
            }
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref run.State, run.Label, exception);
        }
        run.Task = task;
        Accept(ref run.State, run.Label, seen);
        _mustComplete.Enqueue((run.Label, task));
        producer?.Any.Add(task);
        producer?.Runs.Add(task);
        return false;
    }

    /// <summary>Consumes a ValueTask exactly once: as a Task, or by one await.</summary>
    private static Task Consume(ValueTask valueTask, bool viaAwait) => viaAwait ? AwaitOnce(valueTask) : valueTask.AsTask();

    private static Task<int> Consume(ValueTask<int> valueTask, bool viaAwait) => viaAwait ? AwaitOnce(valueTask) : valueTask.AsTask();

    private static async Task AwaitOnce(ValueTask valueTask) => await valueTask.ConfigureAwait(false);

    private static async Task<int> AwaitOnce(ValueTask<int> valueTask) => await valueTask.ConfigureAwait(false);

    /// <summary>The awaits of an async delegate; <paramref name="late"/>: it may await the completion set after shutdown returned.</summary>
    private AwaitStep[] PlanSteps(Random random, bool hasOther, bool late)
    {
        var steps = new AwaitStep[random.Next(1, 4)];
        for (int i = 0; i < steps.Length; i++)
        {
            int roll = random.Next(100);
            steps[i] = roll switch
            {
                < 35 => AwaitStep.Yield,
                < 65 => AwaitStep.Delay,
                < 80 when hasOther => AwaitStep.Other,
                < 92 when _continuations && late => AwaitStep.LateCompletion,
                < 100 when _continuations => AwaitStep.TimerCompletion,
                _ => AwaitStep.Yield,
            };
        }
        return steps;
    }

    private void BeginRun(RunRecord run)
    {
        int starts = Interlocked.Increment(ref run.Starts);
        if (starts > 1)
        {
            Fail($"{run.Label}: its delegate ran {starts} times");
        }
        CheckOnPool(run.Label);
        // A Run delegate's awaits must come back to the pool: through its SynchronizationContext (always for a token
        // or a ValueTask), or, for a Run without a cancellable token, possibly through its TaskScheduler instead.
        bool context = SynchronizationContext.Current == _pool.SynchronizationContext;
        if (!context && (run.IsQueuedItem || TaskScheduler.Current != _pool.TaskScheduler))
        {
            Fail($"{run.Label}: the delegate runs with neither the pool's SynchronizationContext nor its TaskScheduler as the current one");
        }
        CheckLocal(run.Label, run.ExpectedLocal);
    }

    private void EndRun(RunRecord run)
    {
        if (run.Throws)
        {
            throw new FuzzException(run.Label) { Run = run };
        }
        Interlocked.Increment(ref run.Completions);
    }

    private void RunSync(RunRecord run)
    {
        BeginRun(run);
        EndRun(run);
    }

    private int RunFunc(RunRecord run)
    {
        RunSync(run);
        return run.Id;
    }

    private async Task RunAsyncBody(RunRecord run)
    {
        BeginRun(run);
        await Steps(run.Steps, run.Other).ConfigureAwait(_continuations);
        EndRun(run);
    }

    private async Task<int> RunAsyncFuncBody(RunRecord run)
    {
        await RunAsyncBody(run).ConfigureAwait(_continuations);
        return run.Id;
    }

    /// <summary>
    /// The awaits of an async delegate. With continuations on they resume where the caller's context says (the pool's
    /// SynchronizationContext or TaskScheduler); with them off every await leaves the pool (ConfigureAwait(false)).
    /// </summary>
    private async Task Steps(AwaitStep[] steps, Task? other)
    {
        bool onPool = _continuations;
        foreach (AwaitStep step in steps)
        {
            switch (step)
            {
                case AwaitStep.Yield:
                    if (onPool)
                    {
                        await Task.Yield();
                    }
                    else
                    {
                        await Task.Run(static () => { }).ConfigureAwait(false);
                    }
                    break;
                case AwaitStep.Delay:
                    await Task.Delay(1 + (steps.Length % 3)).ConfigureAwait(onPool);
                    break;
                case AwaitStep.Other:
                    try
                    {
                        await other!.ConfigureAwait(onPool);
                    }
                    catch (Exception)
                    {
                        // The other task's outcome is its own; this one only waits for it.
                    }
                    break;
                case AwaitStep.LateCompletion:
                    await _late[steps.Length % _late.Length].Task.ConfigureAwait(onPool);
                    break;
                case AwaitStep.TimerCompletion:
                    await _timerCompletion.Task.ConfigureAwait(onPool);
                    break;
            }
        }
    }

    /// <summary>Cancels one of this producer's later-cancelled tokens (at once, or after 0-2 ms).</summary>
    private static bool CancelSome(ProducerState producer)
    {
        if (producer.Sources.Count == 0)
        {
            return false;
        }
        int index = producer.Random.Next(producer.Sources.Count);
        CancellationTokenSource source = producer.Sources[index];
        producer.Sources.RemoveAt(index);
        if (producer.Random.Next(3) == 0)
        {
            source.CancelAfter(producer.Random.Next(0, 3));
        }
        else
        {
            source.Cancel();
        }
        return false;
    }

    /// <summary>RunAsValueTask on the neighbour pool: its pooled items must never be run through the fuzzed pool's queues.</summary>
    private bool IssueNeighbour(Random random)
    {
        var record = new NeighbourRecord(NextId(), random.Next(2) == 0);
        bool viaAwait = random.Next(2) == 0;
        _neighbours.Enqueue(record);
        record.Task = record.Func
            ? Consume(_neighbour.RunAsValueTask(() => NeighbourBody(record)), viaAwait)
            : Consume(_neighbour.RunAsValueTask(() => { NeighbourBody(record); }), viaAwait);
        return false;
    }

    private int NeighbourBody(NeighbourRecord record)
    {
        int starts = Interlocked.Increment(ref record.Starts);
        if (starts > 1)
        {
            Fail($"{record.Label}: its delegate ran {starts} times");
        }
        WorkerPool? current = WorkerPool.Current;
        if (current != _neighbour)
        {
            Fail($"{record.Label} ran on {Describe(current)}: a pooled run item was executed through an entry that another queue still held");
        }
        return record.Id;
    }

    // ---- Scheduler tasks and posts -----------------------------------------------------------------------------

    private bool IssueStartNew(Random random, ProducerState? producer, bool seen)
    {
        bool async = random.Next(3) == 0;
        TaskCreationOptions options = random.Next(10) switch
        {
            0 => TaskCreationOptions.LongRunning,
            1 or 2 => TaskCreationOptions.PreferFairness,
            3 => TaskCreationOptions.DenyChildAttach,
            _ => TaskCreationOptions.None,
        };
        Task? other = producer?.Any.Pick(random);
        AwaitStep[] steps = async ? PlanSteps(random, other is not null, late: true) : [];
        var scheduled = new SchedRecord(this, NextId(), $"StartNew({options}{(async ? ", async awaits " + string.Join('/', steps) : "")})",
            s_local.Value, steps, other);
        _scheduled.Enqueue(scheduled);
        Task task;
        try
        {
            task = async
                ? Task.Factory.StartNew(() => ScheduledAsyncBody(scheduled), CancellationToken.None, options, _pool.TaskScheduler).Unwrap()
                : Task.Factory.StartNew(static state => ((SchedRecord)state!).Iteration.ScheduledBody((SchedRecord)state!),
                    scheduled, CancellationToken.None, options, _pool.TaskScheduler);
        }
        catch (TaskSchedulerException exception) when (exception.InnerException is ObjectDisposedException disposed)
        {
            return Refuse(ref scheduled.State, scheduled.Label, disposed);
        }
        // No "accepted after shutdown started" rule here: a scheduler may run a task elsewhere rather than refuse it.
        scheduled.Task = task;
        Volatile.Write(ref scheduled.State, CallState.Accepted);
        _mustComplete.Enqueue((scheduled.Label, task));
        producer?.Any.Add(task);
        return false;
    }

    private bool IssueContinueWith(Random random, ProducerState producer)
    {
        Task antecedent = producer.Any.Pick(random) ?? Task.Delay(random.Next(0, 3));
        bool synchronously = random.Next(2) == 0;
        var scheduled = new SchedRecord(this, NextId(), $"ContinueWith({(synchronously ? "ExecuteSynchronously" : "None")})", s_local.Value, [], null);
        _scheduled.Enqueue(scheduled);
        // ContinueWith never throws for a scheduler that refuses: the continuation faults instead (judged by the ledger).
        Task task = antecedent.ContinueWith(static (_, state) => ((SchedRecord)state!).Iteration.ScheduledBody((SchedRecord)state!),
            scheduled, CancellationToken.None,
            synchronously ? TaskContinuationOptions.ExecuteSynchronously : TaskContinuationOptions.None, _pool.TaskScheduler);
        scheduled.Task = task;
        Volatile.Write(ref scheduled.State, CallState.Accepted);
        _mustComplete.Enqueue((scheduled.Label, task));
        producer.Any.Add(task);
        return false;
    }

    private void ScheduledStart(SchedRecord scheduled)
    {
        int starts = Interlocked.Increment(ref scheduled.Starts);
        if (starts > 1)
        {
            Fail($"{scheduled.Label}: ran {starts} times");
        }
        if (TaskScheduler.Current != _pool.TaskScheduler)
        {
            Fail($"{scheduled.Label}: runs with TaskScheduler.Current other than the pool's");
        }
        CheckOnPool(scheduled.Label);
        CheckLocal(scheduled.Label, scheduled.ExpectedLocal);
    }

    internal void ScheduledBody(SchedRecord scheduled)
    {
        ScheduledStart(scheduled);
        Interlocked.Increment(ref scheduled.Completions);
    }

    private async Task ScheduledAsyncBody(SchedRecord scheduled)
    {
        ScheduledStart(scheduled);
        await Steps(scheduled.Steps, scheduled.Other).ConfigureAwait(_continuations);
        Interlocked.Increment(ref scheduled.Completions);
    }

    private bool IssuePost(Random random, bool seen)
    {
        AwaitStep[]? flow = _continuations && random.Next(3) == 0 ? PlanSteps(random, hasOther: false, late: true) : null;
        bool closure = random.Next(3) == 0;
        var post = new PostRecord(this, NextId(), flow);
        _posts.Enqueue(post);
        try
        {
            if (closure)
            {
                _pool.SynchronizationContext.Post(_ => RunPost(post), null);
            }
            else
            {
                _pool.SynchronizationContext.Post(s_onPost, post);
            }
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref post.State, post.Label, exception);
        }
        // As for the scheduler: a post after shutdown started may be run elsewhere instead of refused; it must run once.
        Volatile.Write(ref post.State, CallState.Accepted);
        _ = seen;
        return false;
    }

    internal void RunPost(PostRecord post)
    {
        int hits = Interlocked.Increment(ref post.Hits);
        if (hits > 1)
        {
            Fail($"{post.Label} ran {hits} times");
        }
        if (SynchronizationContext.Current != _pool.SynchronizationContext)
        {
            Fail($"{post.Label}: runs without the pool's SynchronizationContext installed");
        }
        CheckOnPool(post.Label);
        CheckLocal(post.Label, 0); // Post does not capture the caller's ExecutionContext
        if (post.Flow is { } steps)
        {
            // An async flow that starts under the pool's SynchronizationContext: its awaits post back to the pool.
            _mustComplete.Enqueue(($"{post.Label} async flow", Steps(steps, other: null)));
        }
    }

    // ---- Timers --------------------------------------------------------------------------------------------------

    private bool TimerOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(10);
        if (producer.Timers.Count == 0 || roll < 4)
        {
            if (producer.Timers.Count >= 6)
            {
                DisposeTimer(producer.Timers[0], async: random.Next(2) == 0);
                producer.Timers.RemoveAt(0);
            }
            return CreateTimer(producer, seen);
        }
        int index = random.Next(producer.Timers.Count);
        TimerRecord timer = producer.Timers[index];
        if (roll < 7)
        {
            (TimeSpan due, TimeSpan period) = TimerTimes(random);
            Arm(timer, due, period);
            bool changed = timer.Timer!.Change(due, period);
            if (!changed && !_pool.IsShutdownStarted)
            {
                Fail($"{timer.Label}: Change returned false on a live timer of a running pool");
            }
            return false;
        }
        producer.Timers.RemoveAt(index);
        DisposeTimer(timer, async: roll == 9);
        return false;
    }

    private static (TimeSpan Due, TimeSpan Period) TimerTimes(Random random)
    {
        TimeSpan due = random.Next(5) switch
        {
            0 => Timeout.InfiniteTimeSpan,
            1 or 2 => TimeSpan.FromTicks(random.Next(0, 7 * (int)TimeSpan.TicksPerMillisecond)), // with a fraction of a millisecond
            _ => TimeSpan.FromMilliseconds(random.Next(0, 7)),
        };
        TimeSpan period = random.Next(100) switch
        {
            < 40 => Timeout.InfiniteTimeSpan,
            < 55 => TimeSpan.Zero,
            _ => TimeSpan.FromMilliseconds(random.Next(1, 7)),
        };
        return (due, period);
    }

    private bool CreateTimer(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        bool viaProvider = random.Next(3) == 0;
        (TimeSpan due, TimeSpan period) = TimerTimes(random);
        var timer = new TimerRecord(this, NextId(), viaProvider, Flowed(safeForm: true)) { RearmsItself = random.Next(5) == 0 };
        _timers.Enqueue(timer);
        Arm(timer, due, period);
        try
        {
            timer.Timer = viaProvider
                ? _pool.TimeProvider.CreateTimer(s_onTimer, timer, due, period)
                : _pool.CreateTimer(s_onTimer, timer, due, period);
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref timer.State, timer.Label, exception);
        }
        Accept(ref timer.State, timer.Label, seen);
        producer.Timers.Add(timer);
        return false;
    }

    /// <summary>Records an arming before the call that makes it: the callback it may cause must find it.</summary>
    private static void Arm(TimerRecord timer, TimeSpan due, TimeSpan period)
    {
        if (period > TimeSpan.Zero)
        {
            Volatile.Write(ref timer.EverPeriodic, true);
        }
        if (due == Timeout.InfiniteTimeSpan)
        {
            return;
        }
        Interlocked.Increment(ref timer.Armings);
        long at = Stopwatch.GetTimestamp() + (long)(due.Ticks * (Stopwatch.Frequency / (double)TimeSpan.TicksPerSecond));
        long current = Volatile.Read(ref timer.EarliestDue);
        while (at < current)
        {
            long seenValue = Interlocked.CompareExchange(ref timer.EarliestDue, at, current);
            if (seenValue == current)
            {
                break;
            }
            current = seenValue;
        }
    }

    private void DisposeTimer(TimerRecord timer, bool async)
    {
        Volatile.Write(ref timer.Disposed, 1);
        timer.DisposedByProducer = true;
        if (!async)
        {
            timer.Timer!.Dispose();
            return;
        }
        if (!timer.Timer!.DisposeAsync().AsTask().Wait(Waits.MustHappen))
        {
            Fail($"{timer.Label}: DisposeAsync did not complete within 30 s");
        }
        timer.DisposeAsyncCompleted = true;
    }

    internal void OnTimer(TimerRecord timer)
    {
        long now = Stopwatch.GetTimestamp();
        bool afterDisposeAsync = timer.DisposeAsyncCompleted;
        int callbacks = Interlocked.Increment(ref timer.Callbacks);
        if (afterDisposeAsync)
        {
            Fail($"{timer.Label} fired after its DisposeAsync had completed");
        }
        long due = Volatile.Read(ref timer.EarliestDue);
        if (now < due)
        {
            Fail($"{timer.Label} fired {(due - now) * 1000.0 / Stopwatch.Frequency:F3} ms before the earliest due time of its armings");
        }
        int armings = Volatile.Read(ref timer.Armings);
        if (!Volatile.Read(ref timer.EverPeriodic) && callbacks > armings)
        {
            Fail($"one-shot {timer.Label} fired {callbacks} times for {armings} arming(s)");
        }
        CheckLocal(timer.Label, timer.ExpectedLocal);
        if (timer.RearmsItself && callbacks < 4 && Volatile.Read(ref timer.Disposed) == 0 && timer.Timer is { } live)
        {
            TimeSpan again = TimeSpan.FromMilliseconds(1);
            Arm(timer, again, Timeout.InfiniteTimeSpan);
            if (!live.Change(again, Timeout.InfiniteTimeSpan) && Volatile.Read(ref timer.Disposed) == 0 && !_pool.IsShutdownStarted)
            {
                Fail($"{timer.Label}: Change from its own callback returned false on a live timer of a running pool");
            }
        }
    }

    /// <summary>Task.Delay on the pool's TimeProvider: it may be dropped by shutdown, but never completes early.</summary>
    private bool PoolDelay(Random random, bool seen)
    {
        int milliseconds = random.Next(1, 6); // a zero delay completes at once without a timer: nothing for the pool to refuse
        var record = new DelayRecord(NextId(), milliseconds, Stopwatch.GetTimestamp());
        Task delay;
        try
        {
            delay = Task.Delay(TimeSpan.FromMilliseconds(milliseconds), _pool.TimeProvider);
        }
        catch (ObjectDisposedException exception)
        {
            return RefuseCall($"Task.Delay({milliseconds} ms, pool.TimeProvider)", exception);
        }
        if (seen)
        {
            Fail($"Task.Delay({milliseconds} ms, pool.TimeProvider): accepted although IsShutdownStarted was already true");
        }
        record.Task = delay;
        delay.ContinueWith(static (task, state) =>
        {
            var (iteration, delayed) = ((FuzzIteration, DelayRecord))state!;
            long elapsed = Stopwatch.GetTimestamp() - delayed.Start;
            if (task.Status != TaskStatus.RanToCompletion)
            {
                iteration.Fail($"Task.Delay #{delayed.Id} on pool.TimeProvider ended {task.Status}");
            }
            else if (elapsed < delayed.Milliseconds * s_ticksPerMillisecond)
            {
                iteration.Fail($"Task.Delay #{delayed.Id} ({delayed.Milliseconds} ms) on pool.TimeProvider completed after {elapsed * 1000.0 / Stopwatch.Frequency:F3} ms");
            }
        }, (this, record), CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
        return false;
    }

    // ---- Registered waits ----------------------------------------------------------------------------------------

    private bool WaitOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(20);
        switch (roll)
        {
            case < 3:
                _signals[random.Next(_signals.Length)].Set();
                return false;
            case < 4:
                _signals[random.Next(_signals.Length)].Reset();
                return false;
            case < 6:
                _autoEvents[random.Next(_autoEvents.Length)].Set();
                return false;
            case < 7:
                _manualEvent.Set();
                _manualEvent.Reset();
                return false;
        }
        if (!_waitFirings)
        {
            return QueuePlain(random, 0, seen);
        }
        if (producer.Waits.Count >= 4 || (roll >= 16 && producer.Waits.Count > 0))
        {
            int index = producer.Waits.Count >= 4 ? 0 : random.Next(producer.Waits.Count);
            WaitRecord wait = producer.Waits[index];
            producer.Waits.RemoveAt(index);
            Unregister(wait, withWaitObject: random.Next(2) == 0);
            return false;
        }
        return roll switch
        {
            < 11 => RegisterOnSignal(producer, seen),
            < 15 => RegisterOnHandle(producer, seen),
            _ => _options.DisposedWaitHandles ? RegisterOnDisposedHandle(random, seen) : RegisterOnSignal(producer, seen),
        };
    }

    /// <summary>
    /// A wait timeout: none, zero (run-once only: a repeating zero timeout fires every millisecond), or 2-10 ms, half the
    /// time with a fraction of a millisecond (unless the call takes whole milliseconds).
    /// </summary>
    private static TimeSpan WaitTimeout(Random random, bool once, bool wholeMilliseconds) => random.Next(10) switch
    {
        < 5 => Timeout.InfiniteTimeSpan,
        5 => once ? TimeSpan.Zero : TimeSpan.FromMilliseconds(3),
        _ when wholeMilliseconds || random.Next(2) == 0 => TimeSpan.FromMilliseconds(random.Next(2, 11)),
        _ => TimeSpan.FromTicks(random.Next(2 * (int)TimeSpan.TicksPerMillisecond, 10 * (int)TimeSpan.TicksPerMillisecond)),
    };

    private bool RegisterOnSignal(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int index = random.Next(_signals.Length);
        bool once = random.Next(2) == 0;
        TimeSpan timeout = WaitTimeout(random, once, wholeMilliseconds: false);
        PoolSignal signal = _signals[index];
        var wait = new WaitRecord(this, NextId(), $"PoolSignal {index} ({signal.Mode})", timeout, once, Flowed(safeForm: true));
        _waits.Enqueue(wait);
        wait.Start = Stopwatch.GetTimestamp();
        try
        {
            wait.Registration = _pool.RegisterWait(signal, s_onWait, wait, timeout, once);
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref wait.State, wait.Label, exception);
        }
        Accept(ref wait.State, wait.Label, seen);
        producer.Waits.Add(wait);
        return false;
    }

    private bool RegisterOnHandle(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int index = random.Next(_autoEvents.Length + 1);
        bool manual = index == _autoEvents.Length;
        WaitHandle handle = manual ? _manualEvent : _autoEvents[index];
        bool once = manual || random.Next(2) == 0; // a repeating wait on a set ManualResetEvent fires without pause
        bool milliseconds = random.Next(2) == 0;
        TimeSpan timeout = WaitTimeout(random, once, wholeMilliseconds: milliseconds);
        var wait = new WaitRecord(this, NextId(), manual ? "ManualResetEvent" : $"AutoResetEvent {index}", timeout, once, Flowed(safeForm: true));
        _waits.Enqueue(wait);
        wait.Start = Stopwatch.GetTimestamp();
        try
        {
            wait.Registration = milliseconds
                ? _pool.RegisterWaitForSingleObject(handle, s_onWait, wait, (int)timeout.TotalMilliseconds, once)
                : _pool.RegisterWaitForSingleObject(handle, s_onWait, wait, timeout, once);
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref wait.State, wait.Label, exception);
        }
        Accept(ref wait.State, wait.Label, seen);
        producer.Waits.Add(wait);
        return false;
    }

    /// <summary>A disposed handle is bad input: the registration must be refused and nothing may call back.</summary>
    private bool RegisterOnDisposedHandle(Random random, bool seen)
    {
        var handle = new AutoResetEvent(false);
        handle.Dispose();
        bool once = random.Next(2) == 0;
        TimeSpan timeout = WaitTimeout(random, once, wholeMilliseconds: false);
        var wait = new WaitRecord(this, NextId(), "a disposed AutoResetEvent", timeout, once, Flowed(safeForm: true));
        _waits.Enqueue(wait);
        try
        {
            RegisteredWait registration = _pool.RegisterWaitForSingleObject(handle, s_onWait, wait, timeout, once);
            Volatile.Write(ref wait.State, CallState.BadInput); // nothing may call back even so
            Fail($"RegisterWaitForSingleObject accepted a disposed wait handle (registration #{wait.Id})");
            registration.Unregister(null);
        }
        catch (ObjectDisposedException)
        {
            Volatile.Write(ref wait.State, CallState.BadInput);
        }
        catch (ArgumentException)
        {
            Volatile.Write(ref wait.State, CallState.BadInput);
        }
        _ = seen;
        return false;
    }

    private void Unregister(WaitRecord wait, bool withWaitObject)
    {
        if (Interlocked.Increment(ref wait.UnregisterCalls) != 1)
        {
            return;
        }
        RegisteredWait registration = wait.Registration!;
        if (!withWaitObject)
        {
            if (!registration.Unregister(null) && !_pool.IsShutdownStarted)
            {
                Fail($"{wait.Label}: the first Unregister returned false on a running pool");
            }
            return;
        }
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
        else if (!_pool.IsShutdownStarted)
        {
            Fail($"{wait.Label}: the first Unregister returned false on a running pool");
        }
    }

    internal void OnWait(WaitRecord wait, bool timedOut)
    {
        long now = Stopwatch.GetTimestamp();
        bool settled = wait.UnregisterSettled;
        if (Interlocked.Increment(ref wait.Inside) > 1)
        {
            Fail($"{wait.Label}: two callbacks of the registration overlap");
        }
        int callbacks = Interlocked.Increment(ref wait.Callbacks);
        if (settled)
        {
            Fail($"{wait.Label}: a callback started after the wait object given to Unregister was signalled");
        }
        if (wait.Once && callbacks > 1)
        {
            Fail($"{wait.Label}: a run-once registration called back {callbacks} times");
        }
        if (timedOut)
        {
            int timeouts = Interlocked.Increment(ref wait.TimedOutCallbacks);
            if (wait.TimeoutTicks < 0)
            {
                Fail($"{wait.Label}: called back as timed out although it has no timeout");
            }
            else
            {
                long earliest = wait.Start + timeouts * wait.TimeoutTicks;
                if (now < earliest)
                {
                    Fail($"{wait.Label}: timeout callback {timeouts} came {(earliest - now) * 1000.0 / Stopwatch.Frequency:F3} ms early "
                        + $"({timeouts} timeouts take at least {timeouts * wait.Timeout.TotalMilliseconds:F3} ms from the registration)");
                }
            }
        }
        CheckLocal(wait.Label, wait.ExpectedLocal);
        Interlocked.Decrement(ref wait.Inside);
    }

    // ---- Thread limits, properties, bad input --------------------------------------------------------------------

    private bool SetThreadLimits(Random random, bool seen)
    {
        int min = random.Next(0, 4);
        int max = Math.Max(1, min) + random.Next(0, 5);
        try
        {
            _pool.SetThreadLimits(min, max);
        }
        catch (ObjectDisposedException exception)
        {
            return RefuseCall($"SetThreadLimits({min}, {max})", exception);
        }
        if (seen)
        {
            Fail($"SetThreadLimits({min}, {max}): accepted although IsShutdownStarted was already true before the call");
        }
        return false;
    }

    private bool ReadProperties(Random random)
    {
        _ = _pool.ThreadCount + _pool.DedicatedThreadCount + _pool.PendingWorkItemCount + _pool.CompletedWorkItemCount
            + _pool.ScheduledTimerCount + _pool.WaitThreadCount + _pool.RegisteredWaitCount + _pool.MinThreads + _pool.MaxThreads
            + _pool.GetThreadInjectionCount((ThreadInjectionReason)random.Next(8));
        _ = _pool.ToString();
        using BlockingRegion region = WorkerPool.EnterBlockingRegion();
        if (region.IsActive)
        {
            Fail("EnterBlockingRegion on a producer thread (no pool's worker) returned an active region");
        }
        return false;
    }

    private bool BadCall(Random random)
    {
        int which = random.Next(15);
        var item = new PlainItem(this, NextId(), "bad input", PlainBehaviour.Plain, 0, 0, 0);
        var timer = new TimerRecord(this, item.Id, viaProvider: false, 0);
        var wait = new WaitRecord(this, item.Id, "bad input", TimeSpan.FromMilliseconds(-2), once: false, 0);
        (string what, Type expected, Action call) = which switch
        {
            0 => ("QueueUserWorkItem(null)", typeof(ArgumentNullException), (Action)(() => _pool.QueueUserWorkItem(null!))),
            1 => ("QueueUserWorkItem(null, state)", typeof(ArgumentNullException), () => _pool.QueueUserWorkItem(null!, item)),
            2 => ("QueueUserWorkItem<T>(null, state, true)", typeof(ArgumentNullException), () => _pool.QueueUserWorkItem<PlainItem>(null!, item, true)),
            3 => ("UnsafeQueueUserWorkItem((IWorkItem)null, false)", typeof(ArgumentNullException), () => _pool.UnsafeQueueUserWorkItem((IWorkItem)null!, false)),
            4 => ("QueueUserWorkItem<T>(callback, state, (WorkItemOptions)4)", typeof(ArgumentOutOfRangeException), () => _pool.QueueUserWorkItem(PlainItem.Action, item, (WorkItemOptions)4)),
            5 => ("UnsafeQueueUserWorkItem(IWorkItem, (WorkItemOptions)8)", typeof(ArgumentOutOfRangeException), () => _pool.UnsafeQueueUserWorkItem(item, (WorkItemOptions)8)),
            6 => ("Run((Action)null)", typeof(ArgumentNullException), () => _pool.Run((Action)null!)),
            7 => ("RunAsValueTask((Func<int>)null)", typeof(ArgumentNullException), () => _pool.RunAsValueTask((Func<int>)null!)),
            8 => ("CreateTimer(due -2 ms)", typeof(ArgumentOutOfRangeException), () => _pool.CreateTimer(s_onTimer, timer, TimeSpan.FromMilliseconds(-2), Timeout.InfiniteTimeSpan)),
            9 => ("CreateTimer(null callback)", typeof(ArgumentNullException), () => _pool.CreateTimer(null!, timer, TimeSpan.Zero, Timeout.InfiniteTimeSpan)),
            10 => ("RegisterWait(timeout -2 ms)", typeof(ArgumentOutOfRangeException), () => _pool.RegisterWait(_signals[0], s_onWait, wait, TimeSpan.FromMilliseconds(-2), false)),
            11 => ("RegisterWaitForSingleObject(timeout -2)", typeof(ArgumentOutOfRangeException), () => _pool.RegisterWaitForSingleObject(_autoEvents[0], s_onWait, wait, -2, false)),
            12 => ("SetThreadLimits(3, 1)", typeof(ArgumentOutOfRangeException), () => _pool.SetThreadLimits(3, 1)),
            13 => ("Shutdown((ShutdownMode)9)", typeof(ArgumentOutOfRangeException), () => _pool.Shutdown((ShutdownMode)9)),
            _ => ("SynchronizationContext.Post(null)", typeof(ArgumentNullException), () => _pool.SynchronizationContext.Post(null!, null)),
        };
        item.State = CallState.BadInput;
        timer.State = CallState.BadInput;
        wait.State = CallState.BadInput;
        _plain.Enqueue(item);
        _timers.Enqueue(timer);
        _waits.Enqueue(wait);
        try
        {
            call();
            Fail($"bad call {what} was accepted");
        }
        catch (Exception exception) when (expected.IsInstanceOfType(exception))
        {
            // The documented exception; the ledger checks that nothing ran.
        }
        catch (ObjectDisposedException) when (_pool.IsShutdownStarted)
        {
            // Refused for shutdown before the argument was looked at: acceptable too.
        }
        catch (Exception exception)
        {
            Fail($"bad call {what} threw {exception.GetType().Name}, expected {expected.Name}: {exception.Message}");
        }
        return false;
    }
}
