using Spindle.Queues;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The pool with 4-slot local rings (so overflow to the global queue and stealing happen constantly) and searchers
/// that park without spinning (so every enqueue races a parking worker). Both seams are static, hence the
/// non-parallel collection.
/// </summary>
[Collection(StaticSeamCollection.Name)]
public sealed class TinyRingPoolTests : WorkerPoolContractTests
{
    private readonly int _savedCapacity;
    private readonly int _savedSpinAttempts;

    public TinyRingPoolTests()
    {
        _savedCapacity = WorkStealingRing.s_capacityOverride;
        _savedSpinAttempts = WorkerPool.s_maxSpinAttempts;
        WorkStealingRing.s_capacityOverride = 4;
        WorkerPool.s_maxSpinAttempts = 0;
    }

    protected override void RestoreFlavor()
    {
        WorkStealingRing.s_capacityOverride = _savedCapacity;
        WorkerPool.s_maxSpinAttempts = _savedSpinAttempts;
    }
}
