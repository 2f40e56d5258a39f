using System;
using System.Diagnostics;
using System.Runtime.InteropServices;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// CPU time of the process and of the calling thread, in nanoseconds, from <c>clock_gettime</c> (Linux and macOS).
/// The process figure falls back to <see cref="Process.TotalProcessorTime"/> elsewhere; the thread figure has no
/// fallback and throws <see cref="PlatformNotSupportedException"/>.
/// </summary>
internal static partial class CpuClock
{
    private const int LinuxProcessCpuTime = 2;
    private const int LinuxThreadCpuTime = 3;
    private const int MacProcessCpuTime = 12;
    private const int MacThreadCpuTime = 16;

    public static bool IsThreadClockSupported => OperatingSystem.IsLinux() || OperatingSystem.IsMacOS();

    /// <summary>CPU time consumed so far by every thread of this process.</summary>
    public static long ProcessNanoseconds()
    {
        if (OperatingSystem.IsLinux())
        {
            return Read(LinuxProcessCpuTime);
        }
        if (OperatingSystem.IsMacOS())
        {
            return Read(MacProcessCpuTime);
        }
        using Process process = Process.GetCurrentProcess();
        return process.TotalProcessorTime.Ticks * 100;
    }

    /// <summary>CPU time consumed so far by the calling thread.</summary>
    public static long CurrentThreadNanoseconds()
    {
        if (OperatingSystem.IsLinux())
        {
            return Read(LinuxThreadCpuTime);
        }
        if (OperatingSystem.IsMacOS())
        {
            return Read(MacThreadCpuTime);
        }
        throw new PlatformNotSupportedException("Per-thread CPU time is only read on Linux and macOS (clock_gettime).");
    }

    private static long Read(int clockId)
    {
        if (ClockGetTime(clockId, out TimeSpec time) != 0)
        {
            throw new InvalidOperationException($"clock_gettime({clockId}) failed with errno {Marshal.GetLastPInvokeError()}.");
        }
        return (long)time.Seconds * 1_000_000_000L + (long)time.Nanoseconds;
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct TimeSpec
    {
        public nint Seconds;
        public nint Nanoseconds;
    }

    [LibraryImport("libc", EntryPoint = "clock_gettime", SetLastError = true)]
    private static partial int ClockGetTime(int clockId, out TimeSpec time);
}
