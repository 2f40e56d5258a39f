using System;
using Spindle.Tests.Parking;
using Spindle.Tests.Queues;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Stress forms of the exactly-once, wake-up, work-stealing, queue, blocker and shutdown-race tests. The per-commit run
/// uses small counts (a smoke run of each); with <c>SPINDLE_STRESS=1</c> the counts grow by two or three orders of
/// magnitude.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)] // its stress form keeps every core busy for minutes
public sealed class StressTests
{
    public static TheoryData<string> Flavors() => ["default", "monitor"];

    /// <summary>A contract-test instance of the flavour; disposing it fails the test if any work item threw.</summary>
    private static WorkerPoolContractTests Pool(string flavor) =>
        flavor == "monitor" ? new MonitorBlockerPoolTests() : new DefaultBlockerPoolTests();

    // Every item runs exactly once: up to millions of items from several producers.
    [Theory]
    [MemberData(nameof(Flavors))]
    public void ExactlyOnce_ManyItemsFromManyProducers(string flavor)
    {
        using WorkerPoolContractTests pool = Pool(flavor);
        pool.RunExactlyOnceFromProducers(producers: Stress.Scale(2, 8), itemsPerProducer: Stress.Scale(5_000, 500_000));
    }

    // Every link of long self-requeue chains runs exactly once.
    [Theory]
    [MemberData(nameof(Flavors))]
    public void SelfRequeueChains_Long(string flavor)
    {
        using WorkerPoolContractTests pool = Pool(flavor);
        pool.RunSelfRequeueChains(chains: Environment.ProcessorCount * Stress.Scale(1, 4), totalLinks: Stress.Scale(20_000, 2_000_000));
    }

    // A deep, wide fan-out drains completely.
    [Theory]
    [MemberData(nameof(Flavors))]
    public void FanOut_Large(string flavor)
    {
        using WorkerPoolContractTests pool = Pool(flavor);
        pool.RunFanOut(roots: Stress.Scale(2, 32), fanOut: 4, depth: Stress.Scale(5, 8));
    }

    // No lost wake-up: many more enqueues racing a parking worker.
    [Theory]
    [MemberData(nameof(Flavors))]
    public void LostWakeUp_ManyIterations(string flavor)
    {
        int iterations = Stress.Scale(500, 100_000);
        using WorkerPoolContractTests pool = Pool(flavor);
        pool.RunLostWakeUp(threads: 1, iterations);
        pool.RunLostWakeUp(threads: 0, iterations);
    }

    // The owner's pop racing a thief on the last item: the item is taken exactly once.
    [Fact]
    public void Ring_LastItemRace_ManyRounds()
    {
        WorkStealingRingTests.RunLastItemRace(Stress.Scale(10_000, 2_000_000), stealHalf: false);
        WorkStealingRingTests.RunLastItemRace(Stress.Scale(5_000, 500_000), stealHalf: true);
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void Ring_OwnerAgainstThieves_ManyItems(int thieves) =>
        WorkStealingRingTests.RunOwnerAgainstThieves(capacity: 4, items: Stress.Scale(50_000, 10_000_000), thieves);

    [Fact]
    public void GlobalQueue_ManyProducersAndConsumers() =>
        GlobalQueueTests.RunProducersAndConsumers(producers: 4, consumers: 4, itemsPerProducer: Stress.Scale(20_000, 2_000_000));

    [Fact]
    public void GlobalQueue_CloseRacingProducers_ManyRounds() =>
        GlobalQueueTests.RunCloseRacingProducers(rounds: Stress.Scale(5, 500), producers: 4);

    [Fact]
    public void Blockers_PingPong_ManyIterations()
    {
        int iterations = Stress.Scale(5_000, 200_000); // ~50 µs per round trip through the kernel on a small VM
        if (OperatingSystem.IsLinux())
        {
            new FutexBlockerTests().RunPingPong(iterations);
            new FutexBlockerTests().RunTimedWaitRace(Stress.Scale(500, 50_000));
        }
        new MonitorBlockerTests().RunPingPong(iterations);
        new MonitorBlockerTests().RunTimedWaitRace(Stress.Scale(500, 50_000));
    }

    // Each enqueue racing dispose either runs once or is rejected, over many more rounds.
    [Theory]
    [MemberData(nameof(Flavors))]
    public void EnqueueRacingDispose_ManyRounds(string flavor)
    {
        using WorkerPoolContractTests pool = Pool(flavor);
        pool.RunEnqueueRacingDispose(rounds: Stress.Scale(2, 200), producers: 3, requeuers: 4);
    }

    [Theory]
    [MemberData(nameof(Flavors))]
    public void DisposeRacingFirstEnqueues_ManyRounds(string flavor)
    {
        using WorkerPoolContractTests pool = Pool(flavor);
        pool.RunDisposeRacingFirstEnqueues(rounds: Stress.Scale(100, 10_000));
    }
}
