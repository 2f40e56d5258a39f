namespace Spindle.Tests;

/// <summary>The work target contract against a lane of the High class, without cap or bound.</summary>
public sealed class HighLaneWorkTargetTests : LaneWorkTargetTests
{
    protected override LaneOptions Options => new() { Name = "high", Priority = LanePriority.High };
}
