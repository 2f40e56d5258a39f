using System.Collections.Generic;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// A workload measured in a fresh child process per run. Register new scenarios in <see cref="ScenarioCatalog"/>.
/// </summary>
internal interface IScenario
{
    /// <summary>The id used with <c>--scenario</c> and in the report.</summary>
    string Id { get; }

    /// <summary>One line for <c>--list</c>.</summary>
    string Description { get; }

    IReadOnlyList<string> Variants { get; }

    /// <summary>Every metric <see cref="Run"/> reports, in report order.</summary>
    IReadOnlyList<MetricInfo> Metrics { get; }

    /// <summary>
    /// The metrics <paramref name="variant"/> reports (all of <see cref="Metrics"/> unless a scenario's variants measure
    /// different things), in report order.
    /// </summary>
    IReadOnlyList<MetricInfo> MetricsFor(string variant) => Metrics;

    /// <summary>The metric shown in the progress line of each run (one that every variant reports).</summary>
    string HeadlineMetric { get; }

    /// <summary>
    /// At most this many runs per pool unless <c>--runs</c> says otherwise: for scenarios whose built-in runs take
    /// seconds each (the effect they show is large and stable), so the default run stays a few minutes long. Null: no cap.
    /// </summary>
    int? MaxDefaultRuns => null;

    /// <summary>
    /// Whether <paramref name="variant"/> measures a cold process: its child runs with the runtime's default tiered
    /// compilation. Every other child starts call counting at once (see <see cref="Runner.ChildProcess"/>), so that its
    /// warm-up brings the code it measures to its final tier.
    /// </summary>
    bool MeasuresColdProcess(string variant) => false;

    /// <summary>
    /// Pairs of variants whose ratio on the same pool the report shows, run by run (the runner interleaves the variants
    /// so that the runs it pairs are measured seconds apart). Empty for most scenarios.
    /// </summary>
    IReadOnlyList<VariantComparison> Comparisons => [];

    /// <summary>
    /// An earlier variant (in <see cref="Variants"/> order) whose run on <paramref name="pool"/> is exactly this one's
    /// as well (the pool lacks the feature the variant measures and runs the same code for both), or null. The runner
    /// measures it once per round and reports the outcome under both variants, so the duplicate costs no child process.
    /// </summary>
    string? SameRunAs(string variant, PoolKind pool) => null;

    /// <summary>How the pool should be configured for <paramref name="variant"/>.</summary>
    PoolSettings GetPoolSettings(string variant) => PoolSettings.Default;

    /// <summary>
    /// Runs the variant on <paramref name="pool"/> (created for this run, in this process): a smaller warm-up run of
    /// the same workload first, then the measured one. Throws if the workload fails.
    /// </summary>
    Measurement Run(IPoolUnderTest pool, string variant, bool full);
}
