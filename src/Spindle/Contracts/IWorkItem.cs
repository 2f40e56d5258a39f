namespace Spindle;

/// <summary>
/// A unit of work that a <see cref="WorkerPool"/> can queue without allocating.
/// </summary>
/// <remarks>
/// The pool stores the object itself in its queues, so queueing an <see cref="IWorkItem"/> costs no
/// allocation once the queues have warmed up. The same object may be queued many times, also while
/// an earlier queueing of it is still pending or running: it runs once per successful queueing.
/// Items queued this way never flow <see cref="System.Threading.ExecutionContext"/> (like
/// <see cref="System.Threading.ThreadPool.UnsafeQueueUserWorkItem(System.Threading.IThreadPoolWorkItem, bool)"/>).
/// </remarks>
public interface IWorkItem
{
    /// <summary>Runs the work. Called on a worker thread of the pool the item was queued to.</summary>
    void Execute();
}
