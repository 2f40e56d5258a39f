using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Text;

namespace Spindle.Primitives;

/// <summary>
/// Whether a thread of this process wants a CPU right now, as the kernel sees it: running or waiting in a run queue
/// (state <c>R</c> in <c>/proc/self/task/&lt;tid&gt;/stat</c>), or asleep in a wait of any kind (<c>S</c>, <c>D</c>:
/// a lock, an event, a sleep, a socket read). Linux only; elsewhere nothing is known.
/// </summary>
/// <remarks>
/// <para>Why the kernel's state: the stall monitor must tell workers blocked in a wait from workers computing. The
/// process's CPU time counts threads that are not the pool's (a producer keeping a core busy made blocked workers look
/// busy), and a thread's own CPU time over a stall says nothing when the stall is the workers' preemption itself:
/// beside other busy processes both workers may wait in the run queue for the same few milliseconds, computing but
/// using no CPU. Their state is <c>R</c> all along, where a blocked worker's is <c>S</c>.</para>
/// <para>A thread learns its own id (<see cref="CurrentId"/>) once, when it starts; another thread reads the state by
/// that id with three system calls (open, read, close: no descriptor is kept per thread), a few microseconds. An id
/// that is gone (the thread exited) or unreadable reads as <see cref="State.Unknown"/>; so does every id where
/// <c>gettid</c> is missing, after which nothing is tried again. <see cref="IsAvailable"/> says whether a reading can
/// be trusted at all.</para>
/// </remarks>
internal static class KernelThreadState
{
    /// <summary>What the kernel says of a thread.</summary>
    public enum State
    {
        /// <summary>Not Linux, no such thread, or the state could not be read.</summary>
        Unknown,

        /// <summary>Running, or runnable and waiting for a CPU (<c>R</c>).</summary>
        Runnable,

        /// <summary>Asleep in a wait, interruptible or not, or stopped (any other state).</summary>
        Waiting,
    }

    private static volatile bool s_unavailable = !OperatingSystem.IsLinux();

    private static readonly byte[] s_pathPrefix = Encoding.ASCII.GetBytes("/proc/self/task/");
    private static readonly byte[] s_pathSuffix = Encoding.ASCII.GetBytes("/stat\0");

    // 0: not probed yet; 1: the calling thread's own state read as runnable once; -1: it did not (no /proc, a /proc that
    // hides threads, no gettid), so states are not read at all.
    private static volatile int s_probed;

    /// <summary>
    /// Whether states can be read here: Linux, with <c>gettid</c>, and a <c>/proc</c> that showed the first caller its
    /// own thread running. A missing thread then reads as <see cref="State.Unknown"/> because it is gone, not because
    /// nothing can be read.
    /// </summary>
    public static bool IsAvailable
    {
        get
        {
            int probed = s_probed;
            if (probed == 0)
            {
                probed = !s_unavailable && Read(CurrentId()) == State.Runnable ? 1 : -1;
                s_probed = probed;
            }
            return probed > 0; // a C library without gettid fails the probe too
        }
    }

    /// <summary>The calling thread's id to the kernel, or 0 where it cannot be learnt.</summary>
    [MethodImpl(RarePath.Compile)]
    public static int CurrentId()
    {
        if (s_unavailable)
        {
            return 0;
        }
        try
        {
            return LinuxIo.GetTid();
        }
        catch (EntryPointNotFoundException)
        {
            s_unavailable = true; // a C library without gettid: judge without thread states from now on
            return 0;
        }
    }

    /// <summary>Reads the state of the thread <paramref name="threadId"/> of this process (0: unknown).</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static unsafe State Read(int threadId)
    {
        if (threadId <= 0 || s_unavailable)
        {
            return State.Unknown;
        }
        byte* path = stackalloc byte[48];
        WritePath(new Span<byte>(path, 48), threadId);
        int fd = LinuxIo.Open(path, LinuxIo.OpenReadOnlyCloexec);
        if (fd < 0)
        {
            return State.Unknown; // the thread has exited (or /proc is not mounted: then every read says so)
        }
        byte* buffer = stackalloc byte[128];
        nint read = LinuxIo.PRead(fd, buffer, 128, 0);
        LinuxIo.Close(fd);
        return read > 0 ? Parse(new ReadOnlySpan<byte>(buffer, (int)read)) : State.Unknown;
    }

    /// <summary>Writes <c>/proc/self/task/&lt;tid&gt;/stat</c> and a terminating zero (at most 37 bytes) without allocating.</summary>
    [MethodImpl(RarePath.Compile)]
    private static void WritePath(Span<byte> path, int threadId)
    {
        s_pathPrefix.CopyTo(path);
        int at = s_pathPrefix.Length;
        bool written = threadId.TryFormat(path[at..], out int digits, provider: CultureInfo.InvariantCulture);
        Debug.Assert(written);
        at += digits;
        s_pathSuffix.CopyTo(path[at..]);
    }

    /// <summary>
    /// The state in a <c>stat</c> line: <c>tid (comm) S …</c>. The thread's name may hold spaces and parentheses, so the
    /// state is the first character after the last <c>") "</c> of the text read (the fields after it are numbers).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public static State Parse(ReadOnlySpan<byte> stat)
    {
        for (int close = stat.Length - 3; close >= 0; close--)
        {
            if (stat[close] == (byte)')' && stat[close + 1] == (byte)' ')
            {
                return stat[close + 2] == (byte)'R' ? State.Runnable : State.Waiting;
            }
        }
        return State.Unknown;
    }
}
