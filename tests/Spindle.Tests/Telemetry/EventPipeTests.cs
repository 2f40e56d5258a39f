using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.IO;
using System.Linq;
using System.Threading.Tasks;
using Microsoft.Diagnostics.NETCore.Client;
using Microsoft.Diagnostics.Tracing;
using Xunit;

namespace Spindle.Tests.Telemetry;

/// <summary>
/// The <c>Spindle</c> event source seen as an operator's tool sees it: an EventPipe session opened on another process
/// (Spindle.TelemetryChild) through its diagnostics port, the stream parsed by TraceEvent, which decodes the events
/// with the metadata the runtime writes into it, not with anything of this assembly.
/// </summary>
public sealed class EventPipeTests
{
    /// <summary>One event as parsed from the stream (TraceEvent reuses its objects, so the callback copies).</summary>
    private sealed record ParsedEvent(string ProviderName, string EventName, int Id, TraceEventLevel Level, long Keywords,
        IReadOnlyList<string> PayloadNames, IReadOnlyDictionary<string, object> Payload)
    {
        public override string ToString() =>
            $"{ProviderName}/{EventName} #{Id} ({string.Join(", ", PayloadNames.Select(n => $"{n}={Payload[n]}"))})";
    }

    /// <summary>
    /// Runs Spindle.TelemetryChild under an EventPipe session that enables the provider with <paramref name="keywords"/>
    /// at Verbose, and returns the events of its pool (at least one).
    /// </summary>
    private static List<ParsedEvent> TraceChild(string poolName, long keywords)
    {
        string childDll = Path.Combine(AppContext.BaseDirectory, "Spindle.TelemetryChild.dll");
        Assert.True(File.Exists(childDll), $"{childDll} is missing: the test project references Spindle.TelemetryChild to copy it there.");
        var start = new ProcessStartInfo(ChildProcesses.DotnetHost())
        {
            RedirectStandardInput = true,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        start.ArgumentList.Add(childDll);
        start.ArgumentList.Add(poolName);
        start.Environment["DOTNET_EnableDiagnostics"] = "1"; // in case the test host's environment turned the port off

        var events = new ConcurrentQueue<ParsedEvent>();
        using var child = Process.Start(start)!;
        Task<string> stderr = child.StandardError.ReadToEndAsync();
        EventPipeSession? session = null;
        try
        {
            string ready = ReadLine(child, stderr, "the child's ready line");
            Assert.Equal($"ready {child.Id}", ready);

            // Returns once the runtime has enabled the provider: everything the child does from now on is traced.
            session = new DiagnosticsClient(child.Id).StartEventPipeSession(
                [new EventPipeProvider("Spindle", EventLevel.Verbose, keywords)], requestRundown: false);
            EventPipeSession stream = session;
            Task processing = Task.Run(() =>
            {
                using var source = new EventPipeEventSource(stream.EventStream);
                source.Dynamic.All += e => events.Enqueue(Copy(e));
                source.Process(); // until the session stops and the runtime closes the stream
            });

            child.StandardInput.WriteLine("go");
            child.StandardInput.Flush();
            Assert.Equal("done", ReadLine(child, stderr, "the child's done line"));

            session.Stop(); // the runtime flushes what the session holds, then ends the stream
            Assert.True(processing.Wait(Waits.MustHappen), $"The event stream did not end within {Waits.MustHappen.TotalSeconds} s.");
            child.StandardInput.Close(); // lets the child exit
            Assert.True(child.WaitForExit(Waits.MustHappen), "The child did not exit.");
            Assert.True(child.ExitCode == 0, $"The child failed: exit code {child.ExitCode}; stderr: {stderr.Result}");
        }
        finally
        {
            if (!child.HasExited)
            {
                child.Kill(entireProcessTree: true);
                child.WaitForExit();
            }
            session?.Dispose();
        }

        List<ParsedEvent> ours = events.Where(e => e.Payload.TryGetValue("PoolName", out object? pool) && (string)pool == poolName).ToList();
        Assert.True(ours.Count > 0, $"No Spindle event of pool {poolName} in the stream, which held: {string.Join("; ", events)}");
        return ours;
    }

    [Fact]
    public void AnEventPipeSession_OnAChildProcess_ReadsItsSpindleEvents()
    {
        string poolName = $"{nameof(EventPipeTests)}-{Guid.NewGuid():N}";
        List<ParsedEvent> ours = TraceChild(poolName, keywords: -1);

        Assert.All(ours, e => Assert.Equal("Spindle", e.ProviderName));
        Assert.All(ours, e => Assert.Equal("PoolName", e.PayloadNames[0]));
        // No order is asserted: the stream orders events by their time stamps, and the pool writes them from several
        // threads after the fact (WorkItemException after the handlers ran, ThreadInjected once the new thread has
        // started, which may be after it ran the item).

        ParsedEvent injected = Assert.Single(ours, e => e.EventName == "ThreadInjected");
        Assert.Equal(1, injected.Id);
        Assert.Equal(TraceEventLevel.Informational, injected.Level);
        Assert.Equal(0x1, injected.Keywords & 0x7); // Threads
        Assert.Equal(["PoolName", "Reason", "ThreadCount"], injected.PayloadNames);
        Assert.Equal(nameof(ThreadInjectionReason.Demand), injected.Payload["Reason"]);
        Assert.Equal(1, injected.Payload["ThreadCount"]);

        ParsedEvent exception = Assert.Single(ours, e => e.EventName == "WorkItemException");
        Assert.Equal(6, exception.Id);
        Assert.Equal(TraceEventLevel.Error, exception.Level);
        Assert.Equal(0x0, exception.Keywords & 0x7); // an Error event has no keyword
        Assert.Equal(["PoolName", "ExceptionType", "ExceptionMessage", "Handled"], exception.PayloadNames);
        Assert.Equal(typeof(InvalidOperationException).FullName, exception.Payload["ExceptionType"]);
        Assert.Equal("Spindle telemetry-child failure", exception.Payload["ExceptionMessage"]);
        Assert.Equal(true, exception.Payload["Handled"]);

        ParsedEvent started = Assert.Single(ours, e => e.EventName == "ShutdownStarted");
        Assert.Equal(7, started.Id);
        Assert.Equal(0x4, started.Keywords & 0x7); // Lifetime
        Assert.Equal(["PoolName", "Mode"], started.PayloadNames);
        Assert.Equal(nameof(ShutdownMode.Drain), started.Payload["Mode"]);

        ParsedEvent finished = Assert.Single(ours, e => e.EventName == "ShutdownFinished");
        Assert.Equal(8, finished.Id);
        Assert.Equal(["PoolName", "CompletedCount", "CancelledCount", "RedirectedCount"], finished.PayloadNames);
        Assert.Equal(2L, finished.Payload["CompletedCount"]);
        Assert.Equal(0L, finished.Payload["CancelledCount"]);
        Assert.Equal(0L, finished.Payload["RedirectedCount"]);
    }

    [Fact]
    public void ASessionWithoutKeywords_ReceivesTheErrorEvents()
    {
        // What "dotnet-trace collect --providers Spindle" asks for: the provider at Verbose with keywords 0, which
        // enables the events that have no keyword (Warning and Error) and none of the others.
        string poolName = $"{nameof(EventPipeTests)}-{Guid.NewGuid():N}";
        List<ParsedEvent> ours = TraceChild(poolName, keywords: 0);

        ParsedEvent exception = Assert.Single(ours, e => e.EventName == "WorkItemException");
        Assert.Equal(TraceEventLevel.Error, exception.Level);
        Assert.Equal(typeof(InvalidOperationException).FullName, exception.Payload["ExceptionType"]);
        Assert.DoesNotContain(ours, e => e.EventName is "ThreadInjected" or "ShutdownStarted" or "ShutdownFinished");
    }

    /// <summary>The child's next line of standard output, within the must-happen bound.</summary>
    private static string ReadLine(Process child, Task<string> stderr, string what)
    {
        Task<string?> line = child.StandardOutput.ReadLineAsync();
        if (!line.Wait(Waits.MustHappen))
        {
            Assert.Fail($"Not within {Waits.MustHappen.TotalSeconds} s: {what}.");
        }
        if (line.Result is null)
        {
            child.WaitForExit(Waits.MustHappenMilliseconds);
            Assert.Fail($"The child closed its output before {what}: exit code {(child.HasExited ? child.ExitCode : -1)}; stderr: "
                + (stderr.Wait(Waits.MustHappen) ? stderr.Result : "(not read)"));
        }
        return line.Result;
    }

    private static ParsedEvent Copy(TraceEvent e)
    {
        string[] names = e.PayloadNames ?? [];
        var payload = new Dictionary<string, object>(names.Length);
        for (int i = 0; i < names.Length; i++)
        {
            payload[names[i]] = e.PayloadValue(i);
        }
        return new ParsedEvent(e.ProviderName, e.EventName, (int)e.ID, e.Level, (long)e.Keywords, names, payload);
    }
}
