using System;
using Spindle.Parking;

namespace Spindle.Tests.Parking;

/// <summary>The Linux futex blocker (elsewhere these tests have nothing to check).</summary>
public sealed class FutexBlockerTests : ThreadBlockerContractTests
{
    private protected override BlockerKind Kind => BlockerKind.LinuxFutex;

    protected override bool IsAvailable => OperatingSystem.IsLinux();
}
