using System;
using System.Diagnostics;
using System.IO;
using System.Text;
using System.Threading;
using Spindle.Primitives;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// <see cref="SchedulingGroup"/>: the stat line's fields, when the session is the scheduling group, a scan over a
/// /proc-shaped directory (processes of the session and of others, a member whose main thread waits while its CPU time
/// grows, this process's own runnable threads against the cores), the answer kept for its interval, and a real busy
/// process of the test's own session.
/// </summary>
public sealed class SchedulingGroupTests
{
    private const int OwnPid = 100;
    private const int OwnSession = 50;

    [Fact]
    public void AStatLine_GivesTheStateTheSessionAndTheCpuTicks_WhateverTheCommandName()
    {
        byte[] line = Encoding.ASCII.GetBytes(
            "4242 (my (odd) name) S 1 4240 4239 34816 4242 4194560 100 0 0 0 12000000000 3 0 0 20 0 7 0 12345 1000 200\n");
        Assert.True(SchedulingGroup.TryParseStat(line, out byte state, out int session, out long cpuTicks));
        Assert.Equal((byte)'S', state);
        Assert.Equal(4239, session);
        Assert.Equal(12_000_000_003, cpuTicks); // user and system, however long the process has run
    }

    [Theory]
    [InlineData("4242 (x) S 1 2 3")]
    [InlineData("4242 (x) SS 1 4240 4239 0 0 0 0 0 0 0 12 3 0")]
    [InlineData("4242 (x) S 1 4240 -1 0 0 0 0 0 0 0 12 3 0")]
    [InlineData("4242 (x) S 1 4240 4239 0 0 0 0 0 0 0 12 -3 0")]
    [InlineData("no parenthesis at all")]
    [InlineData("")]
    public void AnIncompleteOrMalformedStatLine_IsRejected(string text)
    {
        Assert.False(SchedulingGroup.TryParseStat(Encoding.ASCII.GetBytes(text), out _, out _, out _));
    }

    [Theory]
    [InlineData("12:cpu,cpuacct:/\n11:memory:/user.slice\n0::/\n", true, false, true)] // cgroup v1, root cpu group
    [InlineData("1:cpu:/\n2:cpuacct:/\n0::/\n", true, false, true)]
    [InlineData("2:cpu,cpuacct:/docker/abc\n0::/\n", true, false, false)] // a container's cgroup
    [InlineData("12:cpu,cpuacct:/\n", false, false, false)] // autogroups off
    [InlineData("0::/\n", true, false, true)] // cgroup v2, the real root
    [InlineData("0::/\n", true, true, false)] // cgroup v2, a namespaced container's own cgroup
    [InlineData("0::/user.slice/user-0.slice/session-1.scope\n", true, false, false)]
    [InlineData("garbage\n", true, false, false)]
    public void TheSessionIsTheGroup_OnlyInTheRootCpuCgroupWithAutogroupsOn(
        string cgroup, bool autogroupsOn, bool unifiedRootHasCpuWeight, bool expected)
    {
        Assert.Equal(expected, SchedulingGroup.SessionIsTheGroup(cgroup, autogroupsOn, unifiedRootHasCpuWeight));
    }

    [Fact]
    public void AScan_SeesOnlyTheSessionsOtherProcesses_AndAMemberUsingCpuWhileItsMainThreadWaits()
    {
        if (!OperatingSystem.IsLinux() || IntPtr.Size != 8)
        {
            Assert.Null(new SchedulingGroup(Path.GetTempPath(), OwnPid, OwnSession, answerTicks: 0, cores: 2).CoresWantedInGroup());
            return;
        }
        WithFakeProc(root =>
        {
            WriteStat(root, $"{OwnPid}", OwnPid, 'R', OwnSession, cpuTicks: 0); // this process: never counted
            WriteStat(root, "101", 101, 'S', OwnSession, cpuTicks: 500); // the session's shell, asleep
            WriteStat(root, "102", 102, 'R', 60, cpuTicks: 0); // a busy process of another session
            WriteStat(root, "103", 103, 'S', OwnSession, cpuTicks: 1_000); // a member whose main thread waits
            Directory.CreateDirectory(Path.Combine(root, "self")); // not a process entry
            var group = new SchedulingGroup(root, OwnPid, OwnSession, answerTicks: 0, cores: 2);
            Assert.False(group.CoresWantedInGroup());
            Assert.False(group.CoresWantedInGroup()); // nobody used any CPU since

            // Its other threads work: ten seconds of CPU in the few milliseconds since the previous check.
            WriteStat(root, "103", 103, 'S', OwnSession, cpuTicks: 2_000);
            Assert.True(group.CoresWantedInGroup());
            Assert.Equal(3, group.CheckCount);

            // Its main thread runs: seen at once, with no earlier reading.
            var fresh = new SchedulingGroup(root, OwnPid, OwnSession, answerTicks: 0, cores: 2);
            Assert.False(fresh.CoresWantedInGroup());
            WriteStat(root, "104", 104, 'R', OwnSession, cpuTicks: 0);
            Assert.True(fresh.CoresWantedInGroup());
        });
    }

