using System.Collections.Generic;

namespace Spindle.Compare.Pools;

/// <summary>
/// Peer pools the comparison would measure beside Spindle and the built-in pool, each from its NuGet package. A peer
/// becomes a <see cref="PoolKind"/> only when its package restores on the machine; the others are reported as
/// unavailable, so that the program still builds and runs and says which peer is missing.
/// </summary>
internal static class Peers
{
    /// <summary>The peers that cannot be measured in this build, one line each (empty when every peer is in <see cref="PoolKind.All"/>).</summary>
    public static IReadOnlyList<string> Unavailable { get; } =
    [
        "SmartThreadPool (NuGet package 'SmartThreadPool.dll'): unavailable, the package is not in this machine's NuGet feed",
        "PowerThreadPool (NuGet package 'PowerThreadPool'): unavailable, the package is not in this machine's NuGet feed",
    ];
}
