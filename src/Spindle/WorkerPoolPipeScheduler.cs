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
/// <para>Callbacks are queued like the pool's other continuations: without an <see cref="System.Threading.ExecutionContext"/>
/// (a pipe flows its own, as with the built-in <see cref="PipeScheduler.ThreadPool"/>), and never refused: during the
/// drain they still run on the pool (in both shutdown modes: <see cref="ShutdownMode.CancelPending"/> cancels user
/// work, not these), and once the pool has stopped on the built-in thread pool (counted by
/// <see cref="WorkerPool.RedirectedCallbackCount"/>), so a pipe never strands its reader or writer.</para>
/// <para>Where they queue. By default to the pool's shared queue, where the first free worker takes them. A scheduler
/// made with <c>preferLocal: true</c> queues a callback scheduled from one of the pool's workers to that worker's local
/// queue instead: it runs on the same worker once the current work item returns, unless an idle worker (woken for it,
/// as for any local item) steals it first. That suits a consumer that should batch what the current item produces, such
/// as a socket's send loop reading a pipe that a request handler writes in several flushes: it resumes after the
/// handler has written them all and sends them at once, where an inline reader would send each flush by itself and a
/// shared-queue reader would wake another worker for the first. Callbacks scheduled from other threads go to the
/// shared queue either way.</para>
/// </remarks>
public sealed class WorkerPoolPipeScheduler : PipeScheduler
{
    private readonly WorkerPool _pool;
    private readonly bool _preferLocal;

    /// <summary>A scheduler for <paramref name="pool"/> that queues to its shared queue (<c>pool.PipeScheduler</c> is one, created once).</summary>
    /// <exception cref="ArgumentNullException"><paramref name="pool"/> is null.</exception>
    public WorkerPoolPipeScheduler(WorkerPool pool)
        : this(pool, preferLocal: false)
    {
    }

    /// <summary>A scheduler for <paramref name="pool"/>; see the remarks for <paramref name="preferLocal"/>.</summary>
    /// <param name="pool">The pool the callbacks run on.</param>
    /// <param name="preferLocal"><see langword="true"/> to queue a callback scheduled on one of the pool's workers to
    /// that worker's local queue, so that it runs there after the current work item.</param>
    /// <exception cref="ArgumentNullException"><paramref name="pool"/> is null.</exception>
    public WorkerPoolPipeScheduler(WorkerPool pool, bool preferLocal)
    {
        ArgumentNullException.ThrowIfNull(pool);
        _pool = pool;
        _preferLocal = preferLocal;
    }

    /// <summary>The pool the callbacks run on.</summary>
    public WorkerPool Pool => _pool;

    /// <summary>Whether a callback scheduled on one of the pool's workers goes to that worker's local queue.</summary>
    public bool PreferLocal => _preferLocal;

    /// <summary>Queues <paramref name="action"/> with <paramref name="state"/> to the pool; never throws for the pool's state.</summary>
    /// <exception cref="ArgumentNullException"><paramref name="action"/> is null.</exception>
    public override void Schedule(Action<object?> action, object? state)
    {
        ArgumentNullException.ThrowIfNull(action);
        // Wrapped so that shutdown with CancelPending runs it too (a pipe's callback resumes its reader or writer); the
        // pipe hands in a few static delegates, each wrapped once, so this is allocation-free.
        ContinuationCallback callback = ContinuationCallback.For(ref _lastCallback, action);
        _pool.SchedulerCore.EnqueueContinuation(new WorkItemEntry(callback.Run, state, null), _preferLocal);
    }

    private ContinuationCallback? _lastCallback;
}
