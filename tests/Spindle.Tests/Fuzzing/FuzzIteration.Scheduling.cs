using System;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// Scheduler tasks (StartNew, ContinueWith) and posts to the SynchronizationContext, of the pool and of its lanes.
internal sealed partial class FuzzIteration
{
    // ---- Scheduler tasks and posts -----------------------------------------------------------------------------

    private bool IssueStartNew(Random random, ProducerState? producer, bool seen)
    {
        LaneRecord? lane = PickLane(random, producer);
        WorkTarget target = lane is null ? _pool : lane.Lane;
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
            s_local.Value, steps, other)
        { Target = target, Lane = lane };
        _scheduled.Enqueue(scheduled);
        Task task;
        try
        {
            task = async
                ? Task.Factory.StartNew(() => ScheduledAsyncBody(scheduled), CancellationToken.None, options, target.TaskScheduler).Unwrap()
                : Task.Factory.StartNew(static state => ((SchedRecord)state!).Iteration.ScheduledBody((SchedRecord)state!),
                    scheduled, CancellationToken.None, options, target.TaskScheduler);
        }
        catch (TaskSchedulerException exception) when (exception.InnerException is ObjectDisposedException disposed)
        {
            return Refuse(ref scheduled.State, scheduled.Label, disposed, lane);
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
        var scheduled = new SchedRecord(this, NextId(), $"ContinueWith({(synchronously ? "ExecuteSynchronously" : "None")})", s_local.Value, [], null) { Target = _pool };
        _scheduled.Enqueue(scheduled);
        // ContinueWith never throws for a scheduler that refuses: the continuation faults instead (judged by the ledger).
        Task task = antecedent.ContinueWith(static (_, state) => ((SchedRecord)state!).Iteration.ScheduledBody((SchedRecord)state!),
            scheduled, CancellationToken.None,
            synchronously ? TaskContinuationOptions.ExecuteSynchronously : TaskContinuationOptions.None, _pool.TaskScheduler);
        // The pool's own scheduler only: an inlined continuation on a lane's scheduler runs inside the lane's item.
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
        if (TaskScheduler.Current != scheduled.Target.TaskScheduler)
        {
            Fail($"{scheduled.Label}: runs with TaskScheduler.Current other than the pool's");
        }
        CheckOnPool(scheduled.Label);
        CheckLocal(scheduled.Label, scheduled.ExpectedLocal);
    }

    internal void ScheduledBody(SchedRecord scheduled)
    {
        EnterLane(scheduled.Lane, null, scheduled.Label, queuedItem: false);
        object? outer = EnterCallback(scheduled);
        try
        {
            ScheduledStart(scheduled);
            Interlocked.Increment(ref scheduled.Completions);
        }
        finally
        {
            ExitCallback(outer);
            ExitLane(scheduled.Lane);
        }
    }

    private async Task ScheduledAsyncBody(SchedRecord scheduled)
    {
        ScheduledStart(scheduled);
        await Steps(scheduled.Steps, scheduled.Other).ConfigureAwait(_continuations);
        Interlocked.Increment(ref scheduled.Completions);
    }

    private bool IssuePost(Random random, bool seen, ProducerState? producer = null, LaneRecord? itemLane = null)
    {
        LaneRecord? lane = producer is not null ? PickLane(random, producer) : itemLane is not null && random.Next(2) == 0 ? itemLane : null;
        WorkTarget target = lane is null ? _pool : lane.Lane;
        AwaitStep[]? flow = _continuations && random.Next(3) == 0 ? PlanSteps(random, hasOther: false, late: true) : null;
        bool closure = random.Next(3) == 0;
        int id = NextId();
        OrderMark? mark = lane is { Serial: true } && producer is not null ? new OrderMark(producer.Index, ++producer.Sequence, $"post #{id}") : null;
        var post = new PostRecord(this, id, flow) { Target = target, Lane = lane, Mark = mark };
        _posts.Enqueue(post);
        try
        {
            if (closure)
            {
                target.SynchronizationContext.Post(_ => RunPost(post), null);
            }
            else
            {
                target.SynchronizationContext.Post(s_onPost, post);
            }
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref post.State, post.Label, exception, lane);
        }
        mark?.Ordered = true;
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
        EnterLane(post.Lane, post.Mark, post.Label, queuedItem: false);
        object? outer = EnterCallback(post);
        try
        {
            RunPostBody(post);
        }
        finally
        {
            ExitCallback(outer);
            ExitLane(post.Lane);
        }
    }

    private void RunPostBody(PostRecord post)
    {
        if (SynchronizationContext.Current != post.Target.SynchronizationContext)
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
}
