using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Runtime.InteropServices;

namespace Spindle.Primitives;

/// <summary>
/// What the operating system lets this process start in threads, and the default <see cref="WorkerPoolOptions.MaxThreads"/>
/// derived from it.
/// </summary>
/// <remarks>
/// <para>A process that runs out of threads does not fail where it asked: the runtime starts threads of its own (the
/// built-in timer thread, console initialisation, the finalizer's helpers) at moments it cannot recover from a refusal,
/// and aborts. So a pool must not be the one that takes the last threads. It reads the ceilings that apply (Linux only;
/// elsewhere none is read and the default stays <see cref="WorkerPoolOptions.MaxThreadLimit"/>):</para>
/// <list type="bullet">
/// <item>the <c>pids</c> controller of the process's cgroup, v1 or v2 (<c>pids.max</c> less <c>pids.current</c>), at its
/// own level and every level above it that is visible, since each level limits everything below it;</item>
/// <item><c>RLIMIT_NPROC</c> (getrlimit), less the threads of this process: the limit counts every process and thread of
/// the user, which would take a scan of /proc to count, so this headroom is an upper bound (root is exempt and gets
/// none);</item>
/// <item><c>/proc/sys/kernel/threads-max</c>, less the threads of the whole system (the fourth field of /proc/loadavg).</item>
/// </list>
/// <para>The headroom is the smallest of those; the default maximum is half of it, at least <see cref="Floor"/>: the
/// other half stays for the runtime, the application and other pools (each pool reads the headroom when it is created,
/// so a second pool takes half of what the first left). Each read is a few small files, once per pool.</para>
/// </remarks>
internal static partial class ThreadLimits
{
    /// <summary>The smallest default maximum, whatever the headroom: a pool with fewer threads could not run blocked items at all.</summary>
    public const int Floor = 4;

    private const string CgroupRoot = "/sys/fs/cgroup";

    /// <summary>The default maximum for a pool created now: see the remarks.</summary>
    public static int DefaultMaxThreads() => DeriveMaxThreads(ReadHeadroom());

    /// <summary>Half of <paramref name="headroom"/> (null: no ceiling known), between <see cref="Floor"/> and <see cref="WorkerPoolOptions.MaxThreadLimit"/>.</summary>
    public static int DeriveMaxThreads(long? headroom) =>
        headroom is long room ? (int)Math.Clamp(room / 2, Floor, WorkerPoolOptions.MaxThreadLimit) : WorkerPoolOptions.MaxThreadLimit;

    /// <summary>How many more threads the process may start before some ceiling refuses them (never negative), or null if none is known.</summary>
    public static long? ReadHeadroom()
    {
        if (!OperatingSystem.IsLinux())
        {
            return null;
        }
        long? headroom = null;
        try
        {
            headroom = Min(headroom, CgroupHeadroom(File.ReadAllText("/proc/self/cgroup"), File.ReadAllText("/proc/self/mountinfo")));
            headroom = Min(headroom, ProcessLimitHeadroom());
            headroom = Min(headroom, SystemHeadroom());
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException or FormatException or OverflowException)
        {
            // A file that vanished or reads oddly: keep what was read so far.
        }
        return headroom is long room ? Math.Max(0, room) : null;
    }

    private static long? Min(long? a, long? b) => a is null ? b : b is null ? a : Math.Min(a.Value, b.Value);

    /// <summary>
    /// The headroom under the pids controller of the cgroup that <paramref name="procSelfCgroup"/> names, its hierarchy
    /// found in <paramref name="mountinfo"/>: the smallest <c>pids.max - pids.current</c> from the process's cgroup up to
    /// the mount's root. Null when no pids controller applies.
    /// </summary>
    internal static long? CgroupHeadroom(string procSelfCgroup, string mountinfo)
    {
        long? headroom = null;
        foreach ((string mount, string path) in PidsDirectories(procSelfCgroup, mountinfo))
        {
            headroom = Min(headroom, HeadroomUpFrom(mount, path));
        }
        return headroom;
    }

