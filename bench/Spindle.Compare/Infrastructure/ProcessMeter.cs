using System;
using System.Diagnostics;
using System.IO;
using System.Runtime;
using System.Threading;
using Microsoft.Win32.SafeHandles;
using Spindle.Compare.Scenarios;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// Process-wide figures of a child run's measured part, reported for every scenario and pool: wall time, process CPU
/// time, peak thread count, allocated bytes (per item when the scenario says how many items it ran), collections per
/// generation, the methods the JIT compiled meanwhile (tier-ups included: a figure well above zero means the
/// warm-up ended before the code being measured had reached its final tier), and the scheduling decisions that set a
/// fast run of a case apart from a slow one (<see cref="SchedulingCounts"/>: context switches, voluntary and not, and
/// Spindle's parks, steals and threads added; <see cref="ThreadSchedule"/>: the threads' time waiting for a core and
/// their moves between CPUs), and the share of the machine's CPU time the hypervisor gave to other
/// guests meanwhile (<see cref="HostSteal"/>: a slow run beside a steal of tens of percent was slowed by the host), and,
/// right after the measured part, how long the machine takes to pass a cache line between two CPUs and back
/// (<see cref="HostRoundTrip"/>: on a virtual machine the host may move the guest's CPUs apart for seconds at a time, and
/// every hand-off between threads slows with it), and how fast its CPUs compute (<see cref="HostCompute"/>: the host may
/// also give a vCPU half a core for a while, and every CPU-bound run slows with it).
/// </summary>
/// <remarks>
/// The measured part starts when the warm-up ends (<see cref="Warmup.Repeat(System.Action)"/> calls <see cref="MarkMeasuredStart"/>;
/// scenarios with a warm-up of their own call it themselves), or at the start of the child for a scenario that has
/// none, and ends when the scenario returns. A sampler thread reads the process's thread count every 10 ms meanwhile
/// (from <c>/proc/self/status</c> on Linux, <see cref="Process.Threads"/> elsewhere), except in the scenarios that it
/// would disturb (<see cref="ThreadSampling.Off"/>).
/// </remarks>
internal static class ProcessMeter
{
    /// <summary>The process metrics, in report order. Their names start with "process " so reports can set them apart.</summary>
    public static readonly MetricInfo[] Metrics =
    [
        new("process wall", "ms", Better.Lower),
        new("process cpu", "ms", Better.Lower),
        new("process peak threads", "threads", Better.Lower),
        new("process alloc", "B/item", Better.Lower, NoiseFloor: 0.5),
        new("process gen0", "collections", Better.Lower),
        new("process gen1", "collections", Better.Lower),
        new("process gen2", "collections", Better.Lower),
        new("process jit", "methods", Better.Lower),
        new("process switches", "switches", Better.Lower),
        new("process preemptions", "switches", Better.Lower),
        new("process runq wait", "ms", Better.Lower),
        new("process migrations", "migrations", Better.Lower),
        new("process parks", "parks", Better.Lower),
        new("process steals", "steals", Better.Lower),
        new("process threads added", "threads", Better.Lower),
        new("process host steal", "%", Better.Lower),
        new("process host round trip", "ns", Better.Lower),
        new("process host compute", "ns/1k steps", Better.Lower),
    ];

    public const string Prefix = "process ";

    /// <summary>The machine's cache-line round trip between two CPUs, measured right after the measured part.</summary>
    public static MetricInfo HostRoundTripMetric => Metrics[16];

    /// <summary>The time per 1,000 steps of the compute probe on the slower of two CPUs, measured after the round trip.</summary>
    public static MetricInfo HostComputeMetric => Metrics[17];

    private static long s_startTimestamp;
    private static long s_startCpu;
    private static GcSnapshot s_startGc;
    private static long s_startJit;
    private static SchedulingCounts.Snapshot s_startCounts;
    private static ThreadSchedule.Snapshot? s_startSchedule;
    private static HostSteal? s_startSteal;
    private static readonly HostSteal.Reader s_steal = new();
    private static int s_peakThreads;
    private static volatile bool s_sampling;
    private static Thread? s_sampler;

    /// <summary>Set by the child before the scenario runs: false keeps the sampler thread from starting.</summary>
    public static bool SamplingAllowed { get; set; } = true;

    /// <summary>Starts (or restarts) the measured part now.</summary>
    public static void MarkMeasuredStart()
    {
        // The sampler starts before the snapshots: Thread.Start waits (yielding) until the new thread runs, which on
        // busy cores can take a while, and that wait is no part of what is measured.
        if (s_sampler is null && SamplingAllowed)
        {
            s_sampling = true;
            s_sampler = new Thread(Sample, 64 * 1024) { IsBackground = true, Name = "process meter" };
            s_sampler.Start();
        }
        // The thread count is read before the snapshots, so that its first read's buffer is not counted as the workload's.
        Volatile.Write(ref s_peakThreads, ReadThreadCount());
        // The machine's counters and the scheduling counts likewise: the first read of the machine's opens the file and
        // allocates the reader's buffer, and every reading of the pool's meter allocates (the thread counts come as one
        // tagged measurement per reason).
        s_startSteal = s_steal.Take();
        s_startCounts = SchedulingCounts.Take();
        s_startSchedule = ThreadSchedule.Take();
        s_startGc = GcSnapshot.Take();
        s_startJit = JitInfo.GetCompiledMethodCount();
        s_startCpu = CpuClock.ProcessNanoseconds();
        s_startTimestamp = Stopwatch.GetTimestamp();
    }

