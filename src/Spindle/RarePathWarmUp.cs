using System.Collections.Generic;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Scheduling;
using Spindle.Tasks;
using Spindle.Threading;
using Spindle.Timers;

namespace Spindle;

/// <summary>
/// Compiles the pool's rare paths (<see cref="RarePath"/>) ahead of their first call, one method per call of
/// <see cref="PrepareNext"/>: the stall monitor calls it while its pool is quiet, so the first stall, the first burst of
/// thread starts and the first retirements no longer wait for their own compilation. Process-wide and once: compiled
/// code is shared by every pool.
/// </summary>
/// <remarks>
/// Measured on 2 cores, 200 items of a 100 ms sleep queued after a warm-up that started no thread and a quiet pause:
/// 16-22 ms of compilation during the burst without, 5.0-5.7 ms with (the rest is the runtime's own thread-start
/// code), complete 126.5-131.0 ms with, against 122-127 ms for a thread per item started by the producer.
/// </remarks>
internal static class RarePathWarmUp
{
    private static readonly Lock s_lock = new();
    private static Queue<PreparedMethod>? s_pending; // listed at the first call; null before
    private static int s_prepared;

    /// <summary>How many listed methods have been handed to the runtime to compile ahead so far (in this process).</summary>
    public static int PreparedCount => Volatile.Read(ref s_prepared);

    /// <summary>
    /// Compiles the next rare path not yet compiled ahead. Returns false when none is left (or code is not compiled
    /// at run time here), after which every call returns false at once.
    /// </summary>
    public static bool PrepareNext()
    {
        PreparedMethod next;
        lock (s_lock)
        {
            s_pending ??= new Queue<PreparedMethod>(ListRarePaths());
            if (!s_pending.TryDequeue(out next))
            {
                return false;
            }
        }
        RarePath.Prepare(next);
        Interlocked.Increment(ref s_prepared);
        return true;
    }

    /// <summary>
    /// The marked methods of every type that has any, each layer's: the façade is the one place that sees them all.
    /// (An architecture test keeps this list whole.)
    /// </summary>
    internal static List<PreparedMethod> ListRarePaths()
    {
        var methods = new List<PreparedMethod>();
        // The stall monitor's judgement and injection first: the first stall needs them before anything else.
        RarePath.AddMarked(typeof(StallMonitor), methods);
        RarePath.AddMarked(typeof(ThreadController), methods);
        RarePath.AddMarked(typeof(ThreadStarts), methods);
        RarePath.AddMarked(typeof(PoolThread), methods);
        RarePath.AddMarked(typeof(Worker), methods);
        RarePath.AddMarked(typeof(WorkerRoster), methods);
        RarePath.AddMarked(typeof(IdleCoordinator), methods);
        RarePath.AddMarked(typeof(ItemRunner), methods);
        RarePath.AddMarked(typeof(LookPacer), methods);
        RarePath.AddMarked(typeof(TimerPacer), methods);
        RarePath.AddMarked(typeof(KernelThreadState), methods);
        RarePath.AddMarked(typeof(DefaultContext), methods);
        RarePath.AddMarked(typeof(TimerService), methods);
        ThreadBlocker.AddRarePaths(methods);
        RarePath.AddMarked(typeof(WorkSources), methods);
        RarePath.AddMarked(typeof(PeerWatch), methods);
        RarePath.AddMarked(typeof(WorkerLocalQueue), methods);
        RarePath.AddMarked(typeof(IdleStack<Worker>), methods);
        RarePath.AddMarked(typeof(TimingWheel), methods);
        // Marked for the same reason though not named so: the readings of other processes' load (a search's yields
        // beside busy processes) and the task bridge's queueing paths.
        RarePath.AddMarked(typeof(OtherProcessesLoad), methods);
        RarePath.AddMarked(typeof(ProcFiles), methods);
        RarePath.AddMarked(typeof(SchedulingGroup), methods);
        RarePath.AddMarked(typeof(TaskBridge), methods);
        return methods;
    }
}
