namespace Spindle.Compare.Scenarios;

/// <summary>
/// A comparison of two variants of one scenario on the same pool (<see cref="IScenario.Comparisons"/>), for a bar that
/// is about the pool against itself, such as the cost of being observed: the ratio of the scenario's headline metric,
/// <paramref name="Variant"/> against <paramref name="Baseline"/>, > 1 when the variant does better.
/// </summary>
/// <param name="Variant">The variant compared.</param>
/// <param name="Baseline">The variant it is compared with.</param>
/// <param name="Label">What the ratio means, for the report (for example "observed / unobserved").</param>
internal sealed record VariantComparison(string Variant, string Baseline, string Label);
