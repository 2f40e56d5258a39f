namespace Spindle.Tests;

/// <summary>The work target contract against a serial lane (a cap of one): one item at a time, in queueing order.</summary>
public sealed class SerialLaneWorkTargetTests : LaneWorkTargetTests
{
    protected override LaneOptions Options => new() { Name = "serial", MaxConcurrency = 1 };

    protected override bool IsSerial => true;
}
