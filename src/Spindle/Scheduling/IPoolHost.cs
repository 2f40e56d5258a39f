using System;
using System.Diagnostics.CodeAnalysis;
using Spindle.Telemetry;

namespace Spindle.Scheduling;

/// <summary>
/// What the pool's components need of the pool itself (the <see cref="WorkerPool"/> façade implements it): its name, its
/// instruments, the caller's exception handlers, the shutdown exception, and the figures its shutdown reports. The
/// components below the façade hold this instead of the façade, so no lower folder depends on the root.
/// </summary>
internal interface IPoolHost
{
    /// <summary>The pool's name (<see cref="WorkerPoolOptions.Name"/>).</summary>
    string Name { get; }

    /// <summary>The pool's instruments (created last by the façade's constructor: read them when used, not when wired).</summary>
    PoolMetrics Metrics { get; }

    /// <summary>Items that completed (ran to the end, or threw), for the shutdown event.</summary>
    long CompletedWorkItemCount { get; }

    /// <summary>Items cancelled by shutdown, for the shutdown event.</summary>
    long CancelledWorkItemCount { get; }

    /// <summary>Callbacks that ran on the built-in pool after the stop, for the shutdown event.</summary>
    long RedirectedCallbackCount { get; }

    /// <summary>
    /// An item threw <paramref name="exception"/>: the pool's <c>UnhandledException</c> handlers see it. Returns whether one
    /// of them marked it handled.
    /// </summary>
    bool ReportItemException(Exception exception);

    /// <summary>Throws the exception every entry point throws once the pool is shutting down.</summary>
    [DoesNotReturn]
    void ThrowShutDown();

    /// <summary>Whether anyone handles the pool's stuck-item event (the detector builds no report otherwise).</summary>
    bool HasStuckWorkItemHandlers { get; }

    /// <summary>
    /// The stuck-item detector found an item running on <paramref name="thread"/> for <paramref name="runningTime"/>: the
    /// pool raises its stuck-item event (on the built-in pool, so a slow handler never holds the detector).
    /// </summary>
    void RaiseStuckWorkItemDetected(string description, System.Threading.Thread? thread, TimeSpan runningTime, string? laneName);

    /// <summary>The pool has stopped: its I/O driver and sockets stop too.</summary>
    void OnIoStopped();
}
