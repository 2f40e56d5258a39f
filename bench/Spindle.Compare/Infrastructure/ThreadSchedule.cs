using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// What the kernel's scheduler did to each thread of the process, from <c>/proc/self/task</c> (Linux): the time a thread
/// spent runnable but waiting for a core (<c>schedstat</c>'s second field), and how often it was moved from one CPU to
/// another (<c>se.nr_migrations</c> in <c>sched</c>, present where the kernel keeps scheduler statistics). Two runs of a
/// case whose preemptions match can still differ here: threads of the process taking turns on a shared core (the
/// producer and a worker on one core while the other worker runs alone on the other) show as waiting time, and a
/// worker the kernel keeps placing on the other core as migrations.
/// </summary>
/// <remarks>
/// <para>Summed per thread between two snapshots: a thread started in between counts from zero; one that exited in
/// between is not counted (its figures go with it). Elsewhere than 64-bit Linux, or where <c>/proc</c> is not readable,
/// both figures are unavailable; migrations alone are where <c>sched</c> is missing.</para>
/// <para>Why the reading is done by hand, through the C library and in methods compiled fully optimised at their first
/// call. A snapshot is taken at each mark of a measured part's start, and its work is per thread: through the framework's
/// directory and file APIs and string parsing, the few snapshots before a measured part (the child's start, the
/// warm-up's end, a full collection) called some hundred framework methods past their tiering thresholds (30 calls),
/// so the background compiler promoted them just as the measured part began: 100-120 more methods compiled in every
/// case's measured part (the <c>process jit</c> figure on 2 cores: <c>wake-latency</c> 56-58 before these figures and
/// 153 after, <c>chain-throughput</c> 82-86 and 200-218), on the cores the pools were being measured on. Here nothing a
/// snapshot calls is tiered: the methods below are optimised from the start, and what they call is the C library and
/// plain loops over bytes.</para>
/// </remarks>
internal static unsafe partial class ThreadSchedule
{
    private const int BufferBytes = 8 * 1024;
    private const int PathBytes = 64;

    /// <summary><c>struct dirent</c>'s name on 64-bit Linux (glibc and musl): after an 8-byte inode, an 8-byte offset, a 2-byte length and a 1-byte type.</summary>
    private const int DirentNameOffset = 19;

    private const int ReadOnly = 0; // O_RDONLY
    private const int CloseOnExec = 0x80000; // O_CLOEXEC

    private static ReadOnlySpan<byte> TaskDirectory => "/proc/self/task\0"u8;

    private static ReadOnlySpan<byte> SchedstatName => "/schedstat\0"u8;

    private static ReadOnlySpan<byte> SchedName => "/sched\0"u8;

    private static ReadOnlySpan<byte> MigrationsField => "se.nr_migrations"u8;

    /// <summary>One thread's figures: its kernel id, its time waiting for a core (ns), and its migrations (null where unknown).</summary>
    public readonly record struct ThreadFigures(int Tid, long WaitNanoseconds, long? Migrations);

    /// <summary>Each live thread's figures at one moment.</summary>
    public sealed class Snapshot
    {
        internal Snapshot(ThreadFigures[] threads) => Threads = threads;

        internal ThreadFigures[] Threads { get; }
    }

    /// <summary>Reads every thread's figures now; null where the process's threads cannot be read.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static Snapshot? Take()
    {
        if (!OperatingSystem.IsLinux() || !Environment.Is64BitProcess)
        {
            return null; // the directory entry's layout below is 64-bit Linux's
        }
        nint directory;
        fixed (byte* name = TaskDirectory)
        {
            directory = OpenDirectory(name);
        }
        if (directory == 0)
        {
            return null;
        }
        var threads = new ThreadFigures[64];
        int count = 0;
        byte* buffer = stackalloc byte[BufferBytes];
        byte* path = stackalloc byte[PathBytes];
        try
        {
            for (nint entry = ReadDirectory(directory); entry != 0; entry = ReadDirectory(directory))
            {
                if (ParseTid((byte*)entry + DirentNameOffset) is not int tid)
                {
                    continue; // "." and ".."
                }
                int read = ReadThreadFile(path, tid, SchedstatName, buffer);
                if (read <= 0 || ParseWait(new ReadOnlySpan<byte>(buffer, read)) is not long wait)
                {
                    continue; // the thread exited between the listing and the read: it is not counted
                }
                read = ReadThreadFile(path, tid, SchedName, buffer);
                long? migrations = read > 0 ? ParseMigrations(new ReadOnlySpan<byte>(buffer, read)) : null;
                if (count == threads.Length)
                {
                    threads = Grow(threads);
                }
                threads[count++] = new ThreadFigures(tid, wait, migrations);
            }
        }
        finally
        {
            _ = CloseDirectory(directory);
        }
        if (count == 0)
        {
            return null;
        }
        var exact = new ThreadFigures[count];
        for (int i = 0; i < count; i++)
        {
            exact[i] = threads[i];
        }
        return new Snapshot(exact);
    }

