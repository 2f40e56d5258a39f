using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// How long the process's threads waited for a core while they could have run: the second field of each thread's
/// <c>/proc/self/task/&lt;tid&gt;/schedstat</c> (nanoseconds spent runnable on a run queue, Linux), summed over the threads.
/// A woken worker that the kernel queues behind another process's thread until the next scheduler tick shows here as
/// milliseconds where a run that found a free core shows microseconds, so it tells apart the fast and slow runs of the
/// latency cases beside busy processes (a single run's percentile cannot say which thread waited).
/// </summary>
/// <remarks>
/// Threads that exit between two readings take their waits with them; threads started between them count from zero.
/// Reading allocates (a string per thread), so callers read outside the span whose allocation they measure.
/// </remarks>
internal static class RunnableWait
{
    private const string TaskDirectory = "/proc/self/task";

    /// <summary>Each live thread's total wait in nanoseconds, by thread id; null where the kernel does not publish it.</summary>
    public static Dictionary<int, long>? Read()
    {
        if (!OperatingSystem.IsLinux())
        {
            return null;
        }
        var waits = new Dictionary<int, long>();
        try
        {
            foreach (string directory in Directory.EnumerateDirectories(TaskDirectory))
            {
                if (!int.TryParse(Path.GetFileName(directory), NumberStyles.None, CultureInfo.InvariantCulture, out int tid))
                {
                    continue;
                }
                string text;
                try
                {
                    text = File.ReadAllText(Path.Combine(directory, "schedstat"));
                }
                catch (Exception e) when (e is IOException or UnauthorizedAccessException)
                {
                    continue; // the thread exited between the listing and the read
                }
                if (TryParseWait(text, out long wait))
                {
                    waits[tid] = wait;
                }
            }
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return null;
        }
        return waits.Count == 0 ? null : waits;
    }

    /// <summary>
    /// The wait between two readings, in milliseconds: for each thread alive at <paramref name="end"/>, its wait less its
    /// wait at <paramref name="start"/> (zero for a thread started since). Null where either reading is.
    /// </summary>
    public static double? Between(Dictionary<int, long>? start, Dictionary<int, long>? end)
    {
        if (start is null || end is null)
        {
            return null;
        }
        long total = 0;
        foreach ((int tid, long wait) in end)
        {
            // A thread id reused by a new thread after the old one exited would read lower than at the start: the new
            // thread's own wait is then all of it.
            long before = start.TryGetValue(tid, out long earlier) && earlier <= wait ? earlier : 0;
            total += wait - before;
        }
        return total / 1e6;
    }

    /// <summary>Parses <c>schedstat</c>'s "run-time wait-time timeslices" line; the wait is the second field.</summary>
    public static bool TryParseWait(string text, out long wait)
    {
        wait = 0;
        string[] fields = text.Split(' ', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries);
        return fields.Length >= 2 && long.TryParse(fields[1], NumberStyles.None, CultureInfo.InvariantCulture, out wait);
    }
}
