using System;
using System.Diagnostics.Tracing;
using System.Linq;
using System.Threading;
using Spindle.Tests.Telemetry;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// How the thread controller ramps when work starves: with the cores idle (the workers blocked), one step adds a thread
/// per waiting item. Runs alone (the process-wide collection), since the controller judges the process's CPU use and
/// other tests computing beside it would make the cores look busy.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolRampTests
{
    [Fact]
    public void ABacklogBehindBlockedWorkers_WithTheCoresIdle_GetsAThreadPerWaitingItemInOneStep()
    {
        string name = $"{nameof(WorkerPoolRampTests)}-{Guid.NewGuid():N}";
        using var listener = new EventSourceTests.Listener(name);
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = name,
            MinThreads = 1,
            MaxThreads = 128,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        const int backlog = 40;
        int blockers = Environment.ProcessorCount;
        using var gate = new ManualResetEventSlim();
        using var started = new CountdownEvent(blockers + backlog);
        try
        {
            for (int i = 0; i < blockers + backlog; i++)
            {
                pool.QueueUserWorkItem(_ => { started.Signal(); gate.Wait(Waits.MustHappen); });
            }
            Waits.For(started, "every blocking item to start, each on its own thread");
        }
        finally
        {
            gate.Set();
        }

        Waits.Until(() => listener.Events.Any(e => e.EventName == "StarvationDetected"), "the starvation traced");
        EventWrittenEventArgs first = listener.Events.First(e => e.EventName == "StarvationDetected");
        long pending = (long)listener.Payload(first, "PendingCount")!;
        int added = (int)listener.Payload(first, "AddedThreads")!;
        int threads = (int)listener.Payload(first, "ThreadCount")!;
        Assert.True(pending > 0, $"pending {pending}");
        // One step covers what was waiting (a ramp from one would have added a single thread here).
        Assert.Equal(Math.Min(pending, 128 - threads), added);
    }
}
