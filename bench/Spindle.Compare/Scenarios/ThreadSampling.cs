using System;
using System.Collections.Generic;
using System.Linq;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Where the process meter may sample the thread count while a scenario runs (a thread of the child waking every
/// 10 ms, <see cref="Infrastructure.ProcessMeter"/>): everywhere but in the scenarios of <see cref="Off"/>, whose peak
/// thread count is then read at the start and end of the measured part only. This list is the only place that
/// decides it; the comparison program's README names the same scenarios, in the same order, and a test holds the two
/// equal.
/// </summary>
internal static class ThreadSampling
{
    /// <summary>The ids of the scenarios that the sampler thread would disturb, in catalog order.</summary>
    public static IReadOnlyList<string> Off { get; } =
    [
        // The sampler would run pool code before the timed part; a cold start has nothing before it.
        "cold-start",
        // Measures the process's CPU time, to which the sampler's wake-ups would add.
        "idle-cpu",
        // Measures wake-up latency, which the sampler's wake-ups would disturb.
        "wake-latency",
        // Times how long an outside item waits to start behind busy workers; the sampler would compete for their cores.
        "fairness",
        // Fork latency is a wake-up latency.
        "fork-join",
        // The High latencies are tens of microseconds on a pool that honours the priority: the sampler's wake-ups
        // would preempt the workers they wait for.
        "priority",
    ];

    /// <summary>Whether the scenario <paramref name="scenarioId"/> may have its thread count sampled.</summary>
    public static bool AllowedIn(string scenarioId) => !Off.Contains(scenarioId, StringComparer.OrdinalIgnoreCase);
}
