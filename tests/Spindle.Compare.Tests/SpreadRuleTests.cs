using Spindle.Compare.Reporting;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The comparison program's rule for a row whose runs of one pool spread wider than the other's (SpreadRule).</summary>
public sealed class SpreadRuleTests
{
    [Theory]
    [InlineData(3.0, 1.2, true)]    // wide, and far wider than the other
    [InlineData(1.6, 1.0, true)]    // just over both lines
    [InlineData(1.5, 1.0, false)]   // not over 1.5x
    [InlineData(1.4, 1.0, false)]
    [InlineData(2.0, 1.7, false)]   // wide, but under 1.25 times the other's 1.7
    [InlineData(2.2, 1.7, true)]    // over 1.25 x 1.7 = 2.125
    [InlineData(1.0, 3.0, false)]   // the other pool is the wide one
    public void Wider_NeedsAWideSpreadAndWiderThanTheOther(double spread, double other, bool wider) =>
        Assert.Equal(wider, SpreadRule.Wider(spread, other));

    [Theory]
    [InlineData(3.0, 1.2)]
    [InlineData(2.2, 1.7)]
    public void TheRuleReadTheOtherWayRound_MarksTheOtherPool(double wide, double narrow)
    {
        Assert.True(SpreadRule.Wider(wide, narrow));
        Assert.False(SpreadRule.Wider(narrow, wide));
    }

    [Fact]
    public void AnUnknownSpread_IsNeverWider()
    {
        Assert.False(SpreadRule.Wider(null, 1.0));
        Assert.False(SpreadRule.Wider(5.0, null));
        Assert.False(SpreadRule.Wider(null, null));
    }
}
