using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;

namespace Spindle.Primitives;

/// <summary>
/// Whether this process's scheduling group holds threads that want a core beyond the process's own hand-offs (another
/// process of the group running, waiting to run or busy, or this process oversubscribed), where the group can be known
/// cheaply: on Linux, in the root CPU cgroup with autogroups on, the group is the process's session, and its members
/// are the processes whose <c>/proc/&lt;pid&gt;/stat</c> names the same session.
/// Elsewhere (another cgroup, autogroups off, not Linux, /proc unreadable) the answer is unknown.
/// </summary>
/// <remarks>
/// <para>What it is for: a searcher's yield gives the core to threads of its own group first, so busy processes of the
/// same group take it for a whole slice, while those of other groups take it only now and then (see
/// <c>Parking.YieldVerdict</c>). The verdict tells the two apart by how often yields are slow, and the rates overlap;
/// before it stops yields it asks here, and a known group with nobody else runnable in it vetoes the stop.</para>
/// <para>Why only the session case is answered. The kernel's fair scheduler uses a session's autogroup only for tasks
/// in the root task group. In any other CPU cgroup (a container, a systemd slice with CPU accounting) the group is the
/// cgroup, whose other members this class does not try to find; and with autogroups off the whole root group is one
/// group, which other processes' load already describes. Inside a cgroup namespace the cgroup file reads <c>/</c> for a
/// container's own cgroup too: under cgroup v2 such a cgroup has a <c>cpu.weight</c> file (the real root has none), which
/// is how it is told apart; under cgroup v1 a namespaced root is not told apart.</para>
/// <para>Cost and protocol: a check reads the stat file of every process and of every thread of this one, through raw
/// system calls in methods compiled fully optimised at their first call (as <see cref="OtherProcessesLoad"/>), on the
/// asking thread: about 7 µs a file, 0.55 ms for the 81 entries of /proc on the 2-core development VM, and a few
/// kilobytes of path strings. It remembers the CPU time of the session's members between checks (see
/// <see cref="ScanForRunnableNeighbour"/>). An answer is kept for
/// <see cref="AnswerTicks"/>; a caller that finds it due claims the check with a compare-exchange, and others meanwhile
/// get the previous answer.</para>
/// </remarks>
internal sealed class SchedulingGroup
{
    /// <summary>How long an answer stands (1 s): checks are rare, and a busy neighbour seldom comes and goes faster.</summary>
    public static readonly long AnswerTicks = Stopwatch.Frequency;

    /// <summary>The instance the process's verdict asks, over the real /proc.</summary>
    public static readonly SchedulingGroup Process = new("/proc", ownPid: 0, ownSession: 0, AnswerTicks, Environment.ProcessorCount);

    private const int Unknown = 0;
    private const int NobodyElse = 1;
    private const int SomeoneElse = 2;

    private readonly string _procRoot;
    private readonly long _answerTicks;
    private readonly int _cores;
    private int _ownPid;
    private int _ownSession;
    private int _modeKnown; // 0 until the first check decides whether the session is the group; then 1 (it is) or -1
    private int _answer = Unknown;
    private long _answeredAt; // 0 until the first answer
    private int _checking;

    // The claimer's: when the current scan began, and each session member's CPU ticks at the scan that last saw it.
    private readonly Dictionary<int, (long CpuTicks, long At)> _baselines = [];
    private long _scanAt;
    private int _ownRunnable;        // the count in progress, and its task directory (CountOwnRunnableThreads)
    private string _ownTaskDirectory = "";

    /// <summary>Clock ticks per second in /proc's CPU times (USER_HZ: 100 on every Linux the runtime supports).</summary>
    private const double ClockTicksPerSecond = 100;

    /// <summary>CPU use, in cores, from which a session member whose main thread waits still counts as busy.</summary>
    private const double BusyCores = 0.25;

    /// <summary>
    /// Runnable threads of this process per core beyond which it counts as oversubscribed. Not one: the runtime's own
    /// threads (the compiler's, the collector's, timers) are runnable now and then beside a hand-off's two, and a
    /// snapshot on 2 cores beside busy loops read 2 to 4 runnable threads during a channel hand-off and 27 during the
    /// drain of a backlog by a pool grown for blocked items.
    /// </summary>
    private const int OversubscribedFactor = 2;

    /// <summary>Session members remembered at most; more (exited processes piling up) and the memory starts over.</summary>
    private const int MaxBaselines = 256;

    /// <summary>How old a member's previous reading may be for its CPU use to count (5 s).</summary>
    private static readonly long BaselineTicks = Stopwatch.Frequency * 5;

    /// <summary>
    /// A group check over <paramref name="procRoot"/> on a machine of <paramref name="cores"/> cores. With
    /// <paramref name="ownPid"/> 0 the process's own pid and session are read from /proc/self/stat and the session case
    /// is detected from the machine; otherwise (tests) the given pid and session are used and the session is taken to be
    /// the group.
    /// </summary>
    internal SchedulingGroup(string procRoot, int ownPid, int ownSession, long answerTicks, int cores)
    {
        _cores = cores;
        _procRoot = procRoot;
        _ownPid = ownPid;
        _ownSession = ownSession;
        _answerTicks = answerTicks;
        _modeKnown = ownPid != 0 ? 1 : 0;
    }

