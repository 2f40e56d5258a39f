using System;
using System.Diagnostics.CodeAnalysis;
using System.Threading;

namespace Spindle.Tasks;

/// <summary>
/// The public target a task bridge queues for (the pool, or one of its lanes), as the bridge sees it: the context its
/// Run items install, and the exceptions of a refused item. Implemented by the façade; attached once, before the
/// target is published.
/// </summary>
internal interface ITaskTarget
{
    /// <summary>The target's synchronization context: Run items install it while the caller's delegate runs.</summary>
    SynchronizationContext SynchronizationContext { get; }

    /// <summary>Throws the exception every entry point throws once the target is shutting down.</summary>
    [DoesNotReturn]
    void ThrowShutDown();

    /// <summary>The exception for an item refused because the target (a lane) is full.</summary>
    Exception FullException();
}
