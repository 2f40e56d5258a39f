using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using Xunit;

namespace Spindle.Tests.Timers;

/// <summary>
/// Pool timers when the pool's own timer machinery fails: the timer thread cannot be started (through the internal
/// <see cref="WorkerPoolOptions.TimerThreadFactory"/> seam), or the pool's timer code throws while handing firings over
/// (through <see cref="WorkerPoolOptions.OnTimerFiringsHandOver"/>). A call either fails having changed nothing or
/// succeeds; a fault is reported and loses no firing.
/// </summary>
public sealed class TimerFaultTests
{
    private static WorkerPool NewPool(string name, Action<WorkerPoolOptions> configure)
    {
        var options = new WorkerPoolOptions
        {
            Name = name,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        configure(options);
        return new WorkerPool(options);
    }

    /// <summary>A timer thread factory that throws while <see cref="Failing"/> is set.</summary>
    private sealed class SwitchableFactory
    {
        private volatile bool _failing = true;
        private int _failures;

        public bool Failing
        {
            get => _failing;
            set => _failing = value;
        }

        public int Failures => Volatile.Read(ref _failures);

        public Thread Create(ThreadStart start)
        {
            if (_failing)
            {
                Interlocked.Increment(ref _failures);
                throw new OutOfMemoryException("no timer thread today");
            }
            return new Thread(start);
        }
    }

    /// <summary>Collects the trace lines that name one pool (other tests may trace at the same time).</summary>
    private sealed class PoolTraceListener(string poolName) : TraceListener
    {
        public ConcurrentQueue<string> Lines { get; } = new();

        public override void Write(string? message) => WriteLine(message);

        public override void WriteLine(string? message)
        {
            if (message is not null && message.Contains($"'{poolName}'", StringComparison.Ordinal))
            {
                Lines.Enqueue(message);
            }
        }
    }

    [Fact]
    public void Change_WhenTheTimerThreadCannotStart_Throws_AndLeavesTheTimerAsItWas()
    {
        var factory = new SwitchableFactory();
        using WorkerPool pool = NewPool(nameof(Change_WhenTheTimerThreadCannotStart_Throws_AndLeavesTheTimerAsItWas), o => o.TimerThreadFactory = factory.Create);
        int fired = 0;
        // Created stopped: it needs no thread yet, and the failed attempt to start one at creation is not the caller's.
        using ITimer timer = pool.CreateTimer(_ => Interlocked.Increment(ref fired), null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        Assert.False(pool.HasTimerThread);
        int failuresBefore = factory.Failures;

        Assert.Throws<OutOfMemoryException>(() => timer.Change(TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan));
        Assert.True(factory.Failures > failuresBefore, "the thread start was not attempted");
        Assert.Equal(0, pool.ScheduledTimerCount);
        Assert.False(pool.HasTimerThread);
        Waits.Never(() => Volatile.Read(ref fired) != 0, "a timer whose Change threw firing");

        // Creating a scheduled timer fails the same way, creating nothing.
        Assert.Throws<OutOfMemoryException>(() => pool.CreateTimer(_ => Interlocked.Increment(ref fired), null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan));
        Assert.Equal(0, pool.ScheduledTimerCount);

        // Once a thread can be started, the same timer works.
        factory.Failing = false;
        Assert.True(timer.Change(TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan));
        Assert.True(pool.HasTimerThread);
        Waits.Until(() => Volatile.Read(ref fired) == 1, "the timer once its thread could start");
        Waits.Never(() => Volatile.Read(ref fired) > 1, "a one-shot timer firing twice");
    }

    [Fact]
    public void RegisterWaitWithATimeout_WhenTheTimerThreadCannotStart_Throws_AndRegistersNothing()
    {
        var factory = new SwitchableFactory();
        using WorkerPool pool = NewPool(nameof(RegisterWaitWithATimeout_WhenTheTimerThreadCannotStart_Throws_AndRegistersNothing), o => o.TimerThreadFactory = factory.Create);
        var signal = new PoolSignal();
        int calls = 0;
        Assert.Throws<OutOfMemoryException>(() =>
            pool.RegisterWait(signal, (_, _) => Interlocked.Increment(ref calls), null, TimeSpan.FromMilliseconds(5), executeOnlyOnce: false));
        Assert.Equal(0, pool.RegisteredWaitCount);
        Assert.Equal(0, pool.ScheduledTimerCount);
        // No waiter was linked: an auto-reset Set finds nobody to release and stays set.
        signal.Set();
        Assert.True(signal.IsSet);
        Waits.Never(() => Volatile.Read(ref calls) != 0, "a callback of a registration that threw");

        // An infinite timeout needs no timer thread: it registers, and consumes the set at once.
        using var fired = new ManualResetEventSlim();
        bool? sawTimeout = null;
        RegisteredWait registration = pool.RegisterWait(signal, (_, timedOut) =>
        {
            sawTimeout = timedOut;
            fired.Set();
        }, null, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
        Waits.For(fired, "the registration with no timeout");
        Assert.False(sawTimeout);
        Assert.True(registration.Unregister(null));
    }

    [Fact]
    public void AFaultInThePoolsTimerCode_IsReported_AndLosesNoFiring()
    {
        const string name = nameof(AFaultInThePoolsTimerCode_IsReported_AndLosesNoFiring);
        const int injected = 5;
        int faultsLeft = injected;
        var listener = new PoolTraceListener(name);
        Trace.Listeners.Add(listener);
        try
        {
            using WorkerPool pool = NewPool(name, o => o.OnTimerFiringsHandOver = () =>
            {
                if (Interlocked.Decrement(ref faultsLeft) >= 0)
                {
                    throw new InvalidOperationException("injected timer fault");
                }
            });
            int oneShot = 0;
            int periodic = 0;
            long due = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 100;
            long firedAt = 0;
            using ITimer once = pool.CreateTimer(_ =>
            {
                Volatile.Write(ref firedAt, Stopwatch.GetTimestamp());
                Interlocked.Increment(ref oneShot);
            }, null, TimeSpan.FromMilliseconds(10), Timeout.InfiniteTimeSpan);
            using ITimer repeating = pool.CreateTimer(_ => Interlocked.Increment(ref periodic), null, TimeSpan.FromMilliseconds(2), TimeSpan.FromMilliseconds(2));

            Waits.Until(() => Volatile.Read(ref oneShot) == 1 && Volatile.Read(ref periodic) >= 10, "the timers to fire despite the faults");
            Assert.True(Volatile.Read(ref faultsLeft) < 0, "not every injected fault was hit");
            Assert.True(Volatile.Read(ref firedAt) >= due, "the one-shot timer fired before its due time");
            Waits.Never(() => Volatile.Read(ref oneShot) > 1, "a one-shot timer firing twice after a fault");
            Assert.True(pool.TimerThreadIsAlive, "the timer thread died");

            // A timer created after the faults is served as usual.
            using var later = new ManualResetEventSlim();
            using ITimer afterwards = pool.CreateTimer(_ => later.Set(), null, TimeSpan.FromMilliseconds(5), Timeout.InfiniteTimeSpan);
            Waits.For(later, "a timer created after the faults");

            // Each fault is reported once, by the thread that hit it (the timer thread, or a worker expiring timers).
            Waits.Until(() => ReportedFaults(listener) == injected, "every fault to be reported");
            Waits.Never(() => ReportedFaults(listener) != injected, "a fault reported twice");
        }
        finally
        {
            Trace.Listeners.Remove(listener);
        }

        static int ReportedFaults(PoolTraceListener listener) =>
            listener.Lines.Count(line => line.Contains("injected timer fault", StringComparison.Ordinal));
    }
}
