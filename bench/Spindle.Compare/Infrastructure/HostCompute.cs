using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// How fast the process's CPUs compute, measured right after a child's measured part: on each of the process's first
/// two CPUs at once (on its only one where the process may use one), a thread pinned there runs a fixed number of
/// integer steps; the figure is the time per 1,000 steps of the slower CPU's quickest burst.
/// </summary>
/// <remarks>
/// <para>Why: on a virtual machine the host decides what else runs on the physical core under a vCPU, and it changes
/// while the guest runs. On the 2-vCPU development VM, <c>long-running</c>'s counting items (each a loop that only
/// counts) counted 1.2-2.0 billion steps per second of CPU time in the children of two whole runs of one afternoon and
/// 3.0-3.5 billion in those of two of the morning, for either pool, with the process holding both CPUs throughout; a C
/// program running the same test without any pool counted 3.6-5.5 billion in eight seconds in a row. Every CPU-bound run
/// slows with it, and the cache-line round trip (<see cref="HostRoundTrip"/>) does not show it. Recorded with each run,
/// it tells that mode apart from the pool's own.</para>
/// <para>A step advances four independent xorshift sequences (twelve shifts and exclusive ors that do not wait for one
/// another), so the figure is bound by how many instructions the core issues, which is what a hardware thread shares
/// with its sibling. Timed with a C probe on the development VM, such a loop took 2.5 ns a step in some seconds and
/// 2.9-4.3 ns in others, and a loop that only counts 0.35 against 0.6-0.76 ns, while a single dependent sequence read
/// 1.95-2.2 ns throughout (latency, which a busy sibling hardly slows). The loop is compiled fully optimised at its
/// first call, never at tier 0. Both CPUs run at once, so that a host that puts the two vCPUs on the two hardware
/// threads of one core shows it too. The quickest of <see cref="Bursts"/> bursts counts, so that a burst the kernel
/// interrupted does not.</para>
/// <para>Cost: about 2 ms of each CPU, after the process figures and the round trip have been taken, so it is no part of
/// them. A thread that cannot be pinned, or whose bursts do not finish before the <see cref="Deadline"/> (every core
/// busy with other work), gives no figure rather than a late one.</para>
/// </remarks>
internal static class HostCompute
{
    /// <summary>Bursts per CPU; each CPU's figure is its quickest.</summary>
    public const int Bursts = 5;

    /// <summary>Steps per burst (0.25-0.45 ms on the development VM).</summary>
    public const int StepsPerBurst = 100_000;

    /// <summary>The most a whole probe may take before it gives up.</summary>
    public static readonly TimeSpan Deadline = TimeSpan.FromMilliseconds(250);

    /// <summary>
    /// Nanoseconds per 1,000 steps on the slower of the process's first two CPUs (on its only one if it may use one);
    /// null where a CPU could not be measured (not Linux, a refused affinity, or the deadline passed).
    /// </summary>
    public static double? Measure()
    {
        if (!OperatingSystem.IsLinux() || !HostRoundTrip.TryFindCpus(out int first, out int second))
        {
            return null;
        }
        long deadline = Stopwatch.GetTimestamp() + (long)(Deadline.TotalSeconds * Stopwatch.Frequency);
        var results = new double?[second >= 0 ? 2 : 1];
        var threads = new Thread[results.Length];
        for (int i = 0; i < threads.Length; i++)
        {
            int slot = i;
            int cpu = i == 0 ? first : second;
            threads[i] = new Thread(() => results[slot] = MeasureOn(cpu, deadline), 64 * 1024)
            {
                IsBackground = true,
                Name = i == 0 ? "compute A" : "compute B",
            };
        }
        foreach (Thread thread in threads)
        {
            thread.Start();
        }
        foreach (Thread thread in threads)
        {
            thread.Join();
        }
        double slowest = 0;
        foreach (double? result in results)
        {
            if (result is not { } value)
            {
                return null;
            }
            slowest = Math.Max(slowest, value);
        }
        return slowest;
    }

    /// <summary>The quickest burst on <paramref name="cpu"/>, in nanoseconds per 1,000 steps; null if late or unpinned.</summary>
    private static double? MeasureOn(int cpu, long deadline)
    {
        if (!HostRoundTrip.PinCallingThread(cpu))
        {
            return null;
        }
        double quickest = double.MaxValue;
        uint state = (uint)cpu + 1;
        for (int burst = 0; burst < Bursts; burst++)
        {
            long start = Stopwatch.GetTimestamp();
            state = Steps(state, StepsPerBurst) | 1; // each burst starts where the last ended, so none can be skipped
            long end = Stopwatch.GetTimestamp();
            quickest = Math.Min(quickest, Stopwatch.GetElapsedTime(start, end).TotalNanoseconds * 1_000 / StepsPerBurst);
            if (end > deadline)
            {
                return null;
            }
        }
        return quickest;
    }

    /// <summary>
    /// <paramref name="count"/> steps of four independent xorshift sequences started from <paramref name="state"/> and
    /// three values derived from it; returns the four results folded into one. Compiled fully optimised at its first
    /// call, so that the figure never measures tier-0 code.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    internal static uint Steps(uint state, int count)
    {
        uint a = state;
        uint b = state ^ 0x9E3779B9;
        uint c = state ^ 0x85EBCA6B;
        uint d = state ^ 0xC2B2AE35;
        for (int i = 0; i < count; i++)
        {
            a = Next(a);
            b = Next(b);
            c = Next(c);
            d = Next(d);
        }
        return a ^ b ^ c ^ d;
    }

    /// <summary>One xorshift32 step (shifts 13, 17, 5).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static uint Next(uint x)
    {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    }
}