    /// <summary>Ends the measured part and adds the process metrics to <paramref name="measurement"/>.</summary>
    public static void Finish(Measurement measurement)
    {
        long end = Stopwatch.GetTimestamp();
        long cpu = CpuClock.ProcessNanoseconds();
        long jit = JitInfo.GetCompiledMethodCount() - s_startJit;
        GcSnapshot gc = GcSnapshot.Take() - s_startGc;
        SchedulingCounts.Snapshot counts = SchedulingCounts.Take() - s_startCounts;
        (double? runQueueWait, long? migrations) = ThreadSchedule.Between(s_startSchedule, ThreadSchedule.Take());
        double? steal = HostSteal.Share(s_startSteal, s_steal.Take());
        s_sampling = false;
        int peak = Math.Max(Volatile.Read(ref s_peakThreads), ReadThreadCount());
        measurement
            .Set(Metrics[0].Name, Stopwatch.GetElapsedTime(s_startTimestamp, end).TotalMilliseconds)
            .Set(Metrics[1].Name, (cpu - s_startCpu) / 1e6)
            .Set(Metrics[2].Name, peak)
            .Set(Metrics[3].Name, measurement.Items is > 0 and var items ? (double)gc.AllocatedBytes / items : gc.AllocatedBytes)
            .Set(Metrics[4].Name, gc.Gen0)
            .Set(Metrics[5].Name, gc.Gen1)
            .Set(Metrics[6].Name, gc.Gen2)
            .Set(Metrics[7].Name, jit);
        SetCount(measurement, Metrics[8].Name, counts.VoluntarySwitches);
        SetCount(measurement, Metrics[9].Name, counts.InvoluntarySwitches);
        if (runQueueWait is { } waited)
        {
            measurement.Set(Metrics[10].Name, waited);
        }
        else
        {
            measurement.SetUnavailable(Metrics[10].Name);
        }
        SetCount(measurement, Metrics[11].Name, migrations);
        SetCount(measurement, Metrics[12].Name, counts.Parks);
        SetCount(measurement, Metrics[13].Name, counts.Steals);
        SetCount(measurement, Metrics[14].Name, counts.ThreadsAdded);
        if (steal is { } share)
        {
            measurement.Set(Metrics[15].Name, share * 100);
        }
        else
        {
            measurement.SetUnavailable(Metrics[15].Name);
        }
        // Last: the probe's own threads and spinning are no part of the figures above.
        if (HostRoundTrip.Measure() is { } roundTrip)
        {
            measurement.Set(HostRoundTripMetric.Name, roundTrip);
        }
        else
        {
            measurement.SetUnavailable(HostRoundTripMetric.Name);
        }
        if (HostCompute.Measure() is { } compute)
        {
            measurement.Set(HostComputeMetric.Name, compute);
        }
        else
        {
            measurement.SetUnavailable(HostComputeMetric.Name);
        }
    }

    private static void SetCount(Measurement measurement, string metric, long? count)
    {
        if (count is { } value)
        {
            measurement.Set(metric, value);
        }
        else
        {
            measurement.SetUnavailable(metric);
        }
    }

    private static void Sample()
    {
        while (s_sampling)
        {
            int threads = ReadThreadCount();
            int peak = Volatile.Read(ref s_peakThreads);
            if (threads > peak)
            {
                Interlocked.CompareExchange(ref s_peakThreads, threads, peak);
            }
            Thread.Sleep(10);
        }
    }

    /// <summary>
    /// The process's thread count. On Linux one read of <c>/proc/self/status</c> into a buffer kept for it (under a
    /// lock: the sampler and the child's thread both read), through a descriptor kept open, so that sampling allocates
    /// nothing once the first read has made them: the scenarios' allocation figures are process-wide, and a sampler that
    /// allocated a reader and a string per line every 10 ms showed up in them as about 20 bytes per operation of the
    /// socket scenarios.
    /// </summary>
    private static int ReadThreadCount()
    {
        if (OperatingSystem.IsLinux() && TryReadThreadCountFromProc(out int count))
        {
            return count;
        }
        using var process = Process.GetCurrentProcess();
        return process.Threads.Count;
    }

    private static readonly Lock s_statusLock = new();
    private static SafeFileHandle? s_status;
    private static byte[]? s_statusBuffer;

    private static ReadOnlySpan<byte> ThreadsField => "\nThreads:"u8;

    private static bool TryReadThreadCountFromProc(out int count)
    {
        count = 0;
        lock (s_statusLock)
        {
            try
            {
                return TryReadThreadCountLocked(ref count);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException or NotSupportedException)
            {
                return false;
            }
        }
    }

    private static bool TryReadThreadCountLocked(ref int count)
    {
        SafeFileHandle status = s_status ??= File.OpenHandle("/proc/self/status");
        byte[] buffer = s_statusBuffer ??= new byte[16 * 1024];
        // A read at offset 0 makes the kernel render the file afresh; it is far smaller than the buffer.
        int length = RandomAccess.Read(status, buffer, 0);
        ReadOnlySpan<byte> text = buffer.AsSpan(0, length);
        int field = text.IndexOf(ThreadsField);
        if (field < 0)
        {
            return false;
        }
        ReadOnlySpan<byte> rest = text[(field + ThreadsField.Length)..];
        int i = 0;
        while (i < rest.Length && (rest[i] == (byte)' ' || rest[i] == (byte)'\t'))
        {
            i++;
        }
        int digits = 0;
        while (i < rest.Length && rest[i] is >= (byte)'0' and <= (byte)'9')
        {
            count = (count * 10) + (rest[i] - '0');
            i++;
            digits++;
        }
        return digits > 0;
    }
}
