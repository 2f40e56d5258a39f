using Spindle.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The stall monitor's reading of the process's CPU time over a stall: busy cores get a slow ramp (threads would only
/// compete with the work), idle cores a thread per waiting item (the workers are blocked), unless the runtime itself
/// (JIT compilation, GC pauses) took half the stall, when the workers wait for it rather than being blocked.
/// </summary>
public sealed class StallJudgementTests
{
    [Theory]
    [InlineData(2.29, 1.64, 2, true)]   // two workers JIT-compiling a cold pool's first items: 1.4 cores of 2 is busy
    [InlineData(1.0, 1.0, 2, true)]     // one whole core busy of two
    [InlineData(0.9, 1.0, 2, false)]    // more than a core unused: the workers are blocked
    [InlineData(0.05, 2.0, 2, false)]   // sleeping workers
    [InlineData(15.2, 1.0, 16, true)]
    [InlineData(13.0, 1.0, 16, false)]  // three cores unused
    [InlineData(0.6, 1.0, 1, true)]     // one core: more than half of it used
    [InlineData(0.1, 1.0, 1, false)]
    [InlineData(1.0, 0.0, 2, false)]    // no window yet: never judged busy
    public void CoresCountAsBusy_UnlessAWholeCoreIsUnused(double cpuMs, double windowMs, int cores, bool saturated)
    {
        Assert.Equal(saturated, StallMonitor.IsSaturated(cpuMs, windowMs, cores));
    }

    [Theory]
    [InlineData(4.4, 4.6, true)]    // one worker compiling for the whole stall while the other waits for the JIT's lock
    [InlineData(2.3, 4.6, true)]    // half the window
    [InlineData(9.0, 4.6, true)]    // two threads compiling at once: their times add up
    [InlineData(2.2, 4.6, false)]   // less than half: the stall is the workers' own
    [InlineData(0.0, 50.0, false)]  // sleeping workers, nothing compiled
    [InlineData(1.0, 0.0, false)]   // no window yet
    public void TheRuntimesOwnTime_CountsAsBusy_WhenItTookHalfTheStall(double runtimeMs, double windowMs, bool busy)
    {
        Assert.Equal(busy, StallMonitor.RuntimeBusy(runtimeMs, windowMs));
    }

    [Theory]
    [InlineData(false, false, 1.0, StallMonitor.SaturatedStallMs)]    // short items: the fixed allowance
    [InlineData(false, false, 50.0, 200.0)]                          // long CPU-bound items: four gaps
    [InlineData(true, false, 50.0, 50.0)]                            // the ramp's next step: one gap
    [InlineData(true, false, 1.0, StallMonitor.SaturatedRampStepMs)]
    [InlineData(false, true, 1.0, StallMonitor.StrandedAfterMs)]     // a lone item behind its owner
    [InlineData(false, true, 500.0, StallMonitor.StrandedAfterMs)]   // ... whatever the gap its earlier stalls left
    [InlineData(true, true, 50.0, 50.0)]                             // after the first thread: the ramp as for any stall
    public void TheSaturatedAllowance_GrowsWithTheGapBetweenCompletions_ExceptForALoneItemStrandedBehindItsOwner(
        bool injected, bool strandedLone, double completionGapMs, double allowanceMs)
    {
        Assert.Equal(allowanceMs, StallMonitor.SaturatedAllowanceMs(injected, strandedLone, completionGapMs));
    }

    [Theory]
    [InlineData(false, false, false, false, false, true)] // the queues are empty: the boost goes whatever else holds
    [InlineData(false, false, false, true, false, true)]
    [InlineData(true, true, true, false, false, true)]    // a ramp's threads, items completing on busy cores: they go
    [InlineData(true, true, true, true, false, false)]    // a thread per item for blocked workers, their items long
    [InlineData(true, true, true, true, true, true)]      // ... their items short (a gated backlog draining)
    [InlineData(true, false, true, false, true, false)]   // nothing completed: the stall may go on
    [InlineData(true, true, false, false, true, false)]   // cores idle: the threads may be needed
    public void TheBoostDecays_WhenTheQueuesAreEmpty_OrWhenItemsCompleteOnBusyCores_UnlessBlockedWorkersItemsAreLong(
        bool pending, bool progress, bool saturated, bool forBlockedWorkers, bool threadsTurnOver, bool unneeded)
    {
        Assert.Equal(unneeded, StallMonitor.BoostUnneeded(pending, progress, saturated, forBlockedWorkers, threadsTurnOver));
    }
}
