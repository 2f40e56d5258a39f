using Spindle.Parking;

namespace Spindle.Tests;

/// <summary>The pool with its parked workers forced onto the <see cref="BlockerKind.Monitor"/> fallback blocker.</summary>
public sealed class MonitorBlockerPoolTests : WorkerPoolContractTests
{
    protected override void ConfigureFlavor(WorkerPoolOptions options) => options.BlockerKind = BlockerKind.Monitor;
}
