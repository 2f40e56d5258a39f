using System;
using System.Collections.Generic;
using System.Linq;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// The folders of <c>src/Spindle</c> form layers: code uses types of its own folder and of folders below it, never of a
/// folder above. So the folder graph has no cycle, and a reader can learn the library bottom-up.
/// </summary>
public sealed class LayeringTests
{
    /// <summary>The folders, bottom layer first; "." is the root: the façade (<c>WorkerPool</c>,
    /// <c>WorkTarget</c>) and the public handles it gives out (a lane, the task scheduler, the synchronization context, the
    /// pipe scheduler), which name the pool and are named by it.</summary>
    internal static readonly string[] Layers =
    [
        "Primitives",    // padding, pacing, thread limits, system calls, the default context, the blocking-region handle
        "Parking",       // blockers, the idle stack, backoff
        "Contracts",     // public options, enums and the work-item interface
        "Queues",        // entries, the global queue, rings, and the contracts of queued entries
        "Lanes",         // lanes: queues with priorities, shares, caps and their turn protocol; the scheduler as ILaneHost
        "Telemetry",     // metrics and events; the pool as IPoolReadings
        "Scheduling",    // workers, the scheduler, the idle coordinator, running an item; threads and timers through interfaces
        "Threading",     // the thread controller, stall monitor, relief thread, dedicated threads
        "Timers",
        "Registrations",
        "Tasks",
        "Polling",       // the I/O driver and the pool's socket registry: sockets known through IPolledSocket
        ".",
        "IO",            // the public sockets: they take a WorkerPool and run their completions on it
    ];

    [Fact]
    public void EveryTypeLivesInOneLayeredFolder()
    {
        var unplaced = LibraryModel.Spindle.Folders
            .Where(pair => Array.IndexOf(Layers, pair.Value) < 0)
            .Select(pair => $"{pair.Key.FullName} in '{pair.Value}'")
            .OrderBy(s => s, StringComparer.Ordinal)
            .ToList();
        Assert.True(unplaced.Count == 0,
            "Types outside the layered folders (a new folder needs a place in LayeringTests.Layers; a type written in two " +
            "folders shows as 'A+B'):\n" + string.Join("\n", unplaced));
    }

    [Fact]
    public void NoTypeUsesATypeOfAHigherFolder()
    {
        var added = UpwardUses().ToList();
        Assert.True(added.Count == 0,
            "Uses of a type in a higher folder (give the lower type what it needs through its own layer instead):\n"
            + string.Join("\n", added.Select(u => $"{u} ({u.UserFolder} uses {u.UsedFolder})")));
    }

    [Fact]
    public void TheFolderGraphHasNoCycle()
    {
        // Independent of the layer order: the folder graph must be acyclic (a cycle would show that two folders need
        // each other, whatever order the layers were given).
        var edges = LibraryModel.Spindle.Uses
            .Where(u => u.UserFolder != u.UsedFolder)
            .GroupBy(u => u.UserFolder)
            .ToDictionary(g => g.Key, g => g.Select(u => u.UsedFolder).Distinct().ToList());
        var state = new Dictionary<string, int>();
        var path = new List<string>();
        string? cycle = null;
        bool Visit(string folder)
        {
            state[folder] = 1;
            path.Add(folder);
            foreach (string next in edges.GetValueOrDefault(folder) ?? [])
            {
                if (state.GetValueOrDefault(next) == 1)
                {
                    cycle = string.Join(" -> ", path.SkipWhile(f => f != next).Append(next));
                    return true;
                }
                if (state.GetValueOrDefault(next) == 0 && Visit(next))
                {
                    return true;
                }
            }
            path.RemoveAt(path.Count - 1);
            state[folder] = 2;
            return false;
        }
        foreach (string folder in edges.Keys.OrderBy(f => f, StringComparer.Ordinal))
        {
            if (state.GetValueOrDefault(folder) == 0 && Visit(folder))
            {
                break;
            }
        }
        Assert.True(cycle is null, $"Folder cycle: {cycle}");
    }

    internal static IEnumerable<TypeUse> UpwardUses() =>
        LibraryModel.Spindle.Uses.Where(u => Array.IndexOf(Layers, u.UserFolder) < Array.IndexOf(Layers, u.UsedFolder));
}
