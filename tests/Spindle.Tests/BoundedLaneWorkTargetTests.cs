namespace Spindle.Tests;

/// <summary>
/// The work target contract against a bounded lane whose producers wait for room. The limit is above what the tests
/// queue from inside the lane's own items, and below what they queue from outside, so outside producers meet the bound.
/// </summary>
public sealed class BoundedLaneWorkTargetTests : LaneWorkTargetTests
{
    private const int Limit = 1_024;

    protected override LaneOptions Options => new() { Name = "bounded", QueueLimit = Limit, FullMode = LaneFullMode.Wait };

    protected override int? QueueLimit => Limit;
}
