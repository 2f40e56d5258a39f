using System;
using System.Collections.Concurrent;
using System.Linq;
using System.Text;
using System.Threading;

namespace Spindle.Tests.Fuzzing;

// What each thread runs right now, for the report of a wait that overran (a shutdown that did not return says which
// callbacks held it, and where the pools stood).
internal sealed partial class FuzzIteration
{
    /// <summary>Per managed thread id, the record whose callback that thread runs now (null between callbacks).</summary>
    private readonly ConcurrentDictionary<int, object?> _inFlight = new();

    /// <summary>Marks <paramref name="record"/> as running on this thread; returns what ran here before (an outer callback that inlined this one).</summary>
    private object? EnterCallback(object record)
    {
        int thread = Environment.CurrentManagedThreadId;
        _inFlight.TryGetValue(thread, out object? outer);
        _inFlight[thread] = record;
        return outer;
    }

    private void ExitCallback(object? outer) => _inFlight[Environment.CurrentManagedThreadId] = outer;

    /// <summary>The callbacks running now and the state of both pools, appended to the report of a wait that overran.</summary>
    private string DescribeStall()
    {
        RunStallHook();
        var text = new StringBuilder();
        object[] running = _inFlight.Values.Where(record => record is not null).Cast<object>().ToArray();
        text.Append("running now: ").Append(running.Length == 0 ? "nothing the fuzzer issued" : string.Join("; ", running.Take(12).Select(Describe)));
        text.Append("\n  pool: ").Append(_pool.DescribeInjectionState()).Append(", pending ").Append(_pool.PendingWorkItemCount)
            .Append(", shutdown started ").Append(_pool.IsShutdownStarted).Append("\n  visible work: ").Append(_pool.DescribeVisibleWork());
        foreach (LaneRecord lane in _lanes.Take(8))
        {
            text.Append("\n  ").Append(lane.Description).Append(": pending ").Append(lane.Lane.PendingWorkItemCount)
                .Append(", shutdown started ").Append(lane.Lane.IsShutdownStarted).Append(", waiting for room ").Append(Volatile.Read(ref lane.WaitingForRoom));
        }
        RunRecord[] openRuns = _runs.Where(run => run.Task is { IsCompleted: false }).ToArray();
        text.Append("\n  Run tasks not complete: ").Append(openRuns.Length).Append(openRuns.Length == 0 ? "" : " (")
            .Append(string.Join("; ", openRuns.Take(8).Select(run => $"{run.Label}: started {run.Starts}, completed {run.Completions}")))
            .Append(openRuns.Length == 0 ? "" : ")");
        text.Append("\n  built-in pool: threads ").Append(ThreadPool.ThreadCount).Append(", pending ").Append(ThreadPool.PendingWorkItemCount);
        return text.ToString();
    }

    /// <summary>
    /// With <c>SPINDLE_FUZZ_STALL_HOOK</c> set, runs that shell command (with <c>SPINDLE_FUZZ_PID</c> set to this process)
    /// and waits up to a minute for it: a developer's way to capture every thread's stack while the stall lasts, for
    /// example <c>dotnet-stack report -p $SPINDLE_FUZZ_PID &gt; stall.txt</c>.
    /// </summary>
    private static void RunStallHook()
    {
        if (Environment.GetEnvironmentVariable("SPINDLE_FUZZ_STALL_HOOK") is not { Length: > 0 } hook)
        {
            return;
        }
        var start = new System.Diagnostics.ProcessStartInfo("bash", ["-c", hook]) { UseShellExecute = false };
        start.Environment["SPINDLE_FUZZ_PID"] = Environment.ProcessId.ToString(System.Globalization.CultureInfo.InvariantCulture);
        using var process = System.Diagnostics.Process.Start(start);
        process?.WaitForExit(60_000);
    }

    private static string Describe(object record) => record switch
    {
        PlainItem item => item.Label,
        RunRecord run => run.Label,
        SchedRecord scheduled => scheduled.Label,
        PostRecord post => post.Label,
        TimerRecord timer => timer.Label,
        WaitRecord wait => wait.Label,
        _ => record.ToString() ?? record.GetType().Name,
    };
}
