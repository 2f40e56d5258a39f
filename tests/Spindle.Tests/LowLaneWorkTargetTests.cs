namespace Spindle.Tests;

/// <summary>The work target contract against a lane of the Low class, without cap or bound.</summary>
public sealed class LowLaneWorkTargetTests : LaneWorkTargetTests
{
    protected override LaneOptions Options => new() { Name = "low", Priority = LanePriority.Low };
}
