using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Tests that judge process-wide figures (the managed heap size), or that keep every core busy: xUnit runs this
/// collection alone, after the parallel ones, so that other tests' allocations do not count against them and no test
/// shares its cores with them.
/// </summary>
[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class ProcessWideMeasurementCollection
{
    public const string Name = "Process-wide measurements";
}
