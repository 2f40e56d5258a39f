namespace Spindle.Tests;

/// <summary>The work target contract against a lane of the Normal class, without cap or bound.</summary>
public sealed class NormalLaneWorkTargetTests : LaneWorkTargetTests
{
    protected override LaneOptions Options => new() { Name = "normal", Priority = LanePriority.Normal };
}
