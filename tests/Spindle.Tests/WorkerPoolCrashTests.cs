using System;
using System.Diagnostics;
using System.IO;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The default <see cref="UnhandledExceptionPolicy.FailProcess"/> policy: an exception escaping a work item ends the
/// process. That would take the test host down, so each case runs Spindle.CrashHost in a child process.
/// </summary>
public sealed class WorkerPoolCrashTests
{
    private const string ItemFailureMessage = "Spindle crash-host failure"; // as thrown by Spindle.CrashHost

    private sealed record ChildResult(int ExitCode, string StandardOutput, string StandardError)
    {
        public override string ToString() => $"exit code {ExitCode}; stdout: {StandardOutput}; stderr: {StandardError}";
    }

    private static ChildResult RunCrashHost(string mode)
    {
        string hostDll = Path.Combine(AppContext.BaseDirectory, "Spindle.CrashHost.dll");
        Assert.True(File.Exists(hostDll), $"{hostDll} is missing: the test project references Spindle.CrashHost to copy it there.");
        var start = new ProcessStartInfo(ChildProcesses.DotnetHost())
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        start.ArgumentList.Add(hostDll);
        start.ArgumentList.Add(mode);
        start.Environment["DOTNET_DbgEnableMiniDump"] = "0"; // a crash is the expected outcome: no dump
        using var process = Process.Start(start)!;
        Task<string> stdout = process.StandardOutput.ReadToEndAsync();
        Task<string> stderr = process.StandardError.ReadToEndAsync();
        if (!process.WaitForExit(Waits.MustHappen))
        {
            process.Kill(entireProcessTree: true);
            Assert.Fail($"Spindle.CrashHost {mode} did not exit within {Waits.MustHappen.TotalSeconds} s.");
        }
        process.WaitForExit();
        return new ChildResult(process.ExitCode, stdout.Result, stderr.Result);
    }

    [Fact]
    public void UnhandledItemException_UnderTheDefaultPolicy_FailsTheProcess_WithTheExceptionAndItsStack()
    {
        ChildResult result = RunCrashHost("unhandled");
        Assert.True(result.ExitCode is not 0 and not 2 and not 3, $"Expected a crash: {result}");
        Assert.Contains("System.InvalidOperationException", result.StandardError, StringComparison.Ordinal);
        Assert.Contains(ItemFailureMessage, result.StandardError, StringComparison.Ordinal);
        Assert.Contains("ThrowFromWorkItem", result.StandardError, StringComparison.Ordinal); // the original stack
    }

    [Fact]
    public void UnhandledItemException_WithAThrowingHandler_StillFailsTheProcess()
    {
        ChildResult result = RunCrashHost("throwing-handler");
        Assert.True(result.ExitCode is not 0 and not 2 and not 3, $"Expected a crash: {result}");
        Assert.Contains(ItemFailureMessage, result.StandardError, StringComparison.Ordinal);
    }

    [Fact]
    public void HandledItemException_UnderTheDefaultPolicy_KeepsTheProcessAndThePoolAlive()
    {
        ChildResult result = RunCrashHost("handled");
        Assert.True(result.ExitCode == 0, $"Expected a clean exit: {result}");
        Assert.Contains("survived", result.StandardOutput, StringComparison.Ordinal);
    }

    [Fact]
    public void HandledItemException_AfterAThrowingHandler_KeepsTheProcessAlive()
    {
        ChildResult result = RunCrashHost("handled-after-throwing-handler");
        Assert.True(result.ExitCode == 0, $"Expected a clean exit: {result}");
        Assert.Contains("survived", result.StandardOutput, StringComparison.Ordinal);
    }
}
