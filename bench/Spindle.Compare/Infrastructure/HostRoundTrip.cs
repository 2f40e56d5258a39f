using System;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// How long the machine takes to pass a cache line from one of the process's CPUs to another and back, measured right
/// after a child's measured part (Linux, two CPUs or more): two threads, each pinned to its own CPU, hand a counter
/// back and forth through one cache line; the figure is the shortest mean round trip of <see cref="Bursts"/> bursts of
/// <see cref="RoundTripsPerBurst"/> (the shortest, so that a burst the kernel interrupted does not count).
/// </summary>
/// <remarks>
/// <para>Why: on a virtual machine this figure is the host's to decide and changes while the guest runs. On the 2-vCPU
/// development VM it read about 50-200 ns most of the time and 400-750 ns for stretches of seconds (most likely the host
/// placing the two vCPUs on cores that share no cache), and every hand-off between two of the guest's threads on
/// different CPUs slows down with it: a child of <c>ping-pong channel</c> measured in such a stretch read 2,400-2,850 ns a hop against
/// 350-860 otherwise, for either pool. Recorded with each run, it tells that mode apart from the pool's own.</para>
/// <para>Cost: about 10,000 round trips and two short-lived threads, 1-5 ms, after the process figures have been taken,
/// so it is no part of them. Every wait is bounded (<see cref="Deadline"/>): a probe whose other thread does not get its
/// CPU in time, on a machine whose cores are all busy, gives no figure rather than a late one.</para>
/// </remarks>
internal static partial class HostRoundTrip
{
    /// <summary>Bursts per probe; the figure is the shortest.</summary>
    public const int Bursts = 5;

    /// <summary>Round trips per burst.</summary>
    public const int RoundTripsPerBurst = 2_000;

    /// <summary>The most a whole probe may take before it gives up.</summary>
    public static readonly TimeSpan Deadline = TimeSpan.FromMilliseconds(250);

    private const int SpinsBetweenClockReads = 1_024;

    /// <summary>
    /// The shortest mean round trip of a burst, in nanoseconds; null where it cannot be measured (not Linux, fewer than
    /// two CPUs allowed to the process, a refused affinity, or no burst completed before the deadline).
    /// </summary>
    public static double? Measure()
    {
        if (!OperatingSystem.IsLinux() || !TryFindCpus(out int first, out int second) || second < 0)
        {
            return null;
        }
        var probe = new Probe(Stopwatch.GetTimestamp() + (long)(Deadline.TotalSeconds * Stopwatch.Frequency));
        var answerer = new Thread(() => probe.Answer(second), 64 * 1024) { IsBackground = true, Name = "round trip B" };
        var asker = new Thread(() => probe.Ask(first), 64 * 1024) { IsBackground = true, Name = "round trip A" };
        answerer.Start();
        asker.Start();
        asker.Join();
        answerer.Join();
        return probe.Shortest;
    }

    /// <summary>
    /// The first two CPUs of the calling thread's affinity mask (the process's, in a child): false where it cannot be
    /// read; <paramref name="second"/> is -1 where the mask holds one CPU.
    /// </summary>
    internal static unsafe bool TryFindCpus(out int first, out int second)
    {
        first = -1;
        second = -1;
        const int words = 16; // 1,024 CPUs
        ulong* mask = stackalloc ulong[words];
        if (GetAffinity(0, words * sizeof(ulong), mask) != 0)
        {
            return false;
        }
        for (int cpu = 0; cpu < words * 64; cpu++)
        {
            if ((mask[cpu / 64] & (1UL << (cpu % 64))) == 0)
            {
                continue;
            }
            if (first < 0)
            {
                first = cpu;
            }
            else
            {
                second = cpu;
                return true;
            }
        }
        return first >= 0;
    }

    /// <summary>Pins the calling thread to <paramref name="cpu"/>; false where the kernel refuses.</summary>
    internal static unsafe bool PinCallingThread(int cpu)
    {
        const int words = 16;
        ulong* mask = stackalloc ulong[words];
        new Span<ulong>(mask, words).Clear();
        mask[cpu / 64] = 1UL << (cpu % 64);
        return SetAffinity(0, words * sizeof(ulong), mask) == 0;
    }

    [LibraryImport("libc", EntryPoint = "sched_getaffinity", SetLastError = true)]
    private static unsafe partial int GetAffinity(int pid, nint size, ulong* mask);

    [LibraryImport("libc", EntryPoint = "sched_setaffinity", SetLastError = true)]
    private static unsafe partial int SetAffinity(int pid, nint size, ulong* mask);

    /// <summary>
    /// One probe's shared state. Protocol: the asker writes the odd value 2k+1 and waits for 2k+2, which the answerer
    /// writes once it has seen 2k+1, so each value is written by one thread and read by the other. Either thread that
    /// fails (its pin refused, the deadline passed) sets <see cref="_abandoned"/>, and the other stops at its next look.
    /// </summary>
    private sealed class Probe(long deadline)
    {
        // The counter alone in its cache line: 64 bytes of padding on each side of the middle element.
        private readonly long[] _line = new long[33];
        private const int Slot = 16;
        private volatile bool _abandoned;

        public double? Shortest { get; private set; }

        public void Answer(int cpu)
        {
            if (!PinCallingThread(cpu))
            {
                _abandoned = true;
                return;
            }
            for (long k = 0; k < (long)Bursts * RoundTripsPerBurst; k++)
            {
                if (!WaitFor(2 * k + 1))
                {
                    return;
                }
                Volatile.Write(ref _line[Slot], 2 * k + 2);
            }
        }

        public void Ask(int cpu)
        {
            if (!PinCallingThread(cpu))
            {
                _abandoned = true;
                return;
            }
            double shortest = double.MaxValue;
            long k = 0;
            for (int burst = 0; burst < Bursts; burst++)
            {
                long start = Stopwatch.GetTimestamp();
                for (int i = 0; i < RoundTripsPerBurst; i++, k++)
                {
                    Volatile.Write(ref _line[Slot], 2 * k + 1);
                    if (!WaitFor(2 * k + 2))
                    {
                        return;
                    }
                }
                double nanoseconds = Stopwatch.GetElapsedTime(start).TotalNanoseconds / RoundTripsPerBurst;
                shortest = Math.Min(shortest, nanoseconds);
            }
            Shortest = shortest;
        }

        /// <summary>Spins until the counter reads <paramref name="value"/>; false once the probe is abandoned or late.</summary>
        private bool WaitFor(long value)
        {
            int spins = 0;
            while (Volatile.Read(ref _line[Slot]) != value)
            {
                if (++spins == SpinsBetweenClockReads)
                {
                    spins = 0;
                    if (_abandoned || Stopwatch.GetTimestamp() > deadline)
                    {
                        _abandoned = true;
                        return false;
                    }
                }
            }
            return true;
        }
    }
}
