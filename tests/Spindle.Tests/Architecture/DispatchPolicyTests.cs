using System;
using System.Collections.Generic;
using System.Linq;
using Mono.Cecil;
using Mono.Cecil.Cil;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// The dispatch policy is written once: every take from the pool's shared work sources (fired timers, the lanes, a
/// lane's turn, the global queue, a worker's ring as owner or thief) is made by <c>WorkSources</c>, the type that lists
/// the sources and the orders over them. A source's own type may take from its own storage (a lane from its queue, a
/// worker's local queue from its ring when it overflows or ages), and the peer watch steals through the worker's order.
/// Any other caller is a second dispatch policy growing beside the first.
/// </summary>
public sealed class DispatchPolicyTests
{
    private const string Sources = "Spindle.Scheduling.WorkSources";

    /// <summary>The take methods of the sources, and the types besides <c>WorkSources</c> that may call each.</summary>
    private static readonly (string Type, string Method, string[] AlsoAllowed)[] s_takes =
    [
        ("Spindle.Scheduling.UrgentQueue", "TryTake", []),
        ("Spindle.Lanes.LaneSet", "TryTakeByPriority", []),
        ("Spindle.Lanes.LaneSet", "TryTakeForSearcher", []),
        ("Spindle.Lanes.LaneSet", "TryTakeForRelief", []),
        ("Spindle.Lanes.LaneSet", "TryTakeLeftover", []),
        ("Spindle.Lanes.Lane", "TryTakeNextInTurn", ["Spindle.Lanes.Lane"]),
        ("Spindle.Queues.GlobalQueue", "TryDequeueBatch", ["Spindle.Lanes.Lane"]),
        ("Spindle.Queues.WorkStealingRing", "TryPop", []),
        ("Spindle.Queues.WorkStealingRing", "TrySteal", ["Spindle.Scheduling.WorkerLocalQueue"]),
        ("Spindle.Queues.WorkStealingRing", "StealHalfInto", ["Spindle.Scheduling.PeerWatch"]),
    ];

    [Fact]
    public void OnlyTheWorkSourcesTakeFromTheSharedSources()
    {
        var strays = new List<string>();
        foreach ((MethodDefinition caller, MethodReference callee) in Calls())
        {
            string callerType = Outermost(caller.DeclaringType).FullName;
            foreach ((string type, string method, string[] alsoAllowed) in s_takes)
            {
                if (callee.Name == method && callee.DeclaringType.Resolve()?.FullName == type
                    && callerType != Sources && callerType != type && !alsoAllowed.Contains(callerType))
                {
                    strays.Add($"{callerType}.{caller.Name} calls {type}.{method}");
                }
            }
        }
        Assert.True(strays.Count == 0,
            "Takes from the pool's work sources outside WorkSources (write the order there, as one of its orders):\n"
            + string.Join("\n", strays.Distinct().OrderBy(s => s, StringComparer.Ordinal)));
    }

    [Fact]
    public void TheModelSeesTheOrdersTakes()
    {
        // The rule above would pass vacuously on a model that saw no call: every take it guards must be called from
        // WorkSources or from the source's own type.
        var seen = Calls().Select(c => (c.Callee.DeclaringType.Resolve()?.FullName, c.Callee.Name)).ToHashSet();
        foreach ((string type, string method, _) in s_takes)
        {
            Assert.Contains((type, method), seen);
        }
        Assert.Contains(Calls(), c => Outermost(c.Caller.DeclaringType).FullName == Sources && c.Callee.Name == "TryTakeByPriority");
    }

    private static IEnumerable<(MethodDefinition Caller, MethodReference Callee)> Calls() =>
        LibraryModel.Spindle.Module.GetTypes()
            .SelectMany(t => t.Methods)
            .Where(m => m.HasBody)
            .SelectMany(m => m.Body.Instructions
                .Where(i => i.OpCode == OpCodes.Call || i.OpCode == OpCodes.Callvirt)
                .Select(i => (m, (MethodReference)i.Operand)));

    private static TypeDefinition Outermost(TypeDefinition type)
    {
        while (type.DeclaringType is not null)
        {
            type = type.DeclaringType;
        }
        return type;
    }
}
