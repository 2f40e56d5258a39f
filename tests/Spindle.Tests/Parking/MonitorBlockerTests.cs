using Spindle.Parking;

namespace Spindle.Tests.Parking;

/// <summary>The <see cref="System.Threading.Monitor"/> fallback blocker, available everywhere.</summary>
public sealed class MonitorBlockerTests : ThreadBlockerContractTests
{
    private protected override BlockerKind Kind => BlockerKind.Monitor;
}
