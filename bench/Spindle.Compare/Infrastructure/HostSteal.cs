using System;
using System.Buffers.Text;
using System.Globalization;
using System.IO;
using System.Text;
using System.Threading;
using Microsoft.Win32.SafeHandles;

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
    public static HostSteal? Parse(string? line) => line is null ? null : Parse(Encoding.ASCII.GetBytes(line));

    /// <summary>
    /// As <see cref="Parse(string?)"/>, for the file's bytes as read (the first line is parsed, the rest ignored); allocates
    /// nothing.
    /// </summary>
    public static HostSteal? Parse(ReadOnlySpan<byte> text)
    {
        int end = text.IndexOf((byte)'\n');
        ReadOnlySpan<byte> line = end >= 0 ? text[..end] : text;
        if (!line.StartsWith("cpu "u8))
        {
            return null;
        }
        line = line[4..];
        long total = 0;
        long value = 0;
        for (int column = 0; column < 8; column++)
        {
            line = line.TrimStart((byte)' ');
            int length = line.IndexOf((byte)' ');
            ReadOnlySpan<byte> field = length >= 0 ? line[..length] : line;
            if (field.IsEmpty || field.IndexOfAnyExceptInRange((byte)'0', (byte)'9') >= 0
                || !Utf8Parser.TryParse(field, out value, out int consumed) || consumed != field.Length)
            {
                return null;
            }
            total += value;
            line = line[field.Length..];
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

    /// <summary>
    /// Reads the counters over and over through one descriptor of <c>/proc/stat</c> and one buffer, so that after its
    /// first read it allocates nothing: a child run's process figures count every byte the process allocates, and a
    /// reading is taken at each end of the measured part (<see cref="ProcessMeter"/>).
    /// </summary>
    public sealed class Reader
    {
        // /proc/stat's first line is the machine's (under 200 bytes with every counter at its largest); one read at
        // offset 0 makes the kernel render the file afresh and hands back at least that line.
        private readonly byte[] _buffer = new byte[512];
        private readonly Lock _lock = new();
        private SafeFileHandle? _stat;
        private bool _failed;

        /// <summary>The machine's counters now, or null where there is no /proc/stat (not Linux, or unreadable).</summary>
        public HostSteal? Take()
        {
            if (!OperatingSystem.IsLinux())
            {
                return null;
            }
            lock (_lock)
            {
                if (_failed)
                {
                    return null;
                }
                try
                {
                    _stat ??= File.OpenHandle("/proc/stat");
                    int length = RandomAccess.Read(_stat, _buffer, 0);
                    return Parse(_buffer.AsSpan(0, length));
                }
                catch (Exception e) when (e is IOException or UnauthorizedAccessException)
                {
                    _failed = true;
                    return null;
                }
            }
        }
    }
}
