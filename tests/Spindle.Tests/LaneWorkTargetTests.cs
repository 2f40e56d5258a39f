using System.Threading.Tasks;

namespace Spindle.Tests;

/// <summary>
/// The work target contract against a lane of the test's pool, made from <see cref="Options"/>; one derived class per
/// kind of lane.
/// </summary>
public abstract class LaneWorkTargetTests : WorkTargetContractTests
{
    /// <summary>The options of the lane under test.</summary>
    protected abstract LaneOptions Options { get; }

    protected WorkerPoolLane Lane => TargetLane!;

    protected override WorkTarget CreateTarget(WorkerPool pool) => pool.CreateLane(Options);

    protected override bool IsLane => true;

    protected override long CompletedCount => Lane.CompletedWorkItemCount;

    protected override long PendingCount => Lane.PendingWorkItemCount;

    protected override long CancelledCount => Lane.CancelledWorkItemCount;

    protected override bool IsShutdownStarted => Lane.IsShutdownStarted;

    protected override int Shutdown(ShutdownMode mode) => Lane.Shutdown(mode);

    protected override Task<int> ShutdownAsync(ShutdownMode mode) => Lane.ShutdownAsync(mode);

    protected override void DisposeTarget() => Lane.Dispose();

    protected override ValueTask DisposeTargetAsync() => Lane.DisposeAsync();
}
