using System;
using System.Linq;
using Spindle.Compare.Scenarios;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The sizes and the report of the <c>efficiency</c> scenario (EfficiencyPlan, StepWork).</summary>
public sealed class EfficiencyScenarioTests
{
    [Fact]
    public void AStepLength_SpansTheBounds()
    {
        Assert.Equal(EfficiencyPlan.ShortestStepUs, EfficiencyPlan.LogUniformUs(0), 9);
        Assert.Equal(EfficiencyPlan.LongestStepUs, EfficiencyPlan.LogUniformUs(1), 6);
        // Log-uniform: the middle draw is the geometric mean of the bounds, not their mean.
        Assert.Equal(Math.Sqrt(EfficiencyPlan.ShortestStepUs * EfficiencyPlan.LongestStepUs), EfficiencyPlan.LogUniformUs(0.5), 6);
    }

    [Fact]
    public void TheSameSeed_GivesTheSameSteps()
    {
        double[] first = Draw(seed: 1_001);
        Assert.Equal(first, Draw(seed: 1_001));
        Assert.NotEqual(first, Draw(seed: 1_002));
        Assert.All(first, us => Assert.InRange(us, EfficiencyPlan.ShortestStepUs, EfficiencyPlan.LongestStepUs));
    }

    [Fact]
    public void AStep_HasAtLeastOneIteration()
    {
        Assert.Equal(1, EfficiencyPlan.Iterations(5, iterationsPerUs: 0.01));
        Assert.Equal(2_500, EfficiencyPlan.Iterations(5, iterationsPerUs: 500));
    }

    [Fact]
    public void EveryLevel_RunsAtLeastTwoWaves()
    {
        foreach (int level in EfficiencyPlan.Levels)
        {
            Assert.True(EfficiencyPlan.TransactionsAt(level, full: false) >= 2 * level, $"level {level}");
            Assert.Equal(2_000, EfficiencyPlan.TransactionsAt(level, full: true));
        }
    }

    [Fact]
    public void TheReport_HasARowPerLevel_TheWakeTail_AndTheCpuPerWork()
    {
        MetricInfo[] metrics = EfficiencyPlan.Metrics();
        string[] names = metrics.Select(m => m.Name).ToArray();
        Assert.Equal(EfficiencyPlan.Levels.Select(EfficiencyPlan.MetricName).Concat(["p5 efficiency @1", "cpu per work"]), names);
        Assert.All(metrics.Where(m => m.Name.StartsWith("efficiency", StringComparison.Ordinal)), m => Assert.Equal(Better.Higher, m.Better));
        Assert.Equal(Better.Lower, metrics.Single(m => m.Name == "cpu per work").Better);
    }

    [Fact]
    public void TheLoop_RunsAtAMeasurableRate()
    {
        if (!Spindle.Compare.Infrastructure.CpuClock.IsThreadClockSupported)
        {
            return; // the calibration reads the thread's CPU clock
        }
        Assert.True(StepWork.Calibrate() > 0);
    }

    private static double[] Draw(int seed)
    {
        var random = new Random(seed);
        return Enumerable.Range(0, 50).Select(_ => EfficiencyPlan.LogUniformUs(random.NextDouble())).ToArray();
    }
}
