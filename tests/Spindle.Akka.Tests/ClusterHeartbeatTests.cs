using System;
using System.Threading.Tasks;
using Spindle.Akka.ClusterSample;
using Xunit;

namespace Spindle.Akka.Tests;

/// <summary>A two-node Akka.NET cluster on Spindle keeps its heartbeats while actors block and others flood.</summary>
public sealed class ClusterHeartbeatTests
{
    [Fact]
    public async Task TwoNodesOnSpindle_WithBlockingActorsOnTheirOwnPool_StayReachable_AndHeartbeatWithinTheAcceptablePause()
    {
        HeartbeatReport report = await HeartbeatRun.RunAsync(onSpindle: true, TimeSpan.FromSeconds(6), blockingActors: 8 * Environment.ProcessorCount);
        Assert.True(report.Unreachable == 0, report.ToString());
        Assert.True(report.Beats > 0, report.ToString());
        Assert.True(report.MaxGap < report.AcceptablePause, report.ToString());
        Assert.True(report.RoundTrips > 0, report.ToString());
    }
}
