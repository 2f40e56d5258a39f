using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics.Tracing;
using System.Linq;
using System.Threading;
using Xunit;

namespace Spindle.Tests.Telemetry;

/// <summary>
/// The <c>Spindle</c> event source, read with an <see cref="EventListener"/>: the events a pool's decisions produce,
/// with the payload names tools key on, filtered to one pool.
/// </summary>
public sealed class EventSourceTests
{
    /// <summary>Records the Spindle events of one pool.</summary>
    internal sealed class Listener : EventListener
    {
        private readonly string _pool;

        /// <summary>Listens at <paramref name="level"/> for <paramref name="keywords"/> (all of them unless told).</summary>
        public Listener(string pool, EventLevel level = EventLevel.Verbose, EventKeywords keywords = EventKeywords.All)
        {
            _pool = pool;
            // The base constructor has enabled the source already (OnEventSourceCreated, before these fields were set):
            // enabling it again replaces that.
            foreach (EventSource source in EventSource.GetSources())
            {
                if (source.Name == "Spindle")
                {
                    EnableEvents(source, level, keywords);
                }
            }
        }

        public ConcurrentQueue<EventWrittenEventArgs> Events { get; } = new();

        protected override void OnEventSourceCreated(EventSource eventSource)
        {
            if (eventSource.Name == "Spindle")
            {
                EnableEvents(eventSource, EventLevel.Verbose, EventKeywords.All);
            }
        }

        protected override void OnEventWritten(EventWrittenEventArgs eventData)
        {
            // The base constructor can raise OnEventSourceCreated before _pool is set; events only come after.
            if (eventData.PayloadNames is { } names && names.Count > 0 && names[0] == "PoolName"
                && (string?)eventData.Payload![0] == _pool)
            {
                Events.Enqueue(eventData);
            }
        }

        public EventWrittenEventArgs Single(string eventName) => Assert.Single(Events, e => e.EventName == eventName);

        public object? Payload(EventWrittenEventArgs e, string name) => e.Payload![e.PayloadNames!.IndexOf(name)];
    }

    /// <summary>An exception type whose message is null, as a careless override can make it.</summary>
    private sealed class NullMessageException : Exception
    {
        public override string Message => null!;
    }

    [Fact]
    public void AnItemExceptionWithANullMessage_IsTraced_AndThePoolGoesOn()
    {
        string name = $"{nameof(EventSourceTests)}-{Guid.NewGuid():N}";
        using var listener = new Listener(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using var thrown = new ManualResetEventSlim();
        pool.UnhandledException += (_, _) => thrown.Set();
        pool.UnhandledException += (_, _) => throw new NullMessageException(); // a failing handler, traced without its message
        pool.QueueUserWorkItem(_ => throw new NullMessageException());
        Waits.For(thrown, "the item's exception");
        using var after = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => after.Set());
        Waits.For(after, "an item after the exception, on the same worker");

        EventWrittenEventArgs exception = listener.Single("WorkItemException");
        Assert.Equal(typeof(NullMessageException).FullName, listener.Payload(exception, "ExceptionType"));
        Assert.Equal(string.Empty, listener.Payload(exception, "ExceptionMessage"));
    }

    [Fact]
    public void ThreadsAdded_AnItemException_AndShutdown_AreTraced()
    {
        string name = $"{nameof(EventSourceTests)}-{Guid.NewGuid():N}";
        using var listener = new Listener(name);
        var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using var thrown = new ManualResetEventSlim();
        pool.UnhandledException += (_, _) => thrown.Set();
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("boom"));
        Waits.For(thrown, "the item's exception");
        pool.QueueUserWorkItem(_ => { });

        int cancelled = pool.Shutdown(ShutdownMode.Drain);

        Waits.Until(() => listener.Events.Any(e => e.EventName == "ThreadInjected"), "the thread traced");
        EventWrittenEventArgs injected = listener.Single("ThreadInjected");
        Assert.Equal(nameof(ThreadInjectionReason.Demand), listener.Payload(injected, "Reason"));
        Assert.Equal(1, listener.Payload(injected, "ThreadCount"));
        Assert.Equal(EventLevel.Informational, injected.Level);

        EventWrittenEventArgs exception = listener.Single("WorkItemException");
        Assert.Equal(typeof(InvalidOperationException).FullName, listener.Payload(exception, "ExceptionType"));
        Assert.Equal("boom", listener.Payload(exception, "ExceptionMessage"));
        Assert.Equal(true, listener.Payload(exception, "Handled"));

