using System.Threading.Tasks;

namespace Spindle.Tests;

/// <summary>The work target contract against the pool itself (its own queue, the default lane).</summary>
public sealed class PoolWorkTargetTests : WorkTargetContractTests
{
    protected override WorkTarget CreateTarget(WorkerPool pool) => pool;

    protected override bool IsLane => false;

    protected override long CompletedCount => Pool.CompletedWorkItemCount;

    protected override long PendingCount => Pool.PendingWorkItemCount;

    protected override long CancelledCount => Pool.CancelledWorkItemCount;

    protected override bool IsShutdownStarted => Pool.IsShutdownStarted;

    protected override int Shutdown(ShutdownMode mode) => Pool.Shutdown(mode);

    protected override Task<int> ShutdownAsync(ShutdownMode mode) => Pool.ShutdownAsync(mode);

    protected override void DisposeTarget() => Pool.Dispose();

    protected override ValueTask DisposeTargetAsync() => Pool.DisposeAsync();
}
