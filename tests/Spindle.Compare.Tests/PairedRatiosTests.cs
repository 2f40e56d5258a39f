using Spindle.Compare.Reporting;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The "variants against each other" rows: a pair with a failed run is shown as failed, never dropped.</summary>
public sealed class PairedRatiosTests
{
    [Fact]
    public void APairWithAFailedRun_IsShownAsFailed_AndLeftOutOfTheMedian()
    {
        double?[] ratios = [1.5, null, 2.0];

        Assert.Equal(1.75, PairedRatios.Median(ratios));
        Assert.Equal("1.50 failed 2.00", PairedRatios.Format(ratios));
    }

    [Fact]
    public void WithoutAPairThatSucceededOnBothSides_TheMedianIsNotAvailable()
    {
        double?[] ratios = [null, null];

        Assert.Null(PairedRatios.Median(ratios));
        Assert.Equal("failed failed", PairedRatios.Format(ratios));
    }
}
