using System;
using System.Threading;

namespace Spindle.Compare.Pools;

/// <summary>
/// A queue of a pool with scheduling rules of its own (priority, share, concurrency cap), from
/// <see cref="IPoolUnderTest.CreateLane"/>. Each method maps to the pool's closest API; see the implementations for the
/// exact calls.
/// </summary>
internal interface IPoolLane
{
    /// <summary>
    /// Queues a reusable item object without allocating and without flowing the caller's <see cref="ExecutionContext"/>
    /// (never to a worker's local queue).
    /// </summary>
    void UnsafeQueue(PoolWorkItem item);

    /// <summary>
    /// Queues <paramref name="callBack"/> with <paramref name="state"/>, flowing the caller's
    /// <see cref="ExecutionContext"/> (never to a worker's local queue).
    /// </summary>
    void Queue(Action<object?> callBack, object? state);
}
