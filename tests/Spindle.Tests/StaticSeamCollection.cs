using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Tests that change the library's static test seams (ring capacity, spin limit). xUnit runs this collection alone,
/// after the parallel ones, so no other test sees the changed values.
/// </summary>
[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class StaticSeamCollection
{
    public const string Name = "Static seams";
}
