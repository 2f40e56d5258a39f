using System;
using System.IO.Pipelines;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.IO;

/// <summary>
/// A <see cref="PipeScheduler"/> that runs a pipe's callbacks on a <see cref="WorkerPool"/>: pass it as
/// <see cref="PipeOptions"/>' reader or writer scheduler so that the code after <c>ReadAsync</c> or <c>FlushAsync</c>
/// resumes on the pool (<c>pool.PipeScheduler</c>).
/// </summary>
/// <remarks>
/// Callbacks are queued like the pool's other continuations: without an <see cref="System.Threading.ExecutionContext"/>
/// (a pipe flows its own, as with the built-in <see cref="PipeScheduler.ThreadPool"/>), to the pool's shared queue, and
/// never refused: during the drain they still run on the pool (in both shutdown modes: <see cref="ShutdownMode.CancelPending"/>
/// cancels user work, not these), and once the pool has stopped on the built-in thread pool (counted by
/// <see cref="WorkerPool.RedirectedCallbackCount"/>), so a pipe never strands its reader or writer.
/// </remarks>
public sealed class WorkerPoolPipeScheduler : PipeScheduler
{
    private readonly WorkerPool _pool;

    /// <summary>A scheduler for <paramref name="pool"/> (<c>pool.PipeScheduler</c> is one, created once).</summary>
    /// <exception cref="ArgumentNullException"><paramref name="pool"/> is null.</exception>
    public WorkerPoolPipeScheduler(WorkerPool pool)
    {
        ArgumentNullException.ThrowIfNull(pool);
        _pool = pool;
    }

    /// <summary>The pool the callbacks run on.</summary>
    public WorkerPool Pool => _pool;

    /// <summary>Queues <paramref name="action"/> with <paramref name="state"/> to the pool; never throws for the pool's state.</summary>
    /// <exception cref="ArgumentNullException"><paramref name="action"/> is null.</exception>
    public override void Schedule(Action<object?> action, object? state)
    {
        ArgumentNullException.ThrowIfNull(action);
        // Wrapped so that shutdown with CancelPending runs it too (a pipe's callback resumes its reader or writer); the
        // pipe hands in a few static delegates, each wrapped once, so this is allocation-free.
        ContinuationCallback callback = ContinuationCallback.For(ref _lastCallback, action);
        _pool.SchedulerCore.EnqueueContinuation(new WorkItemEntry(callback.Run, state, null), preferLocal: false);
    }

    private ContinuationCallback? _lastCallback;
}