        EventWrittenEventArgs started = listener.Single("ShutdownStarted");
        Assert.Equal(nameof(ShutdownMode.Drain), listener.Payload(started, "Mode"));
        Waits.Until(() => listener.Events.Any(e => e.EventName == "ShutdownFinished"), "the stop traced");
        EventWrittenEventArgs finished = listener.Single("ShutdownFinished");
        Assert.Equal(2L, listener.Payload(finished, "CompletedCount"));
        Assert.Equal((long)cancelled, listener.Payload(finished, "CancelledCount"));
        Assert.Equal(0L, listener.Payload(finished, "RedirectedCount"));
        pool.Dispose(); // idempotent: no second ShutdownStarted
        Assert.Single(listener.Events, e => e.EventName == "ShutdownStarted");
    }

    [Theory]
    [InlineData(EventLevel.Warning, 0x0)] // no keyword: what a bare "dotnet-trace --providers Spindle" asks for
    [InlineData(EventLevel.Verbose, 0x4)] // another family's keyword only (Lifetime)
    public void AnItemException_ReachesASessionWhateverItsKeywords(EventLevel level, long keywords)
    {
        string name = $"{nameof(EventSourceTests)}-{Guid.NewGuid():N}";
        using var listener = new Listener(name, level, (EventKeywords)keywords);
        var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using var thrown = new ManualResetEventSlim();
        pool.UnhandledException += (_, _) => thrown.Set();
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("seen without keywords"));
        Waits.For(thrown, "the item's exception");
        pool.Dispose();

        EventWrittenEventArgs exception = listener.Single("WorkItemException");
        Assert.Equal(EventLevel.Error, exception.Level);
        Assert.Equal(EventKeywords.None, exception.Keywords & (EventKeywords)0x7);
        Assert.Equal("seen without keywords", listener.Payload(exception, "ExceptionMessage"));
        // The Informational events keep their keywords: a thread added is Threads (0x1), which neither session asked for.
        Assert.DoesNotContain(listener.Events, e => e.EventName == "ThreadInjected");
    }

    [Fact]
    public void Starvation_IsTracedWithTheThreadsItAdds()
    {
        string name = $"{nameof(EventSourceTests)}-{Guid.NewGuid():N}";
        using var listener = new Listener(name);
        // As many blocked items as the pool's thread target, each holding a worker (without a blocking region, so only
        // the stall monitor can help); the item queued once they all run needs a thread added for starvation.
        int target = Math.Max(1, Environment.ProcessorCount);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = target + 4 });
        using var gate = new ManualResetEventSlim();
        using var ran = new ManualResetEventSlim();
        using var blocked = new CountdownEvent(target);
        try
        {
            for (int i = 0; i < target; i++)
            {
                pool.QueueUserWorkItem(_ => { blocked.Signal(); gate.Wait(Waits.MustHappen); });
            }
            Waits.For(blocked, "every worker blocked");
            pool.QueueUserWorkItem(_ => ran.Set());
            Waits.For(ran, "the item behind the blocked ones, on a thread added for starvation");
        }
        finally
        {
            gate.Set();
        }

        Waits.Until(() => listener.Events.Any(e => e.EventName == "StarvationDetected"), "the starvation traced");
        EventWrittenEventArgs starvation = listener.Events.First(e => e.EventName == "StarvationDetected");
        Assert.Equal(EventLevel.Warning, starvation.Level);
        Assert.True((double)listener.Payload(starvation, "StalledMs")! > 0);
        Assert.True((int)listener.Payload(starvation, "AddedThreads")! >= 1);
        // Written once the added thread has started, which may be after it ran the item.
        Waits.Until(() => listener.Events.Any(e => e.EventName == "ThreadInjected"
            && (string?)listener.Payload(e, "Reason") == nameof(ThreadInjectionReason.Starvation)), "the added thread traced");
    }

    [Fact]
    public void ARetiredThread_IsTraced()
    {
        string name = $"{nameof(EventSourceTests)}-{Guid.NewGuid():N}";
        using var listener = new Listener(name);
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 0, MaxThreads = 2, IdleTimeout = TimeSpan.FromMilliseconds(20) });
        Assert.True(pool.Run(() => { }).Wait(Waits.MustHappen));

        Waits.Until(() => listener.Events.Any(e => e.EventName == "ThreadRetired"), "an idle thread retired");

        EventWrittenEventArgs retired = listener.Events.First(e => e.EventName == "ThreadRetired");
        Assert.Equal(nameof(ThreadInjectionReason.RetiredIdle), listener.Payload(retired, "Reason"));
    }

    [Fact]
    public void ShutdownStarted_IsWrittenBeforeShutdownFinished_EvenWhenTheCloseStopsThePool()
    {
        // A pool without threads stops inside the call that closes it.
        for (int i = 0; i < 20; i++)
        {
            string name = $"{nameof(EventSourceTests)}-{Guid.NewGuid():N}";
            using var listener = new Listener(name);
            new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 0 }).Dispose();

            Assert.Equal(new[] { "ShutdownStarted", "ShutdownFinished" }, listener.Events.Select(e => e.EventName ?? "").ToArray());
        }
    }

    [Fact]
    public void TheManifest_NamesEveryEventAndPayload()
    {
        // What ETW/EventPipe tools decode the events with: generating it validates every event method against its id.
        string manifest = EventSource.GenerateManifest(typeof(Spindle.Telemetry.SpindleEventSource), "Spindle.dll")!;

        Assert.Contains("name=\"Spindle\"", manifest, StringComparison.Ordinal);
        foreach (string eventName in new[] { "ThreadInjected", "ThreadRetired", "ThreadCreationFailed", "StarvationDetected",
            "StuckWorkItem", "WorkItemException", "ShutdownStarted", "ShutdownFinished" })
        {
            Assert.Contains($"symbol=\"{eventName}\"", manifest, StringComparison.Ordinal);
        }
        Assert.Contains("name=\"PoolName\"", manifest, StringComparison.Ordinal);
    }
}
