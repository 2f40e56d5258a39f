using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using Xunit;

namespace Spindle.Tests.Fuzzing;

/// <summary>
/// Entry points of the API fuzzer over the pool and its lanes (see ApiFuzzer and FuzzIteration for what it does and checks).
/// </summary>
/// <remarks>
/// <para>Per commit: a few fixed seeds, seven iterations each (one per shutdown form; a few seconds in all). With <c>SPINDLE_STRESS=1</c>: the
/// fixed seeds for longer, then fresh seeds until about two and a half minutes have passed.</para>
/// <para>A failure's message starts with the seed and gives the command that replays it
/// (<c>SPINDLE_FUZZ_SEED=N SPINDLE_FUZZ_ITERATIONS=K</c>); with <c>SPINDLE_FUZZ_SEED</c> set, only that seed runs, for
/// <c>SPINDLE_FUZZ_ITERATIONS</c> iterations or <c>SPINDLE_FUZZ_SECONDS</c> seconds. <c>SPINDLE_FUZZ_OFF</c> switches
/// families of operations off (see ApiFuzzerOptions); <c>SPINDLE_FUZZ_KEEP_GOING=1</c> reports every failing iteration.</para>
/// </remarks>
[Collection(ProcessWideMeasurementCollection.Name)] // its stress form keeps every core busy for minutes
public sealed class ApiFuzzerTests
{
    /// <summary>The per-commit seeds: fixed, so that every run issues the same operation sequences.</summary>
    public static readonly int[] FixedSeeds = [1, 2, 3, 4];

    [Fact]
    public void RandomOperations_FromSeveralProducers_RacingEveryShutdownForm_KeepEveryContract()
    {
        List<string>? failures = ApiFuzzer.KeepGoing ? [] : null;
        if (ApiFuzzer.SeedFromEnvironment() is int replay)
        {
            ApiFuzzer.Run(new ApiFuzzerOptions
            {
                Seed = replay,
                Iterations = ApiFuzzer.IterationsFromEnvironment() ?? 7,
                Duration = ApiFuzzer.DurationFromEnvironment(),
            }.WithSwitchesFromEnvironment(), failures);
        }
        else if (!Stress.Enabled)
        {
            foreach (int seed in FixedSeeds)
            {
                ApiFuzzer.Run(new ApiFuzzerOptions { Seed = seed, Iterations = 7 }.WithSwitchesFromEnvironment(), failures);
            }
        }
        else
        {
            TimeSpan budget = ApiFuzzer.DurationFromEnvironment() ?? TimeSpan.FromSeconds(150);
            var clock = Stopwatch.StartNew();
            foreach (int seed in FixedSeeds.Concat(ApiFuzzer.FreshSeeds()))
            {
                TimeSpan left = budget - clock.Elapsed;
                if (left <= TimeSpan.Zero)
                {
                    break;
                }
                ApiFuzzer.Run(new ApiFuzzerOptions
                {
                    Seed = seed,
                    Duration = left < TimeSpan.FromSeconds(5) ? left : TimeSpan.FromSeconds(5),
                }.WithSwitchesFromEnvironment(), failures);
            }
        }
        if (failures is not null)
        {
            ApiFuzzer.AssertNone(failures);
        }
    }
}
