using System;
using System.Collections.Generic;

namespace Spindle.Compare.Scenarios;

internal static class ScenarioCatalog
{
    /// <summary>Every scenario, in the order they run and are reported.</summary>
    public static IReadOnlyList<IScenario> All { get; } =
    [
        new QueueDrainScenario(),
        new ChainThroughputScenario(),
        new ColdStartScenario(),
        new PingPongScenario(),
        new IdleCpuScenario(),
        new WakeLatencyScenario(),
        new EfficiencyScenario(),
        new LongRunningScenario(),
        new BlockingBurstScenario(),
        new TaskRunScenario(),
        new BurstRemoteScenario(),
        new FairnessScenario(),
        new AsyncYieldScenario(),
        new SkynetScenario(),
        new ForkJoinScenario(),
        new AsyncServerScenario(),
        new MailboxScenario(),
        new ActorsScenario(),
        new SocketEchoScenario(),
        new IsolationScenario(),
        new HttpScenario(),
        new RegisteredWaitsScenario(),
        new TimersScenario(),
        new PriorityScenario(),
        new SharesScenario(),
        new SerialLaneScenario(),
        new StuckItemScenario(),
    ];

    public static IScenario? Find(string id)
    {
        foreach (IScenario scenario in All)
        {
            if (string.Equals(scenario.Id, id, StringComparison.OrdinalIgnoreCase))
            {
                return scenario;
            }
        }
        return null;
    }
}
