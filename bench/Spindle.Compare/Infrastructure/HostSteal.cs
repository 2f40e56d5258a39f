using System;
using System.Globalization;
using System.IO;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// How much CPU time the hypervisor gave to other guests while the comparison ran: the <c>steal</c> column of the first
/// line of <c>/proc/stat</c>, as a share of all the machine's CPU time over the same interval. A virtual machine's vCPU
/// that the host deschedules runs nothing, so a woken thread waits and a timed loop stalls whatever the pool does; on the
/// 2-core development VM two quick runs of nearly the same build read 11 and 15 rows marked <c>wider</c>, and the host
/// took 3.3 % of the guest's CPU time over the 23 minutes around the second (0.4 % over the hours before). The report
/// prints the share so that a run on a contended host can be told from one on a quiet host.
/// </summary>
internal readonly record struct HostSteal(long Total, long Steal)
{
    /// <summary>The machine's CPU time counters now, or null where there is no /proc/stat (not Linux, or unreadable).</summary>
    public static HostSteal? Take()
    {
        if (!OperatingSystem.IsLinux())
        {
            return null;
        }
        try
        {
            using var reader = new StreamReader("/proc/stat");
            return Parse(reader.ReadLine());
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return null;
        }
    }

    /// <summary>
    /// The counters of <c>/proc/stat</c>'s first line (<c>cpu user nice system idle iowait irq softirq steal guest
    /// guest_nice</c>, in USER_HZ ticks): the sum of the first eight as the total (guest time is already counted in user
    /// time), and the eighth, steal. Null for a line that is not such a line, or one of a kernel that has no steal column.
    /// </summary>
    public static HostSteal? Parse(string? line)
    {
        if (line is null || !line.StartsWith("cpu ", StringComparison.Ordinal))
        {
            return null;
        }
        string[] fields = line[4..].Split(' ', StringSplitOptions.RemoveEmptyEntries);
        if (fields.Length < 8)
        {
            return null;
        }
        long total = 0;
        long value = 0;
        for (int i = 0; i < 8; i++)
        {
            if (!long.TryParse(fields[i], NumberStyles.None, CultureInfo.InvariantCulture, out value))
            {
                return null;
            }
            total += value;
        }
        return new HostSteal(total, Steal: value); // the eighth column
    }

    /// <summary>The share (0-1) of the CPU time between <paramref name="start"/> and <paramref name="end"/> that was stolen; null without two readings or time between them.</summary>
    public static double? Share(HostSteal? start, HostSteal? end)
    {
        if (start is not { } first || end is not { } last || last.Total <= first.Total)
        {
            return null;
        }
        return (double)(last.Steal - first.Steal) / (last.Total - first.Total);
    }

    /// <summary>"3.4 % of the machine's CPU time during the runs (/proc/stat)", or "not available".</summary>
    public static string Text(double? share) => share is { } value
        ? string.Create(CultureInfo.InvariantCulture, $"{value * 100:F1} % of the machine's CPU time during the runs (/proc/stat)")
        : "not available";
}
