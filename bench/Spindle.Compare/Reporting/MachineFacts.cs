using System;
using System.IO;
using System.Runtime.InteropServices;
using Spindle.Compare.Infrastructure;

namespace Spindle.Compare.Reporting;

/// <summary>
/// Where and how a comparison ran: printed at the start and written into the Markdown report. <paramref name="BackgroundLoad"/>
/// is the number of CPU-burning processes that ran beside every child (<c>--background-load</c>, <see cref="Runner.BackgroundLoad"/>).
/// </summary>
internal sealed record MachineFacts(string Machine, string Os, string Dotnet, int Cores, DateTimeOffset Date, string Mode, int BackgroundLoad)
{
    /// <summary>
    /// The share of the machine's CPU time that a hypervisor gave elsewhere while the runs went on (<see cref="HostSteal"/>):
    /// set once they have ended; null before, and where it cannot be read.
    /// </summary>
    public double? StealShare { get; init; }

    /// <summary>The steal share as the report prints it.</summary>
    public string StealText => HostSteal.Text(StealShare);

    public static MachineFacts Collect(bool full, int runs, TimeSpan timeout, int backgroundLoad) => new(
        ReadCpuModel(),
        $"{RuntimeInformation.OSDescription} ({RuntimeInformation.OSArchitecture})",
        RuntimeInformation.FrameworkDescription,
        Environment.ProcessorCount,
        DateTimeOffset.Now,
        $"{(full ? "full" : "quick")}, {runs} run(s) per pool (fewer where a scenario says so), one child process per run, "
            + $"pools alternating; workstation non-concurrent GC; child timeout {timeout.TotalSeconds:F0} s",
        backgroundLoad);

    public string DateText => Date.ToString("yyyy-MM-dd HH:mm:ss zzz", Formats.Culture);

    /// <summary>"none", or "2 CPU-burning processes beside every run".</summary>
    public string LoadText => BackgroundLoad switch
    {
        0 => "none",
        1 => "1 CPU-burning process beside every run",
        int count => $"{count} CPU-burning processes beside every run",
    };

    public void Write(TextWriter writer)
    {
        writer.WriteLine($"  Machine:  {Machine}");
        writer.WriteLine($"  OS:       {Os}");
        writer.WriteLine($"  .NET:     {Dotnet}");
        writer.WriteLine($"  Cores:    {Cores}");
        writer.WriteLine($"  Date:     {DateText}");
        writer.WriteLine($"  Mode:     {Mode}");
        writer.WriteLine($"  Load:     {LoadText}");
    }

    /// <summary>The CPU model from /proc/cpuinfo on Linux; the architecture elsewhere.</summary>
    private static string ReadCpuModel()
    {
        if (OperatingSystem.IsLinux())
        {
            try
            {
                foreach (string line in File.ReadLines("/proc/cpuinfo"))
                {
                    if (line.StartsWith("model name", StringComparison.Ordinal) && line.IndexOf(':') is int colon and > 0)
                    {
                        return line[(colon + 1)..].Trim();
                    }
                }
            }
            catch (IOException)
            {
            }
        }
        return RuntimeInformation.ProcessArchitecture.ToString();
    }
}
