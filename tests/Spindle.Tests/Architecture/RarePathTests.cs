using System.Collections.Generic;
using System.Linq;
using Mono.Cecil;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// The pool's rare paths (a worker's look outside, the end of a peer watch, a timer assist, the timer thread's pass, the
/// stall monitor's tick and arming, a timed park) are compiled once, fully optimised, at their first call
/// (<c>RarePath.Compile</c>). Tiered compilation would otherwise recompile each of them at its thirtieth call, an
/// arbitrary moment under load, with the background compiler holding a core while the pool's items wait for it.
/// </summary>
public sealed class RarePathTests
{
    /// <summary>The entry points of the rare paths (<c>Name/N</c>: its overload of N parameters): each must be compiled fully optimised at its first call.</summary>
    private static readonly (string Type, string Method)[] s_rarePaths =
    [
        ("Spindle.Scheduling.WorkSources", "TakeForLook"),
        ("Spindle.Scheduling.WorkSources", "EndPeerWatch"),
        ("Spindle.Scheduling.PeerWatch", "TryEnd"),
        ("Spindle.Scheduling.Worker", "TryBeginLook"),
        ("Spindle.Scheduling.Worker", "CheckTimers"),
        ("Spindle.Scheduling.LookPacer", "Look"),
        ("Spindle.Scheduling.WorkerLocalQueue", "LimitGlobalTakes"),
        ("Spindle.Scheduling.WorkerLocalQueue", "TakeAgedBottom"),
        ("Spindle.Scheduling.TimerPacer", "AfterCheck"),
        ("Spindle.Timers.TimerService", "AssistTimers"),
        ("Spindle.Timers.TimingWheel", "Advance"),
        ("Spindle.Timers.TimingWheel", "TryFindNextSlot"),
        ("Spindle.Threading.StallMonitor", "MonitorMain"),
        ("Spindle.Threading.StallMonitor", "ArmMonitor"),
        ("Spindle.Threading.StallMonitor", "IsQuiet"),
        ("Spindle.Threading.StallMonitor", "AnyDeferral"),
        ("Spindle.Threading.StallMonitor", "Tick"),
        ("Spindle.Threading.StallMonitor", "CheckDeferrals"),
        ("Spindle.Threading.StallMonitor", "MarkStrandedWorkers"),
        ("Spindle.Threading.StallMonitor", "ForgetExitedWorkers"),
        ("Spindle.Threading.StallMonitor", "DecayBoost"),
        ("Spindle.Threading.ThreadController", "RetryCreationIfDue"),
        ("Spindle.Threading.ThreadController", "SumOverWorkers"),
        ("Spindle.Threading.ThreadController", "get_WorkerProgressCount"),
        ("Spindle.Parking.IdleStack`1", "TryRemove"),
        ("Spindle.Parking.ThreadBlocker/AddressBlocker", "WaitUntil"),
        ("Spindle.Parking.ThreadBlocker/FutexBlocker", "SleepWhileSleepingTicks"),
        // A thread's life: its start, its first steps, its retirement and exit, and the monitor's judgement of a stall
        // that adds threads. A burst of blocked work starts a thread per item; each of these runs once per thread, so
        // the whole path would reach its thirtieth call, and be recompiled, in the middle of that burst.
        ("Spindle.Threading.ThreadController", "TryAddWorker/3"),
        ("Spindle.Threading.ThreadController", "ContinueRamp"),
        ("Spindle.Threading.ThreadController", "TryRetire"),
        ("Spindle.Threading.ThreadController", "OnWorkerExited"),
        ("Spindle.Threading.ThreadController", "LookAgainAfterLeaving"),
        ("Spindle.Threading.ThreadController", "RemoveWorkerLocked"),
        ("Spindle.Threading.ThreadController", "DropFromListLocked"),
        ("Spindle.Threading.ThreadController", "TryStopLocked"),
        ("Spindle.Threading.ThreadController", "RaiseStarvationBoost"),
        ("Spindle.Threading.ThreadController", "HoldStarvationBoost"),
        ("Spindle.Threading.ThreadController", "HalveStarvationBoost"),
        ("Spindle.Threading.ThreadStarts", "Start"),
        ("Spindle.Threading.PoolThread", "Create"),
        ("Spindle.Scheduling.Worker", ".ctor"),
        ("Spindle.Scheduling.Worker", "Main"),
        ("Spindle.Scheduling.Worker", "Dispatch"),
        ("Spindle.Scheduling.WorkerRoster", "AddLocked"),
        ("Spindle.Scheduling.WorkerRoster", "RemoveLocked"),
        ("Spindle.Scheduling.IdleCoordinator", "CountNewWorkerAsSearcher"),
        ("Spindle.Scheduling.IdleCoordinator", "WakeParked"),
        ("Spindle.Scheduling.ItemRunner", "RunHook"),
        ("Spindle.Scheduling.LookPacer", "Create"),
        ("Spindle.Scheduling.TimerPacer", "Create"),
        ("Spindle.Parking.ThreadBlocker", "Create/1"),
        ("Spindle.Primitives.DefaultContext", "OnPoolThreadStarted"),
        ("Spindle.Primitives.KernelThreadState", "CurrentId"),
        ("Spindle.Primitives.KernelThreadState", "WritePath"),
        ("Spindle.Primitives.KernelThreadState", "Parse"),
        ("Spindle.Timers.TimerService", "OnWorkerAdded"),
        ("Spindle.Threading.StallMonitor", "InjectForStarvation"),
        ("Spindle.Threading.StallMonitor", "WorkersKeepCoresBusy"),
        ("Spindle.Threading.StallMonitor", "CountRunnableWorkers"),
        ("Spindle.Threading.StallMonitor", "AnyWorkerOutsideManagedWait"),
        ("Spindle.Threading.StallMonitor", "RequestLooksOutside"),
        ("Spindle.Threading.StallMonitor", "ForgetUnlistedWatches"),
        ("Spindle.Threading.StallMonitor", "IsSaturated"),
        ("Spindle.Threading.StallMonitor", "RuntimeTime"),
    ];