    /// <summary>Checks made (tests and diagnostics).</summary>
    internal int CheckCount { get; private set; }

    /// <summary>
    /// True when a thread of this process's scheduling group other than the process's own hand-offs waits for a core, or
    /// soon will: another process of the group is runnable or busy, or this process has many more runnable threads than
    /// the machine has cores. False when neither holds, null when the group cannot be known here (see the remarks).
    /// </summary>
    public bool? CoresWantedInGroup()
    {
        if (!OperatingSystem.IsLinux() || Volatile.Read(ref _modeKnown) < 0)
        {
            return null;
        }
        long now = Stopwatch.GetTimestamp();
        long answeredAt = Volatile.Read(ref _answeredAt);
        if ((answeredAt == 0 || now - answeredAt >= _answerTicks)
            && Interlocked.CompareExchange(ref _checking, 1, 0) == 0)
        {
            try
            {
                Debug.Assert(Volatile.Read(ref _checking) == 1, "Only the claimer checks and writes the claimer's fields.");
                int answer = Check();
                Volatile.Write(ref _answeredAt, now);
                Volatile.Write(ref _answer, answer);
            }
            finally
            {
                Volatile.Write(ref _checking, 0);
            }
        }
        return Volatile.Read(ref _answer) switch
        {
            NobodyElse => false,
            SomeoneElse => true,
            _ => null,
        };
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private int Check()
    {
        CheckCount++;
        try
        {
            if (_modeKnown == 0)
            {
                _modeKnown = TryReadOwnSession() && SessionIsTheGroup() ? 1 : -1;
            }
            if (_modeKnown < 0)
            {
                return Unknown;
            }
            if (!ScanForRunnableNeighbour(out bool found))
            {
                return Unknown;
            }
            return found || CountOwnRunnableThreads() > OversubscribedFactor * _cores ? SomeoneElse : NobodyElse;
        }
        catch (Exception exception) when (exception is DllNotFoundException or EntryPointNotFoundException)
        {
            Volatile.Write(ref _modeKnown, -1); // a C library without the directory calls: never known here
            return Unknown;
        }
    }

    /// <summary>
    /// Whether the session is the scheduling group, from the contents of /proc/self/cgroup, whether autogroups are on
    /// (/proc/sys/kernel/sched_autogroup_enabled) and whether the cgroup v2 directory the process sees as its own has a
    /// <c>cpu.weight</c> file (only a non-root cgroup has one).
    /// </summary>
    public static bool SessionIsTheGroup(string cgroupText, bool autogroupsOn, bool unifiedRootHasCpuWeight)
    {
        if (!autogroupsOn)
        {
            return false;
        }
        string? cpuPath = null;
        string? unifiedPath = null;
        foreach (string line in cgroupText.Split('\n', StringSplitOptions.RemoveEmptyEntries))
        {
            // hierarchy-ID:controller-list:path; the path may itself contain ':'.
            int first = line.IndexOf(':');
            int second = first < 0 ? -1 : line.IndexOf(':', first + 1);
            if (second < 0)
            {
                return false;
            }
            string controllers = line[(first + 1)..second];
            string path = line[(second + 1)..];
            if (line.StartsWith("0::", StringComparison.Ordinal))
            {
                unifiedPath = path;
            }
            else if (Array.IndexOf(controllers.Split(','), "cpu") >= 0)
            {
                cpuPath = path;
            }
        }
        if (cpuPath is not null)
        {
            return cpuPath == "/"; // cgroup v1 with the cpu controller
        }
        return unifiedPath == "/" && !unifiedRootHasCpuWeight;
    }

    private bool SessionIsTheGroup()
    {
        string? cgroup = ReadSmallFile(_procRoot + "/self/cgroup");
        string? autogroup = ReadSmallFile(_procRoot + "/sys/kernel/sched_autogroup_enabled");
        return cgroup is not null && autogroup is not null
            && SessionIsTheGroup(cgroup, autogroup.Trim() == "1", FileExists("/sys/fs/cgroup/cpu.weight"));
    }

    private bool TryReadOwnSession()
    {
        string? stat = ReadSmallFile(_procRoot + "/self/stat");
        if (stat is null || !TryParseStat(Encoding.ASCII.GetBytes(stat), out _, out int session, out _))
        {
            return false;
        }
        _ownPid = Environment.ProcessId;
        _ownSession = session;
        return session > 0;
    }

    /// <summary>
    /// Reads a /proc/&lt;pid&gt;/stat line: the state (the third field), the session (the sixth) and the CPU time of all
    /// the process's threads in clock ticks (the fourteenth and fifteenth, user and system). The second field, the command
    /// name in parentheses, may contain spaces and parentheses, so the fields are counted from the last ')'.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    public static bool TryParseStat(ReadOnlySpan<byte> text, out byte state, out int session, out long cpuTicks)
    {
        state = 0;
        session = 0;
        cpuTicks = 0;
        int close = text.LastIndexOf((byte)')');
        if (close < 0 || close + 2 >= text.Length)
        {
            return false;
        }
        ReadOnlySpan<byte> rest = text[(close + 2)..]; // "S ppid pgrp session tty_nr tpgid flags ..."
        for (int field = 3; !rest.IsEmpty; field++)
        {
            int space = rest.IndexOf((byte)' ');
            ReadOnlySpan<byte> value = space < 0 ? rest.TrimEnd((byte)'\n') : rest[..space];
            if (field == 3)
            {
                if (value.Length != 1)
                {
                    return false;
                }
                state = value[0];
            }
            else if (field == 6)
            {
                if (!TryParseNumber(value, out long number) || number > int.MaxValue)
                {
                    return false;
                }
                session = (int)number;
            }
            else if (field is 14 or 15)
            {
                if (!TryParseNumber(value, out long ticks))
                {
                    return false;
                }
                cpuTicks += ticks;
                if (field == 15)
                {
                    return true;
                }
            }
            if (space < 0)
            {
                break;
            }
            rest = rest[(space + 1)..];
        }
        return false;
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static bool TryParseNumber(ReadOnlySpan<byte> text, out long value)
    {
        value = 0;
        if (text.IsEmpty || text.Length > 18)
        {
            return false;
        }
        foreach (byte b in text)
        {
            if (b < (byte)'0' || b > (byte)'9')
            {
                return false;
            }
            value = (value * 10) + (b - '0');
        }
        return true;
    }

    private static string? ReadSmallFile(string path)
    {
        Span<byte> buffer = stackalloc byte[1024];
        int read = ProcFiles.Read(path, buffer);
        return read < 0 ? null : Encoding.ASCII.GetString(buffer[..read]);
    }

    private static bool FileExists(string path) => ProcFiles.Read(path, stackalloc byte[1]) >= 0;

    /// <summary>
    /// Looks at every process of the session but this one: false when /proc cannot be listed; otherwise
    /// <paramref name="found"/> tells whether one of them wants a core: its main thread runnable now, or all its threads
    /// together using a quarter of a core or more since the previous check (if that was at most
    /// <see cref="BaselineTicks"/> ago), which catches a multithreaded process whose main thread waits while others work.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private bool ScanForRunnableNeighbour(out bool found)
    {
        _scanAt = Stopwatch.GetTimestamp();
        if (_baselines.Count > MaxBaselines)
        {
            _baselines.Clear(); // processes that have exited since: start over
        }
        Span<byte> buffer = stackalloc byte[512];
        return ProcFiles.ForEachNumericEntry(_procRoot, this, static (self, pid, buffer) => self.IsBusyNeighbour(pid, buffer), buffer, out found);
    }

    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private bool IsBusyNeighbour(int pid, Span<byte> buffer)
    {
        if (pid == _ownPid)
        {
            return false;
        }
        int read = ProcFiles.Read(_procRoot + "/" + pid.ToString(CultureInfo.InvariantCulture) + "/stat", buffer);
        if (read <= 0 || !TryParseStat(buffer[..read], out byte state, out int session, out long cpuTicks) || session != _ownSession)
        {
            return false; // gone meanwhile, or another session
        }
        bool busy = state == (byte)'R';
        if (_baselines.TryGetValue(pid, out (long CpuTicks, long At) baseline) && _scanAt - baseline.At <= BaselineTicks)
        {
            double cpuSeconds = (cpuTicks - baseline.CpuTicks) / ClockTicksPerSecond;
            double wallSeconds = (double)(_scanAt - baseline.At) / Stopwatch.Frequency;
            busy |= cpuSeconds >= BusyCores * wallSeconds;
        }
        _baselines[pid] = (cpuTicks, _scanAt);
        return busy;
    }

    /// <summary>
    /// This process's threads that are running or waiting for a core (0 when they cannot be read). Many more of them than
    /// the cores (<see cref="OversubscribedFactor"/>), and a yield only rotates the cores among them: a pool whose threads
    /// were added for blocked work that now all runs, not a hand-off between two of them. Measured there (a backlog of a
    /// million items drained by a pool grown to some 70 threads, beside two busy loops of other sessions, 2 cores),
    /// searchers that spun in place of yields drained it in 181-257 ms, searchers that kept yielding in 250-303 ms.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private int CountOwnRunnableThreads()
    {
        Span<byte> buffer = stackalloc byte[512];
        _ownRunnable = 0;
        _ownTaskDirectory = _procRoot + "/" + _ownPid.ToString(CultureInfo.InvariantCulture) + "/task";
        ProcFiles.ForEachNumericEntry(_ownTaskDirectory, this, static (self, tid, buffer) =>
        {
            int read = ProcFiles.Read(self._ownTaskDirectory + "/" + tid.ToString(CultureInfo.InvariantCulture) + "/stat", buffer);
            if (read > 0 && KernelThreadState.Parse(buffer[..read]) == KernelThreadState.State.Runnable)
            {
                self._ownRunnable++;
            }
            return false;
        }, buffer, out _);
        return _ownRunnable;
    }
}
