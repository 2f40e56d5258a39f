using System;
using System.Runtime.CompilerServices;
using System.Text;

namespace Spindle.Primitives;

/// <summary>
/// Small reads of /proc through raw system calls (no framework file APIs: their first uses and tier-up compilations
/// would land in whatever the process is doing when a rare check runs). Linux, 64-bit.
/// </summary>
internal static unsafe class ProcFiles
{
    /// <summary>Called for each numeric entry of a directory; returns true to stop the listing there.</summary>
    public delegate bool EntryVisitor<TState>(TState state, int id, Span<byte> buffer);

    /// <summary>The longest path these helpers take, in bytes.</summary>
    private const int MaxPath = 256;

    /// <summary>Reads the start of a file into <paramref name="buffer"/>: the bytes read, or -1 when it cannot be read.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static int Read(string path, Span<byte> buffer)
    {
        byte* native = stackalloc byte[MaxPath];
        if (!TryEncode(path, native))
        {
            return -1;
        }
        int fd = LinuxIo.Open(native, LinuxIo.OpenReadOnlyCloexec);
        if (fd < 0)
        {
            return -1;
        }
        nint read;
        fixed (byte* destination = buffer)
        {
            read = LinuxIo.PRead(fd, destination, buffer.Length, 0);
        }
        LinuxIo.Close(fd);
        return read < 0 ? -1 : (int)read;
    }

    /// <summary>
    /// Calls <paramref name="visit"/> for each entry of <paramref name="directory"/> whose name is a number, until one
    /// call returns true (<paramref name="stopped"/>). Returns false when the directory cannot be listed.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static bool ForEachNumericEntry<TState>(
        string directory, TState state, EntryVisitor<TState> visit, Span<byte> buffer, out bool stopped)
    {
        stopped = false;
        byte* native = stackalloc byte[MaxPath];
        if (IntPtr.Size != 8 || !TryEncode(directory, native))
        {
            return false;
        }
        nint stream = LinuxIo.OpenDir(native);
        if (stream == 0)
        {
            return false;
        }
        try
        {
            for (byte* entry = LinuxIo.ReadDir(stream); entry != null; entry = LinuxIo.ReadDir(stream))
            {
                if (TryParseName(entry + LinuxIo.DirentNameOffset, out int id) && visit(state, id, buffer))
                {
                    stopped = true;
                    break;
                }
            }
        }
        finally
        {
            _ = LinuxIo.CloseDir(stream);
        }
        return true;
    }

    /// <summary>A NUL-terminated name that is a positive decimal number below a billion (a pid or a thread id).</summary>
    private static bool TryParseName(byte* name, out int id)
    {
        id = 0;
        int length = 0;
        for (; name[length] != 0; length++)
        {
            byte b = name[length];
            if (b < (byte)'0' || b > (byte)'9' || length == 9)
            {
                return false;
            }
            id = (id * 10) + (b - '0');
        }
        return length > 0;
    }

    private static bool TryEncode(string path, byte* destination)
    {
        var span = new Span<byte>(destination, MaxPath);
        if (Encoding.UTF8.GetMaxByteCount(path.Length) >= MaxPath && Encoding.UTF8.GetByteCount(path) >= MaxPath)
        {
            return false;
        }
        int length = Encoding.UTF8.GetBytes(path, span);
        span[length] = 0;
        return true;
    }
}