    [Fact]
    public void TheRarePathsAreCompiledFullyOptimisedAtTheirFirstCall()
    {
        var missing = new List<string>();
        foreach ((string typeName, string methodName) in s_rarePaths)
        {
            // "Name/N": the overload of N parameters.
            string[] nameAndArity = methodName.Split('/');
            MethodDefinition[] methods = FindType(typeName).Methods
                .Where(m => m.Name == nameAndArity[0] && (nameAndArity.Length == 1 || m.Parameters.Count == int.Parse(nameAndArity[1], System.Globalization.CultureInfo.InvariantCulture)))
                .ToArray();
            Assert.True(methods.Length == 1, $"{typeName}.{methodName}: expected one method of that name, found {methods.Length}.");
            if ((methods[0].ImplAttributes & MethodImplAttributes.AggressiveOptimization) == 0)
            {
                missing.Add($"{typeName}.{methodName}");
            }
        }
        Assert.True(missing.Count == 0, "Not compiled fully optimised at their first call: " + string.Join(", ", missing));
    }

    [Fact]
    public void EveryRarePathIsCompiledAheadWhileAPoolIsQuiet()
    {
        // Every method of the library that carries the mark, wherever it lives (nested and generic types included),
        // but for generic methods: their code depends on type arguments that only their callers know...
        var marked = new SortedSet<string>(System.StringComparer.Ordinal);
        foreach (TypeDefinition type in AllTypes(LibraryModel.Spindle.Module.Types))
        {
            foreach (MethodDefinition method in type.Methods)
            {
                if ((method.ImplAttributes & MethodImplAttributes.AggressiveOptimization) != 0 && !method.IsAbstract
                    && !method.HasGenericParameters)
                {
                    marked.Add($"{type.FullName.Replace('/', '+')}.{method.Name}/{method.Parameters.Count}");
                }
            }
        }
        // ...is in the list that the stall monitors compile ahead.
        var listed = new SortedSet<string>(System.StringComparer.Ordinal);
        foreach (Spindle.Primitives.PreparedMethod prepared in RarePathWarmUp.ListRarePaths())
        {
            System.Type declaring = prepared.Method.DeclaringType!;
            if (declaring.IsConstructedGenericType)
            {
                declaring = declaring.GetGenericTypeDefinition();
            }
            listed.Add($"{declaring.FullName}.{prepared.Method.Name}/{prepared.Method.GetParameters().Length}");
        }
        Assert.True(marked.Count > 0, "No marked method found in the library.");
        Assert.True(marked.SetEquals(listed),
            "Marked but not compiled ahead (add their type to RarePathWarmUp.ListRarePaths): " + string.Join(", ", marked.Except(listed))
            + "; listed but not marked: " + string.Join(", ", listed.Except(marked)));
    }

    private static IEnumerable<TypeDefinition> AllTypes(IEnumerable<TypeDefinition> types)
    {
        foreach (TypeDefinition type in types)
        {
            yield return type;
            foreach (TypeDefinition nested in AllTypes(type.NestedTypes))
            {
                yield return nested;
            }
        }
    }

    [Fact]
    public void TheMarkIsTheRuntimesAggressiveOptimisation()
    {
        // The library's constant is what the runtime reads: a rare path marked with anything else would still tier up.
        Assert.Equal(System.Runtime.CompilerServices.MethodImplOptions.AggressiveOptimization, Spindle.Primitives.RarePath.Compile);
    }

    private static TypeDefinition FindType(string fullName)
    {
        string[] parts = fullName.Split('/');
        TypeDefinition? type = LibraryModel.Spindle.Module.Types.SingleOrDefault(t => t.FullName == parts[0]);
        Assert.True(type is not null, $"No type {parts[0]} in the library.");
        foreach (string nested in parts.Skip(1))
        {
            type = type!.NestedTypes.SingleOrDefault(t => t.Name == nested);
            Assert.True(type is not null, $"No nested type {nested} in {fullName}.");
        }
        return type!;
    }
}
