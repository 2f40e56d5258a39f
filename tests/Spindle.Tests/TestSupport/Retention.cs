using System;
using System.Collections.Generic;
using System.Linq;
using Xunit;

namespace Spindle.Tests;

/// <summary>Checks that something the pool or a queue once held is no longer kept alive.</summary>
internal static class Retention
{
    public static void AssertCollected(WeakReference weak, string what) => AssertCollected([weak], what);

    /// <summary>
    /// Whether the object is unreachable after one round of full collections: for a check made at a moment that cannot
    /// be waited out, such as inside the pool item whose queue is in question.
    /// </summary>
    public static bool IsCollectedNow(WeakReference weak)
    {
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        return !weak.IsAlive;
    }

    /// <summary>Asserts that every referenced object becomes unreachable.</summary>
    public static void AssertCollected(IReadOnlyList<WeakReference> weak, string what)
    {
        // The objects are unreachable once the code under test has dropped them. Reachability does not change with
        // time, so a few seconds of full collections are plenty; they also cover a worker still leaving the frame that
        // ran an item.
        Waits.Poll(() =>
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            return weak.All(w => !w.IsAlive);
        }, TimeSpan.FromSeconds(5));
        int[] alive = Enumerable.Range(0, weak.Count).Where(i => weak[i].IsAlive).ToArray();
        Assert.True(alive.Length == 0,
            $"Still reachable after full collections: {what} ({alive.Length} of {weak.Count}; first: #{(alive.Length > 0 ? alive[0] : -1)})");
    }
}
