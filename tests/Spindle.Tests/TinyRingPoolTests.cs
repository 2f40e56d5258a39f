namespace Spindle.Tests;

/// <summary>
/// The pool with 4-slot local rings (so overflow to the global queue and stealing happen constantly) and searchers
/// that park without spinning (so every enqueue races a parking worker). Both are options of each pool, so this flavour
/// runs in parallel with the others.
/// </summary>
public sealed class TinyRingPoolTests : WorkerPoolContractTests
{
    protected override void ConfigureFlavor(WorkerPoolOptions options)
    {
        options.LocalQueueCapacity = 4;
        options.MaxSpinAttempts = 0;
    }
}
