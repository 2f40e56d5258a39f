using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Tasks;

namespace Spindle;

/// <summary>
/// A <see cref="TaskScheduler"/> that runs tasks on a <see cref="WorkerPool"/>'s workers. Get it from
/// <see cref="WorkTarget.TaskScheduler"/>.
/// </summary>
/// <remarks>
/// <para>A task queued from one of the pool's workers goes to that worker's local queue (like the built-in pool);
/// <see cref="TaskCreationOptions.PreferFairness"/> sends it to the global queue instead, and
/// <see cref="TaskCreationOptions.LongRunning"/> runs it on one of the pool's dedicated threads
/// (<see cref="WorkItemOptions.LongRunning"/>). The queued entry is the task itself: scheduling allocates nothing.</para>
/// <para>While a task runs, <see cref="TaskScheduler.Current"/> is this scheduler, so child tasks and continuations
/// created inside use it by default, and an <c>await</c> inside (on a task, a socket, a file, a timer) resumes on the
/// pool through this scheduler, keeping <see cref="TaskScheduler.Current"/> across the await.
/// <see cref="SynchronizationContext.Current"/> is left alone (null on a worker).</para>
/// <para>Inlining (<see cref="Task.Wait()"/> on an unstarted task, synchronous continuations) happens only on the
/// pool's own threads, as the built-in scheduler inlines only on pool threads.</para>
/// <para>After the pool has stopped, a task queued here runs on the built-in <see cref="ThreadPool"/>, counted by
/// <see cref="WorkerPool.RedirectedCallbackCount"/> and reported by the <c>Spindle</c> event source's
/// <c>CallbackRedirected</c> warning. That holds for new tasks (<c>Task.Factory.StartNew</c>) as well as
/// continuations: the runtime queues an <c>await</c>'s continuation to this scheduler as a new task, and refusing it would
/// strand the awaiter (the runtime drops a continuation task whose scheduler throws).</para>
/// </remarks>
public sealed class WorkerPoolTaskScheduler : TaskScheduler, IShutdownAware
{
    /// <summary>What a released entry holds in place of its task: <see cref="ExecuteQueued"/> runs it as nothing.</summary>
    private static readonly object s_released = new();

    private readonly WorkTarget _target;
    private readonly TaskBridge _bridge;
    private readonly Action<object?> _execute;

    internal WorkerPoolTaskScheduler(WorkTarget target)
    {
        _target = target;
        _bridge = target.Bridge;
        _execute = ExecuteQueued;
    }

    /// <summary>The callback of this scheduler's entries (their state is the task; shutdown finds the scheduler as its target).</summary>
    object? IShutdownAware.QueuedCallback => _execute;

    /// <summary>A queued task always runs at shutdown: a Task cannot be cancelled from outside, and its awaiters wait for it.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

    /// <summary>The pool this scheduler runs tasks on.</summary>
    public WorkerPool Pool => _target.OwningPool;

    /// <summary>The lane this scheduler queues to, or null for the pool's own queue.</summary>
    public WorkerPoolLane? Lane => _target as WorkerPoolLane;

    /// <summary>
    /// How many tasks the pool runs at once when they are CPU work: the number of workers it aims for,
    /// <c>max(MinThreads, ProcessorCount)</c> capped at <c>MaxThreads</c> (it adds threads beyond that only while work
    /// is blocked), or the lane's cap when it is lower for a lane's scheduler. <see cref="Parallel"/> and PLINQ size
    /// their partitions by this figure.
    /// </summary>
    public override int MaximumConcurrencyLevel =>
        Math.Min(_bridge.Lane?.Cap ?? int.MaxValue, Math.Min(Pool.MaxThreads, Math.Max(Pool.MinThreads, Environment.ProcessorCount)));

    /// <inheritdoc/>
    /// <remarks>
    /// Never throws for a pool that is shutting down: a task queued then is a continuation of work the pool accepted
    /// (an <c>await</c>, a <c>ContinueWith</c>), and refusing it would strand whoever waits for it. During the drain it
    /// runs on the pool; after the pool has stopped it runs on the built-in <see cref="ThreadPool"/>
    /// (<see cref="WorkerPool.RedirectedCallbackCount"/>).
    /// </remarks>
    protected override void QueueTask(Task task)
    {
        ArgumentNullException.ThrowIfNull(task);
        TaskCreationOptions options = task.CreationOptions;
        var entry = new WorkItemEntry(_execute, task, null); // a task carries its own ExecutionContext
        if ((options & TaskCreationOptions.LongRunning) != 0)
        {
            // A long-running task during shutdown runs as ordinary work: no new dedicated thread is started then.
            _bridge.EnqueueLongRunningContinuation(entry);
        }
        else
        {
            _bridge.EnqueueContinuation(entry, preferLocal: (options & TaskCreationOptions.PreferFairness) == 0);
        }
    }

    /// <inheritdoc/>
    protected override bool TryExecuteTaskInline(Task task, bool taskWasPreviouslyQueued)
    {
        // Only on this pool's threads (for a lane's scheduler, only in an item of the lane, which holds one of its
        // slots, so the lane's cap holds). A task that was queued may be inlined too: whoever runs it first wins the task's
        // own atomic start, and the queued entry then finds it completed and does nothing. The common case, a worker
        // waiting for a task it has just queued, releases the entry first (taken back from its own ring, or, in a
        // lane's shared queue, left holding s_released), so that it does not keep the finished task (and what the task
        // references) reachable until a worker gets to it.
        if (!_bridge.IsOwnThread)
        {
            return false;
        }
        if (taskWasPreviouslyQueued)
        {
            _bridge.ReleaseQueuedEntry(_execute, task, s_released);
        }
        if (!TryExecuteTask(task))
        {
            return false;
        }
        Worker.Current?.Counts.CountInlineRun(); // progress for the stall monitor (a dedicated thread is not a worker)
        return true;
    }

    /// <inheritdoc/>
    /// <remarks>
    /// A snapshot for debuggers: the tasks sitting in the pool's queues at the moment of the call, read without
    /// stopping the workers (it may miss or repeat a task that moves meanwhile).
    /// </remarks>
    protected override IEnumerable<Task> GetScheduledTasks()
    {
        var tasks = new List<Task>();
        _bridge.VisitQueuedStates(state =>
        {
            if (state is Task task)
            {
                tasks.Add(task);
            }
        }, _execute);
        return tasks;
    }

    private void ExecuteQueued(object? task)
    {
        if (ReferenceEquals(task, s_released))
        {
            return; // the entry of a task that ran inline, released while it was queued (see TryExecuteTaskInline)
        }
        // For the stuck-item detector, which names a task of this scheduler by the task: every entry's callback is this.
        Worker? worker = OwnedItems.Enter(task!);
        try
        {
            TryExecuteTask((Task)task!);
        }
        finally
        {
            OwnedItems.Exit(worker);
        }
    }
}
