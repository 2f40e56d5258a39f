using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;

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
/// Summed per thread between two snapshots: a thread started in between counts from zero; one that exited in between
/// is not counted (its figures go with it). Elsewhere than Linux, or where <c>/proc</c> is not readable, both figures
/// are unavailable; migrations alone are where <c>sched</c> is missing.
/// </remarks>
internal static class ThreadSchedule
{
    private const string TaskDirectory = "/proc/self/task";
    private const string MigrationsField = "se.nr_migrations";

    /// <summary>Each live thread's figures at one moment, by kernel thread id; null where none could be read.</summary>
    public sealed class Snapshot
    {
        internal Snapshot(Dictionary<int, (long WaitNanoseconds, long? Migrations)> threads) => Threads = threads;

        internal Dictionary<int, (long WaitNanoseconds, long? Migrations)> Threads { get; }
    }

    /// <summary>Reads every thread's figures now; null where the process's threads cannot be read.</summary>
    public static Snapshot? Take()
    {
        if (!OperatingSystem.IsLinux())
        {
            return null;
        }
        string[] directories;
        try
        {
            directories = Directory.GetDirectories(TaskDirectory);
        }
        catch (Exception exception) when (exception is IOException or UnauthorizedAccessException)
        {
            return null;
        }
        var threads = new Dictionary<int, (long, long?)>(directories.Length);
        foreach (string directory in directories)
        {
            if (!int.TryParse(Path.GetFileName(directory), NumberStyles.None, CultureInfo.InvariantCulture, out int tid))
            {
                continue;
            }
            try
            {
                if (ParseWait(File.ReadAllText(Path.Combine(directory, "schedstat"))) is not { } wait)
                {
                    continue;
                }
                threads[tid] = (wait, ReadMigrations(Path.Combine(directory, "sched")));
            }
            catch (Exception exception) when (exception is IOException or UnauthorizedAccessException)
            {
                // The thread exited between the listing and the read: it is not counted.
            }
        }
        return threads.Count == 0 ? null : new Snapshot(threads);
    }

    /// <summary>
    /// The waiting time (ms) and migrations between <paramref name="start"/> and <paramref name="end"/>, summed over the
    /// threads alive at <paramref name="end"/>; null where either snapshot is, migrations null where a thread lacks them.
    /// </summary>
    public static (double? WaitMilliseconds, long? Migrations) Between(Snapshot? start, Snapshot? end)
    {
        if (start is null || end is null)
        {
            return (null, null);
        }
        long wait = 0;
        long? migrations = 0;
        foreach ((int tid, (long endWait, long? endMigrations)) in end.Threads)
        {
            (long startWait, long? startMigrations) = start.Threads.TryGetValue(tid, out var before) ? before : (0L, 0L);
            wait += Math.Max(0, endWait - startWait);
            migrations = endMigrations is { } m && startMigrations is { } s && migrations is { } sum ? sum + Math.Max(0, m - s) : null;
        }
        return (wait / 1e6, migrations);
    }

    /// <summary><c>schedstat</c>: three numbers, the time on a core and the time waiting for one (ns), then the slices.</summary>
    internal static long? ParseWait(string schedstat)
    {
        string[] fields = schedstat.Split(' ', StringSplitOptions.RemoveEmptyEntries);
        return fields.Length >= 2 && long.TryParse(fields[1], NumberStyles.None, CultureInfo.InvariantCulture, out long wait) ? wait : null;
    }

    /// <summary><c>sched</c>: one "name : value" line per figure; the migrations count, or null where the line is missing.</summary>
    internal static long? ParseMigrations(string sched)
    {
        foreach (string line in sched.Split('\n'))
        {
            int colon = line.IndexOf(':', StringComparison.Ordinal);
            if (colon > 0 && line.AsSpan(0, colon).Trim().SequenceEqual(MigrationsField)
                && long.TryParse(line.AsSpan(colon + 1).Trim(), NumberStyles.None, CultureInfo.InvariantCulture, out long value))
            {
                return value;
            }
        }
        return null;
    }

    private static long? ReadMigrations(string path)
    {
        try
        {
            return ParseMigrations(File.ReadAllText(path));
        }
        catch (FileNotFoundException)
        {
            return null; // a kernel without scheduler statistics
        }
    }
}
