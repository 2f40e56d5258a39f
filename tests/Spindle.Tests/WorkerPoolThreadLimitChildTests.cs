using System;
using System.Diagnostics;
using System.IO;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A burst of blocked items inside a real thread limit: Spindle.CrashHost's <c>thread-limit</c> mode runs in a child
/// cgroup of the v1 <c>pids</c> controller whose <c>pids.max</c> is far below what the burst would ask for. Every item
/// must complete, the pool must run an item afterwards, and the process must exit 0 (it used to abort with "Out of
/// memory."). Needs root and the v1 pids controller at /sys/fs/cgroup/pids; elsewhere the test says so and passes.
/// The per-commit form is small (pids.max 60, 200 items); SPINDLE_STRESS=1 adds the large one (pids.max 300, 1,000 items,
/// and an explicit MaxThreads far above the limit).
/// </summary>
public sealed class WorkerPoolThreadLimitChildTests(ITestOutputHelper output)
{
    private const string PidsRoot = "/sys/fs/cgroup/pids";

    [Fact]
    public void BlockedBurst_UnderPidsMax60_Completes_AndTheProcessExitsCleanly() =>
        RunInPidsCgroup(pidsMax: 60, items: 200, maxThreads: null);

    [Fact]
    public void BlockedBurst_WithAMaximumAboveTheLimit_SurvivesTheRefusals()
    {
        if (!Stress.Enabled)
        {
            return;
        }
        RunInPidsCgroup(pidsMax: 60, items: 200, maxThreads: 1000);
    }

    [Fact]
    public void LargeBlockedBurst_UnderPidsMax300_Completes()
    {
        if (!Stress.Enabled)
        {
            return;
        }
        RunInPidsCgroup(pidsMax: 300, items: 1000, maxThreads: null);
    }

    private void RunInPidsCgroup(int pidsMax, int items, int? maxThreads)
    {
        if (!OperatingSystem.IsLinux() || !Environment.IsPrivilegedProcess || !File.Exists(Path.Combine(PidsRoot, "cgroup.procs")))
        {
            output.WriteLine($"Skipped: needs root and the cgroup v1 pids controller at {PidsRoot}.");
            return;
        }
        string hostDll = Path.Combine(AppContext.BaseDirectory, "Spindle.CrashHost.dll");
        Assert.True(File.Exists(hostDll), $"{hostDll} is missing: the test project references Spindle.CrashHost to copy it there.");
        string cgroup = Path.Combine(PidsRoot, $"spindle-test-{Environment.ProcessId}-{Guid.NewGuid():N}");
        Directory.CreateDirectory(cgroup);
        try
        {
            File.WriteAllText(Path.Combine(cgroup, "pids.max"), pidsMax.ToString(System.Globalization.CultureInfo.InvariantCulture));
            // The shell moves itself into the cgroup, then becomes the child: every thread the child starts counts there.
            var start = new ProcessStartInfo("/bin/sh")
            {
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                UseShellExecute = false,
            };
            start.ArgumentList.Add("-c");
            start.ArgumentList.Add("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"");
            start.ArgumentList.Add(cgroup);
            start.ArgumentList.Add(ChildProcesses.DotnetHost());
            start.ArgumentList.Add(hostDll);
            start.ArgumentList.Add("thread-limit");
            start.ArgumentList.Add("spindle");
            start.ArgumentList.Add(items.ToString(System.Globalization.CultureInfo.InvariantCulture));
            start.ArgumentList.Add("100");
            if (maxThreads is int max)
            {
                start.ArgumentList.Add(max.ToString(System.Globalization.CultureInfo.InvariantCulture));
            }
            start.Environment["DOTNET_DbgEnableMiniDump"] = "0";
            using var process = Process.Start(start)!;
            Task<string> stdout = process.StandardOutput.ReadToEndAsync();
            Task<string> stderr = process.StandardError.ReadToEndAsync();
            TimeSpan bound = Waits.MustHappen * 4; // the child's own bound on the burst is 120 s
            if (!process.WaitForExit(bound))
            {
                process.Kill(entireProcessTree: true);
                Assert.Fail($"The child did not exit within {bound.TotalSeconds} s.");
            }
            process.WaitForExit();
            string result = $"exit code {process.ExitCode}; stdout: {stdout.Result}; stderr: {stderr.Result}";
            output.WriteLine($"pids.max={pidsMax} items={items}: {result}");
            Assert.True(process.ExitCode == 0, $"Expected a clean exit: {result}");
            Assert.Contains($"completed={items} ", stdout.Result, StringComparison.Ordinal);
        }
        finally
        {
            RemoveCgroup(cgroup);
        }
    }

    /// <summary>A cgroup can be removed once its processes have exited, which the kernel notes a moment after the wait.</summary>
    private static void RemoveCgroup(string cgroup)
    {
        var clock = Stopwatch.StartNew();
        while (true)
        {
            try
            {
                Directory.Delete(cgroup);
                return;
            }
            catch (IOException) when (clock.Elapsed < Waits.MustHappen)
            {
                System.Threading.Thread.Sleep(50);
            }
        }
    }
}
