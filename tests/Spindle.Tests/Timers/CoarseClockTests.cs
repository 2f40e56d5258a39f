using System;
using System.Diagnostics;
using Spindle.Timers;
using Xunit;

namespace Spindle.Tests.Timers;

/// <summary>The coarse clock that long timers are placed with: its readings bracket the precise clock.</summary>
public sealed class CoarseClockTests
{
    [Fact]
    public void Readings_BracketThePreciseClock_OrTheClockIsOff()
    {
        if (!OperatingSystem.IsLinux())
        {
            Assert.False(CoarseClock.TryRead(out _, out _), "the coarse clock is Linux's; elsewhere every timer reads the precise clock");
            return;
        }
        for (int i = 0; i < 200_000; i++)
        {
            long before = Stopwatch.GetTimestamp();
            if (!CoarseClock.TryRead(out long lower, out long upper))
            {
                // Off on this machine (resolution or origin not as expected, or the bound failed once): the precise clock
                // is used instead, and the switch is for good.
                Assert.False(CoarseClock.IsEnabled);
                Assert.False(CoarseClock.TryRead(out _, out _));
                return;
            }
            long after = Stopwatch.GetTimestamp();
            Assert.True(upper >= before, $"upper bound {upper} is below a precise reading taken before it ({before})");
            Assert.True(lower <= after, $"lower bound {lower} is above a precise reading taken after it ({after})");
            Assert.Equal(CoarseClock.MarginTicks, upper - lower);
        }
        Assert.InRange(CoarseClock.MarginTicks, Stopwatch.Frequency / 1000, 51 * Stopwatch.Frequency / 1000);
        Assert.True(CoarseClock.MinDelayTicks >= 200 * CoarseClock.MarginTicks, "the margin stays under 0.5% of the delays it is used for");
    }
}