    [Fact]
    public void MoreThanTwiceAsManyRunnableThreadsOfThisProcessAsCores_CountAsWantingCores()
    {
        if (!OperatingSystem.IsLinux() || IntPtr.Size != 8)
        {
            return; // nothing is answered elsewhere (the scan test asserts so)
        }
        WithFakeProc(root =>
        {
            WriteStat(root, $"{OwnPid}", OwnPid, 'R', OwnSession, cpuTicks: 0);
            WriteStat(root, $"{OwnPid}/task/{OwnPid}", OwnPid, 'R', OwnSession, cpuTicks: 0);
            WriteStat(root, $"{OwnPid}/task/{OwnPid + 1}", OwnPid + 1, 'R', OwnSession, cpuTicks: 0);
            WriteStat(root, $"{OwnPid}/task/{OwnPid + 2}", OwnPid + 2, 'S', OwnSession, cpuTicks: 0);
            var group = new SchedulingGroup(root, OwnPid, OwnSession, answerTicks: 0, cores: 1);
            Assert.False(group.CoresWantedInGroup()); // two runnable threads on one core: a hand-off, not a queue

            WriteStat(root, $"{OwnPid}/task/{OwnPid + 2}", OwnPid + 2, 'R', OwnSession, cpuTicks: 0);
            Assert.True(group.CoresWantedInGroup()); // three on one: a yield rotates the core among them
        });
    }

    [Fact]
    public void AnAnswer_StandsForItsInterval()
    {
        if (!OperatingSystem.IsLinux() || IntPtr.Size != 8)
        {
            return; // nothing is answered elsewhere (the scan test asserts so)
        }
        WithFakeProc(root =>
        {
            var group = new SchedulingGroup(root, OwnPid, OwnSession, answerTicks: Stopwatch.Frequency * 3_600, cores: 2);
            Assert.False(group.CoresWantedInGroup());
            WriteStat(root, "101", 101, 'R', OwnSession, cpuTicks: 0);
            Assert.False(group.CoresWantedInGroup()); // the hour-long answer stands
            Assert.Equal(1, group.CheckCount);
        });
    }

    [Fact]
    public void ABusyProcessOfThisSession_IsSeen_WhereTheSessionIsTheGroup()
    {
        // Cores enough that the test host's own threads never count: only the neighbour does.
        var group = new SchedulingGroup("/proc", ownPid: 0, ownSession: 0, answerTicks: 0, cores: 1_000_000);
        bool? before = group.CoresWantedInGroup();
        if (before is null)
        {
            // Not Linux, or a group this class does not know (a container's cgroup, autogroups off): it stays unknown.
            Assert.Null(group.CoresWantedInGroup());
            return;
        }
        // Started without a new session: the loop shares the test's session, hence its autogroup.
        using var burner = Process.Start(new ProcessStartInfo("sh", ["-c", "while :; do :; done"]) { UseShellExecute = false })!;
        try
        {
            var deadline = Stopwatch.StartNew();
            bool seen = false;
            while (!seen && deadline.Elapsed < TimeSpan.FromSeconds(30))
            {
                seen = group.CoresWantedInGroup() == true;
                Thread.Sleep(10);
            }
            Assert.True(seen, "A busy loop of the test's own session was not seen within 30 s.");
        }
        finally
        {
            burner.Kill();
            burner.WaitForExit();
        }
    }

    /// <summary>Runs <paramref name="body"/> over an empty /proc-shaped temporary directory, removed afterwards.</summary>
    private static void WithFakeProc(Action<string> body)
    {
        string root = Directory.CreateTempSubdirectory("spindle-proc-").FullName;
        try
        {
            body(root);
        }
        finally
        {
            Directory.Delete(root, recursive: true);
        }
    }

    private static void WriteStat(string root, string relativeDirectory, int id, char state, int session, long cpuTicks)
    {
        string directory = Path.Combine(root, relativeDirectory);
        Directory.CreateDirectory(directory);
        File.WriteAllText(Path.Combine(directory, "stat"),
            $"{id} (proc {id}) {state} 1 {session} {session} 0 -1 4194560 0 0 0 0 {cpuTicks} 0 0 0 20 0 1 0 100 1000 50\n");
    }
}
