namespace Spindle;

/// <summary>What a <see cref="WorkerPool"/> does when a work item throws.</summary>
public enum UnhandledExceptionPolicy
{
    /// <summary>
    /// Mirrors <see cref="System.Threading.ThreadPool"/>: the exception is offered to
    /// <see cref="WorkerPool.UnhandledException"/>; unless a handler sets
    /// <see cref="WorkItemExceptionEventArgs.Handled"/>, it is rethrown on the worker thread with its
    /// original stack and the process fails.
    /// </summary>
    FailProcess = 0,

    /// <summary>
    /// The exception is delivered once to <see cref="WorkerPool.UnhandledException"/> and the pool
    /// keeps running; the worker goes on with the next item.
    /// </summary>
    Report = 1,
}