    /// <summary>
    /// The waiting time (ms) and migrations between <paramref name="start"/> and <paramref name="end"/>, summed over the
    /// threads alive at <paramref name="end"/>; null where either snapshot is, migrations null where a thread lacks them.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static (double? WaitMilliseconds, long? Migrations) Between(Snapshot? start, Snapshot? end)
    {
        if (start is null || end is null)
        {
            return (null, null);
        }
        long wait = 0;
        long migrations = 0;
        bool migrationsKnown = true;
        foreach (ThreadFigures thread in end.Threads)
        {
            ThreadFigures before = new(thread.Tid, 0, 0); // started in between: from zero
            foreach (ThreadFigures candidate in start.Threads)
            {
                if (candidate.Tid == thread.Tid)
                {
                    before = candidate;
                    break;
                }
            }
            wait += Math.Max(0, thread.WaitNanoseconds - before.WaitNanoseconds);
            if (thread.Migrations is long endCount && before.Migrations is long startCount)
            {
                migrations += Math.Max(0, endCount - startCount);
            }
            else
            {
                migrationsKnown = false;
            }
        }
        return (wait / 1e6, migrationsKnown ? migrations : null);
    }

    /// <summary><c>schedstat</c>: three numbers, the time on a core and the time waiting for one (ns), then the slices.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    internal static long? ParseWait(ReadOnlySpan<byte> schedstat)
    {
        int i = 0;
        if (ParseNumber(schedstat, ref i) is null)
        {
            return null;
        }
        return ParseNumber(schedstat, ref i);
    }

    /// <summary><c>sched</c>: one "name : value" line per figure; the migrations count, or null where the line is missing.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    internal static long? ParseMigrations(ReadOnlySpan<byte> sched)
    {
        ReadOnlySpan<byte> field = MigrationsField;
        int lineStart = 0;
        while (lineStart < sched.Length)
        {
            int i = lineStart;
            int matched = 0;
            while (matched < field.Length && i < sched.Length && sched[i] == field[matched])
            {
                i++;
                matched++;
            }
            if (matched == field.Length)
            {
                while (i < sched.Length && sched[i] == (byte)' ')
                {
                    i++;
                }
                if (i < sched.Length && sched[i] == (byte)':')
                {
                    i++;
                    return ParseNumber(sched, ref i);
                }
            }
            while (lineStart < sched.Length && sched[lineStart] != (byte)'\n')
            {
                lineStart++;
            }
            lineStart++;
        }
        return null;
    }

    /// <summary>Skips spaces, then reads a run of decimal digits up to the next space or line end; null where there is none or it is not all digits.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static long? ParseNumber(ReadOnlySpan<byte> text, ref int i)
    {
        while (i < text.Length && text[i] == (byte)' ')
        {
            i++;
        }
        long value = 0;
        int digits = 0;
        while (i < text.Length && text[i] is >= (byte)'0' and <= (byte)'9')
        {
            value = (value * 10) + (text[i] - '0');
            i++;
            digits++;
        }
        bool ended = i == text.Length || text[i] is (byte)' ' or (byte)'\n';
        return digits > 0 && ended ? value : null;
    }

    /// <summary>A directory entry's name as a thread id; null for any other name.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static int? ParseTid(byte* name)
    {
        int value = 0;
        int i = 0;
        for (; name[i] != 0; i++)
        {
            if (name[i] is < (byte)'0' or > (byte)'9' || i >= 9)
            {
                return null;
            }
            value = (value * 10) + (name[i] - '0');
        }
        return i > 0 ? value : null;
    }

    /// <summary>Reads <c>/proc/self/task/&lt;tid&gt;&lt;name&gt;</c> into <paramref name="buffer"/>; the bytes read, or -1.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static int ReadThreadFile(byte* path, int tid, ReadOnlySpan<byte> name, byte* buffer)
    {
        ReadOnlySpan<byte> directory = TaskDirectory[..^1]; // without its terminator
        int length = 0;
        for (int i = 0; i < directory.Length; i++)
        {
            path[length++] = directory[i];
        }
        path[length++] = (byte)'/';
        int digits = 1;
        for (int rest = tid / 10; rest > 0; rest /= 10)
        {
            digits++;
        }
        for (int i = digits - 1, rest = tid; i >= 0; i--, rest /= 10)
        {
            path[length + i] = (byte)('0' + (rest % 10));
        }
        length += digits;
        for (int i = 0; i < name.Length; i++)
        {
            path[length++] = name[i]; // ends with the terminator
        }
        int descriptor = Open(path, ReadOnly | CloseOnExec);
        if (descriptor < 0)
        {
            return -1;
        }
        int total = 0;
        while (total < BufferBytes)
        {
            nint read = ReadBytes(descriptor, buffer + total, BufferBytes - total);
            if (read <= 0)
            {
                break;
            }
            total += (int)read;
        }
        _ = Close(descriptor);
        return total;
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static ThreadFigures[] Grow(ThreadFigures[] threads)
    {
        var larger = new ThreadFigures[threads.Length * 2];
        for (int i = 0; i < threads.Length; i++)
        {
            larger[i] = threads[i];
        }
        return larger;
    }

    [LibraryImport("libc", EntryPoint = "opendir")]
    private static partial nint OpenDirectory(byte* name);

    [LibraryImport("libc", EntryPoint = "readdir")]
    private static partial nint ReadDirectory(nint directory);

    [LibraryImport("libc", EntryPoint = "closedir")]
    private static partial int CloseDirectory(nint directory);

    [LibraryImport("libc", EntryPoint = "open")]
    private static partial int Open(byte* path, int flags);

    [LibraryImport("libc", EntryPoint = "read")]
    private static partial nint ReadBytes(int descriptor, byte* buffer, nint count);

    [LibraryImport("libc", EntryPoint = "close")]
    private static partial int Close(int descriptor);
}
