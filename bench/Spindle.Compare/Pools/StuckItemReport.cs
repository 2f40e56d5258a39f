using System;

namespace Spindle.Compare.Pools;

/// <summary>
/// A pool's report of a stuck item (see <see cref="IPoolUnderTest.TryObserveStuckItems"/>): what the item is (for a
/// delegate, its method as <c>Namespace.Type.Method</c>), how long it had run when reported, the worker thread that runs
/// it, and its lane's name (null for the pool's own queue).
/// </summary>
internal sealed record StuckItemReport(string Description, TimeSpan RunningTime, int ManagedThreadId, string? WorkerThreadName, string? LaneName);
