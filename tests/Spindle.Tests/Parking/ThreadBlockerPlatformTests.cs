using System;
using Spindle.Parking;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>Which blocker the platform picks, and the factory's input checks.</summary>
public sealed class ThreadBlockerPlatformTests
{
    [Fact]
    public void PlatformKind_IsTheBestPrimitiveOfThisPlatform()
    {
        BlockerKind expected = OperatingSystem.IsLinux() ? BlockerKind.LinuxFutex
            : OperatingSystem.IsWindows() ? BlockerKind.WindowsWaitOnAddress
            : BlockerKind.Monitor;
        Assert.Equal(expected, ThreadBlocker.PlatformKind);
        Assert.Equal(expected, ThreadBlocker.Create().Kind);
    }

    [Theory]
    [InlineData(-1)]
    [InlineData(3)]
    [InlineData(int.MaxValue)]
    public void Create_WithAnUndefinedKind_Throws(int kind)
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => ThreadBlocker.Create((BlockerKind)kind));
        Assert.Equal("kind", e.ParamName);
    }
}
