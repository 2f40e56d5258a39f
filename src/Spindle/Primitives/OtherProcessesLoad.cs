using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;

namespace Spindle.Primitives;

/// <summary>
/// How much of the machine other processes keep busy, sampled at most every <see cref="SampleIntervalTicks"/> by
/// whichever thread asks: the machine's busy CPU time (the first line of <c>/proc/stat</c>) less this process's own
/// (its CPU clock), over the wall time between two samples. A searching worker asks before it
/// yields its core (see <c>IdleCoordinator.Search</c>): when other processes' threads are runnable beside ours, a
/// yield may hand the core to one of them for a whole scheduler slice (milliseconds), while the worker still counts as
/// searching and the enqueues it was kept for wait; it then times its yields and spins briefly in place of each while
/// they do (see <c>Parking.YieldVerdict</c>).
/// </summary>
/// <remarks>
/// <para>Linux only (elsewhere <see cref="CoresShared"/> is always false and nothing is read). The figures count the
/// whole machine, as /proc/stat does, in USER_HZ units (1/100 s on every Linux the runtime supports); a container's
/// /proc/stat is usually the host's, which is what matters here: the other processes on the same cores.</para>
/// <para>The figure is the machine's, so every pool of the process asks the one <see cref="Process"/> instance. A sample
/// is a read of a descriptor of /proc/stat kept open for the instance's lifetime (a seq file regenerates its text for
/// every read at offset 0) and one <c>clock_gettime</c>, in methods compiled
/// fully optimised at their first call. Through the framework's file and CPU-usage APIs, a sample every 100 ms reached
/// some fifteen methods whose tier-up compilations landed in the first seconds of a quiet pool: 20 ms of a pool's CPU
/// over 3 s of one item per millisecond (the comparison program's <c>idle-cpu</c>).</para>
/// <para>Protocol: <see cref="_shared"/> and <see cref="_nextSampleAt"/> are read with plain volatile loads on the
/// searcher's path. A caller that finds the sample due claims it with a compare-exchange on <see cref="_sampling"/>;
/// the claimer alone opens the descriptor and writes the previous sample's fields, then publishes the verdict and the
/// next due time. Losers read the previous verdict. A failed read (no /proc, a parse error) turns sampling off for
/// good.</para>
/// </remarks>
internal sealed class OtherProcessesLoad
{
    /// <summary>The shortest time between two samples: 100 ms, ten /proc/stat ticks.</summary>
    public static readonly long SampleIntervalTicks = Stopwatch.Frequency / 10;

    /// <summary>Other processes' busy cores at or above which the cores count as shared.</summary>
    public const double SharedAbove = 0.5;

    /// <summary>Other processes' busy cores below which shared cores count as free again (hysteresis).</summary>
    public const double FreeBelow = 0.25;

    /// <summary>/proc/stat's unit: USER_HZ ticks per second.</summary>
    private const double TicksPerSecond = 100;

    /// <summary>The instance every pool of the process asks.</summary>
    public static readonly OtherProcessesLoad Process = new();

    private volatile bool _shared;
    private long _nextSampleAt;
    private int _sampling;

    private const int NotOpened = -2;

    // Written by the claimer of the current sample only: the descriptor of /proc/stat (NotOpened until the first sample
    // opens it, -1 when that failed), and the previous sample.
    private int _statDescriptor = NotOpened;
    private long _sampledAt;
    private double _machineBusySeconds;
    private double _processSeconds;

