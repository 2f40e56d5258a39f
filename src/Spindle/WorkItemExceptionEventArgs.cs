using System;

namespace Spindle;

/// <summary>Describes an exception thrown by a work item, raised through <see cref="WorkerPool.UnhandledException"/>.</summary>
public sealed class WorkItemExceptionEventArgs : EventArgs
{
    internal WorkItemExceptionEventArgs(WorkerPool pool, Exception exception)
    {
        Pool = pool;
        Exception = exception;
    }

    /// <summary>The pool whose worker ran the item.</summary>
    public WorkerPool Pool { get; }

    /// <summary>The exception the item threw, with its original stack trace.</summary>
    public Exception Exception { get; }

    /// <summary>
    /// Set to <see langword="true"/> to keep the process alive under
    /// <see cref="UnhandledExceptionPolicy.FailProcess"/>. Ignored under <see cref="UnhandledExceptionPolicy.Report"/>,
    /// where the pool always continues.
    /// </summary>
    public bool Handled { get; set; }
}
