using System;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// Run and RunAsValueTask: on the pool, on its lanes, and on the neighbour pool.
internal sealed partial class FuzzIteration
{
    // ---- Run and RunAsValueTask --------------------------------------------------------------------------------

    private bool IssueRun(Random random, ProducerState? producer, bool seen)
    {
        // Only producers run on lanes: from a lane's own item a Run on a full lane could not wait for room.
        LaneRecord? lane = PickLane(random, producer);
        WorkTarget target = lane is null ? _pool : lane.Lane;
        bool poolSeen = seen;
        seen = lane is null ? seen : lane.Lane.IsShutdownStarted;
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
                    if (poolSeen)
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
        int id = NextId();
        OrderMark? mark = lane is { Serial: true } && producer is not null ? new OrderMark(producer.Index, ++producer.Sequence, $"Run #{id}") : null;
        var run = new RunRecord(id, form, kind, source, throws, steps, other, Flowed(safeForm: true), inside: producer is null)
        {
            Target = target,
            Lane = lane,
            Mark = mark,
        };
        _runs.Enqueue(run);
        bool mayBlock = lane is { MayWait: true };
        if (mayBlock)
        {
            Interlocked.Increment(ref lane!.WaitingForRoom);
            Interlocked.Increment(ref _producersWaiting);
        }
        CancellationToken token = kind == TokenKind.None && explicitNone ? CancellationToken.None : run.Token;
        Task task;
        try
        {
            switch (form)
            {
                case RunForm.RunAction:
                    task = kind == TokenKind.None && !explicitNone ? target.Run(() => RunSync(run)) : target.Run(() => RunSync(run), token);
                    break;
                case RunForm.RunFunc:
                    task = target.Run(() => RunFunc(run), token);
                    break;
                case RunForm.RunAsync:
                    task = target.Run(() => RunAsyncBody(run), token);
                    break;
                case RunForm.RunAsyncFunc:
                    task = target.Run(() => RunAsyncFuncBody(run), token);
                    break;
                case RunForm.ValueTaskAction:
                    task = Consume(target.RunAsValueTask(() => RunSync(run), token), viaAwait);
                    break;
                default:
                    task = Consume(target.RunAsValueTask(() => RunFunc(run), token), viaAwait);
                    break;
            }
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref run.State, run.Label, exception, lane);
        }
        catch (WorkRejectedException exception)
        {
            return Reject(ref run.State, run.Label, exception, lane);
        }
        finally
        {
            if (mayBlock)
            {
                Interlocked.Decrement(ref lane!.WaitingForRoom);
                Interlocked.Decrement(ref _producersWaiting);
            }
        }
        run.Task = task;
        Accept(ref run.State, run.Label, seen);
        mark?.Ordered = true;
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
        bool context = SynchronizationContext.Current == run.Target.SynchronizationContext;
        if (!context && (run.IsQueuedItem || TaskScheduler.Current != run.Target.TaskScheduler))
        {
            Fail($"{run.Label}: the delegate runs with neither the pool's SynchronizationContext nor its TaskScheduler as the current one");
        }
        CheckLocal(run.Label, run.ExpectedLocal);
        if (run.Lane is not null && WorkerPool.Current == _pool && WorkerPoolLane.Current != run.Lane.Lane)
        {
            Fail($"{run.Label}: WorkerPoolLane.Current is {WorkerPoolLane.Current?.Name ?? "null"} in the delegate");
        }
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
        EnterLane(run.Lane, run.Mark, run.Label, queuedItem: true);
        object? outer = EnterCallback(run);
        try
        {
            BeginRun(run);
            EndRun(run);
        }
        finally
        {
            ExitCallback(outer);
            ExitLane(run.Lane);
        }
    }

    private int RunFunc(RunRecord run)
    {
        RunSync(run);
        return run.Id;
    }

    private async Task RunAsyncBody(RunRecord run)
    {
        // Only the start is watched for overlap: the awaits' continuations are other pieces of the lane's work.
        EnterLane(run.Lane, run.Mark, run.Label, queuedItem: true);
        ExitLane(run.Lane);
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
}
