using System;

namespace Spindle.Tests;

/// <summary>
/// Sizes for the stress forms of the tests. The per-commit run uses the small counts; <c>SPINDLE_STRESS=1</c> scales
/// them up (see StressTests.cs).
/// </summary>
internal static class Stress
{
    public static bool Enabled { get; } = Environment.GetEnvironmentVariable("SPINDLE_STRESS") == "1";

    /// <summary>The fast count, or the stress count when <c>SPINDLE_STRESS=1</c>.</summary>
    public static int Scale(int fast, int stress) => Enabled ? stress : fast;
}
