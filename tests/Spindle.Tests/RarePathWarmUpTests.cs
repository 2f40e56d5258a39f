using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The pool's rare paths are compiled ahead of their first call while a pool is quiet: the stall monitor, once it has
/// had nothing to watch for a moment with a core of the process idle, compiles them one at a time before it sleeps
/// (process-wide: compiled code is shared by every pool). Runs alone (the process-wide collection): the monitor reads
/// the process's CPU time, and tests computing beside it would keep its cores busy.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class RarePathWarmUpTests
{
    [Fact]
    public void APoolThatGoesQuietCompilesEveryRarePathAhead()
    {
        Assert.True(RuntimeFeature.IsDynamicCodeCompiled, "The tests run on the JIT.");
        int listed = RarePathWarmUp.ListRarePaths().Count;
        Assert.True(listed > 0, "No rare path listed.");
        // One worker busy with an item leaves nobody parked: the monitor watches, then goes quiet once the item is done.
        // Each round arms it again, in case a quiet spell met other work in the process and was passed over.
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "warm-up", MinThreads = 1, MaxThreads = 1 });
        using var done = new ManualResetEventSlim();
        bool prepared = Waits.Poll(() =>
        {
            done.Reset();
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                Thread.Sleep(5);
                done.Set();
            }, null);
            Waits.For(done, "the item");
            return Waits.Poll(() => RarePathWarmUp.PreparedCount == listed, TimeSpan.FromMilliseconds(500));
        }, Waits.MustHappen);
        Assert.True(prepared, $"Not all {listed} rare paths compiled ahead (so far {RarePathWarmUp.PreparedCount}).");
        // Nothing is left: every later call says so at once, and compiles nothing more.
        Assert.False(RarePathWarmUp.PrepareNext());
        Assert.Equal(listed, RarePathWarmUp.PreparedCount);
    }
}