    /// <summary>
    /// Whether other processes kept at least <see cref="SharedAbove"/> of a core busy over the latest sampling window;
    /// samples first when the latest sample is <see cref="SampleIntervalTicks"/> old (tens of microseconds, once per
    /// interval, on the asking thread).
    /// </summary>
    public bool CoresShared()
    {
        if (!OperatingSystem.IsLinux())
        {
            return false;
        }
        long now = Stopwatch.GetTimestamp();
        if (now >= Volatile.Read(ref _nextSampleAt) && Interlocked.CompareExchange(ref _sampling, 1, 0) == 0)
        {
            try
            {
                Sample(now);
            }
            finally
            {
                Volatile.Write(ref _sampling, 0);
            }
        }
        return _shared;
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private void Sample(long now)
    {
        if (!TryReadMachineBusySeconds(out double machineBusy) || !TryReadProcessSeconds(out double process))
        {
            _shared = false;
            Volatile.Write(ref _nextSampleAt, long.MaxValue); // nothing to read here: never again
            return;
        }
        if (_sampledAt != 0)
        {
            double wall = (double)(now - _sampledAt) / Stopwatch.Frequency;
            _shared = Judge(_shared, OtherBusyCores(machineBusy - _machineBusySeconds, process - _processSeconds, wall));
        }
        _sampledAt = now;
        _machineBusySeconds = machineBusy;
        _processSeconds = process;
        Volatile.Write(ref _nextSampleAt, now + SampleIntervalTicks);
    }

    /// <summary>Other processes' average busy cores over a window: the machine's busy time less ours, over the wall time.</summary>
    public static double OtherBusyCores(double machineBusySeconds, double processSeconds, double wallSeconds) =>
        wallSeconds <= 0 ? 0 : Math.Max(0, machineBusySeconds - processSeconds) / wallSeconds;

    /// <summary>The verdict after a window, with hysteresis: shared from <see cref="SharedAbove"/>, free again below <see cref="FreeBelow"/>.</summary>
    public static bool Judge(bool wasShared, double otherBusyCores) =>
        wasShared ? otherBusyCores >= FreeBelow : otherBusyCores >= SharedAbove;

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private unsafe bool TryReadMachineBusySeconds(out double seconds)
    {
        seconds = 0;
        if (_statDescriptor == NotOpened)
        {
            fixed (byte* path = Encoding.ASCII.GetBytes("/proc/stat\0"))
            {
                _statDescriptor = LinuxIo.Open(path, LinuxIo.OpenReadOnlyCloexec); // -1 when it cannot be opened
            }
        }
        if (_statDescriptor < 0)
        {
            return false;
        }
        byte* buffer = stackalloc byte[256];
        nint read = LinuxIo.PRead(_statDescriptor, buffer, 256, 0);
        return read > 0 && TryParseBusySeconds(new ReadOnlySpan<byte>(buffer, (int)read), out seconds);
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static unsafe bool TryReadProcessSeconds(out double seconds)
    {
        long* timespec = stackalloc long[2];
        if (LinuxIo.ClockGetTime(LinuxIo.ClockProcessCpuTime, timespec) != 0)
        {
            seconds = 0;
            return false;
        }
        seconds = timespec[0] + (timespec[1] / 1e9);
        return true;
    }

    /// <summary>
    /// The busy seconds of /proc/stat's first line (<c>cpu user nice system idle iowait irq softirq steal …</c>): user,
    /// nice, system, irq and softirq. Idle and iowait are not busy; steal is time the hypervisor gave elsewhere, which no
    /// yield of ours would get back.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static bool TryParseBusySeconds(ReadOnlySpan<byte> text, out double seconds)
    {
        seconds = 0;
        int end = text.IndexOf((byte)'\n');
        ReadOnlySpan<byte> line = end < 0 ? text : text[..end];
        if (line.Length < 4 || line[0] != (byte)'c' || line[1] != (byte)'p' || line[2] != (byte)'u' || line[3] != (byte)' ')
        {
            return false;
        }
        line = line[4..];
        Span<long> fields = stackalloc long[7];
        for (int i = 0; i < fields.Length; i++)
        {
            line = line.TrimStart((byte)' ');
            int length = 0;
            long value = 0;
            while (length < line.Length && line[length] is >= (byte)'0' and <= (byte)'9')
            {
                value = (value * 10) + (line[length] - '0');
                length++;
            }
            if (length == 0)
            {
                return false;
            }
            fields[i] = value;
            line = line[length..];
        }
        long busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6];
        seconds = busy / TicksPerSecond;
        return true;
    }
}
