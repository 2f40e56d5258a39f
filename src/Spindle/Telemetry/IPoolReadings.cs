using Spindle.Lanes;
using Spindle.Primitives;

namespace Spindle.Telemetry;

/// <summary>
/// What the pool's observable instruments read, each when a listener collects: counts the façade gathers from the
/// components that own them. Implemented by the pool; the instruments hold it instead of the pool itself, so telemetry
/// sits below the components it measures.
/// </summary>
internal interface IPoolReadings
{
    /// <summary>The pool's name (the <c>spindle.pool.name</c> tag).</summary>
    string Name { get; }

    /// <summary>Worker threads created and not yet retired.</summary>
    int ThreadCount { get; }

    /// <summary>Dedicated long-running threads alive.</summary>
    int DedicatedThreadCount { get; }

    /// <summary>Items run to completion on any of the pool's threads.</summary>
    long CompletedWorkItemCount { get; }

    /// <summary>Items queued and not yet started.</summary>
    long PendingWorkItemCount { get; }

    /// <summary>Items cancelled instead of run.</summary>
    long CancelledWorkItemCount { get; }

    /// <summary>Callbacks that arrived after the pool stopped and ran on the built-in pool.</summary>
    long RedirectedCallbackCount { get; }

    /// <summary>The pool's thread limit.</summary>
    int MaxThreads { get; }

    /// <summary>Workers inside a blocking region.</summary>
    int BlockingCount { get; }

    /// <summary>Items taken from another worker's queue.</summary>
    long StealCount { get; }

    /// <summary>Times a worker parked.</summary>
    long ParkCount { get; }

    /// <summary>Timers scheduled.</summary>
    int TimerCount { get; }

    /// <summary>Registered waits alive.</summary>
    int WaitCount { get; }

    /// <summary>Threads added or retired for <paramref name="reason"/>.</summary>
    long GetThreadInjectionCount(ThreadInjectionReason reason);

    /// <summary>Thread starts of <paramref name="kind"/> the OS refused.</summary>
    long GetCreationFailures(PoolThreadKind kind);

    /// <summary>The lanes that have not stopped (a snapshot).</summary>
    Lane[] LiveLanes();
}