    /// <summary>
    /// The process's cgroup directories that may hold a pids controller: the v1 hierarchy whose controllers include
    /// <c>pids</c>, and the v2 unified one. A line of /proc/self/cgroup is <c>id:controllers:path</c> (v2: <c>0::path</c>);
    /// a line of mountinfo names the mount point (field 5), the part of the hierarchy mounted there (field 4), and after
    /// the " - " separator the file system type and its super options (the v1 controllers).
    /// </summary>
    /// <returns>Each as the mount point and the cgroup's path below it ("" for the mount point itself).</returns>
    internal static List<(string Mount, string Path)> PidsDirectories(string procSelfCgroup, string mountinfo)
    {
        var directories = new List<(string Mount, string Path)>();
        foreach (string line in procSelfCgroup.Split('\n', StringSplitOptions.RemoveEmptyEntries))
        {
            string[] parts = line.Split(':', 3);
            if (parts.Length != 3)
            {
                continue;
            }
            bool v2 = parts[0] == "0" && parts[1].Length == 0;
            if (!v2 && Array.IndexOf(parts[1].Split(','), "pids") < 0)
            {
                continue;
            }
            if (FindMount(mountinfo, v2) is (string mountPoint, string mountRoot))
            {
                string path = parts[2];
                // Inside a cgroup namespace, or with a bind-mounted subtree, the mount shows part of the hierarchy.
                if (mountRoot != "/" && path.StartsWith(mountRoot, StringComparison.Ordinal))
                {
                    path = path[mountRoot.Length..];
                }
                directories.Add((mountPoint, path.TrimEnd('/')));
            }
        }
        return directories;
    }

    private static (string MountPoint, string Root)? FindMount(string mountinfo, bool v2)
    {
        foreach (string line in mountinfo.Split('\n', StringSplitOptions.RemoveEmptyEntries))
        {
            int separator = line.IndexOf(" - ", StringComparison.Ordinal);
            if (separator < 0)
            {
                continue;
            }
            string[] fields = line[..separator].Split(' ');
            string[] after = line[(separator + 3)..].Split(' ');
            if (fields.Length < 5 || after.Length < 3)
            {
                continue;
            }
            bool match = v2
                ? after[0] == "cgroup2"
                : after[0] == "cgroup" && Array.IndexOf(after[2].Split(','), "pids") >= 0;
            if (match)
            {
                return (fields[4], fields[3]);
            }
        }
        return null;
    }

    /// <summary>
    /// The smallest <c>pids.max - pids.current</c> from <paramref name="path"/> below <paramref name="mount"/> up to the
    /// mount point; null if no level has a limit (the root level never has one).
    /// </summary>
    private static long? HeadroomUpFrom(string mount, string path)
    {
        long? headroom = null;
        while (true)
        {
            string level = path.Length == 0 ? mount : mount + path;
            if (ReadLimit(Path.Combine(level, "pids.max")) is long max
                && ReadLimit(Path.Combine(level, "pids.current")) is long current)
            {
                headroom = Min(headroom, max - current);
            }
            if (path.Length == 0)
            {
                return headroom;
            }
            path = path[..path.LastIndexOf('/')];
        }
    }

    /// <summary>A number from a one-line file; null if the file is missing or says "max".</summary>
    private static long? ReadLimit(string file)
    {
        if (!File.Exists(file))
        {
            return null;
        }
        string text = File.ReadAllText(file).Trim();
        return text == "max" || text.Length == 0 ? null : long.Parse(text, NumberStyles.None, CultureInfo.InvariantCulture);
    }

    private static long? ProcessLimitHeadroom()
    {
        if (Environment.IsPrivilegedProcess || GetResourceLimit(RlimitNproc, out ResourceLimit limit) != 0
            || limit.Current >= long.MaxValue)
        {
            return null; // root (or CAP_SYS_RESOURCE) is not held to it; "unlimited" reads as RLIM_INFINITY
        }
        return (long)limit.Current - ThreadsOfThisProcess();
    }

    private static long ThreadsOfThisProcess()
    {
        foreach (string line in File.ReadLines("/proc/self/status"))
        {
            if (line.StartsWith("Threads:", StringComparison.Ordinal))
            {
                return long.Parse(line.AsSpan(8).Trim(), NumberStyles.None, CultureInfo.InvariantCulture);
            }
        }
        return 0;
    }

    private static long? SystemHeadroom()
    {
        long? max = ReadLimit("/proc/sys/kernel/threads-max");
        if (max is null || !File.Exists("/proc/loadavg"))
        {
            return null;
        }
        // "0.20 0.18 0.12 1/80 11206": the fourth field is runnable/total scheduling entities (threads) of the system.
        string[] fields = File.ReadAllText("/proc/loadavg").Split(' ');
        int slash = fields.Length < 4 ? -1 : fields[3].IndexOf('/', StringComparison.Ordinal);
        if (slash < 0)
        {
            return null;
        }
        return max.Value - long.Parse(fields[3].AsSpan(slash + 1), NumberStyles.None, CultureInfo.InvariantCulture);
    }

    private const int RlimitNproc = 6; // Linux, every architecture .NET runs on

    [StructLayout(LayoutKind.Sequential)]
    private struct ResourceLimit
    {
        public ulong Current;
        public ulong Maximum;
    }

    [LibraryImport("libc", EntryPoint = "getrlimit", SetLastError = true)]
    private static partial int GetResourceLimit(int resource, out ResourceLimit limit);
}
