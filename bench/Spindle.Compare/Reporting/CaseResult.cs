using System.Collections.Generic;
using Spindle.Compare.Pools;
using Spindle.Compare.Runner;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Reporting;

/// <summary>Every child run of one (scenario, variant), per pool.</summary>
internal sealed class CaseResult(IScenario scenario, string variant)
{
    private readonly Dictionary<PoolKind, List<ChildOutcome>> _outcomes = [];

    public IScenario Scenario { get; } = scenario;

    public string Variant { get; } = variant;

    public void Add(PoolKind pool, ChildOutcome outcome)
    {
        if (!_outcomes.TryGetValue(pool, out List<ChildOutcome>? list))
        {
            list = [];
            _outcomes.Add(pool, list);
        }
        list.Add(outcome);
    }

    public IReadOnlyList<ChildOutcome> Outcomes(PoolKind pool) =>
        _outcomes.TryGetValue(pool, out List<ChildOutcome>? list) ? list : [];

    /// <summary>How many runs on <paramref name="pool"/> produced figures, of those asked for.</summary>
    public RunTally Tally(PoolKind pool)
    {
        IReadOnlyList<ChildOutcome> outcomes = Outcomes(pool);
        int succeeded = 0;
        foreach (ChildOutcome outcome in outcomes)
        {
            succeeded += outcome.Succeeded ? 1 : 0;
        }
        return new RunTally(succeeded, outcomes.Count);
    }

    /// <summary>The runs that produced no figures, pool by pool in <see cref="PoolKind.All"/> order, each in run order.</summary>
    public List<FailedRun> FailedRuns()
    {
        var failed = new List<FailedRun>();
        foreach (PoolKind pool in PoolKind.All)
        {
            IReadOnlyList<ChildOutcome> outcomes = Outcomes(pool);
            for (int i = 0; i < outcomes.Count; i++)
            {
                if (!outcomes[i].Succeeded)
                {
                    failed.Add(new FailedRun(Scenario.Id, Variant, pool.Id, pool.DisplayName, i + 1, outcomes[i].Failure ?? "no figures"));
                }
            }
        }
        return failed;
    }

    /// <summary>The recorded series of the successful runs on <paramref name="pool"/> that have one, in run order.</summary>
    public List<List<double[]>> Series(PoolKind pool)
    {
        var series = new List<List<double[]>>();
        foreach (ChildOutcome outcome in Outcomes(pool))
        {
            if (outcome.Measurement?.Series is { } samples)
            {
                series.Add(samples);
            }
        }
        return series;
    }

    /// <summary>The figures of <paramref name="metric"/> from the successful runs on <paramref name="pool"/>, in run order.</summary>
    public List<double> Values(PoolKind pool, string metric)
    {
        var values = new List<double>();
        foreach (ChildOutcome outcome in Outcomes(pool))
        {
            if (outcome.Measurement is { } measurement && measurement.Values.TryGetValue(metric, out double value))
            {
                values.Add(value);
            }
        }
        return values;
    }
}
