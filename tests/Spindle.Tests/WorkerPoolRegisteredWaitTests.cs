using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Registered waits on wait handles (wait threads, 63 handles each) and on <see cref="PoolSignal"/> (no thread), and the
/// signal itself: signal versus timeout, run-once versus repeating, unregistration, shutdown, bad input.
/// </summary>
public sealed class WorkerPoolRegisteredWaitTests
{
    private static readonly AsyncLocal<string?> s_flowed = new();

    private static WorkerPool NewPool(Action<WorkerPoolOptions>? configure = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolRegisteredWaitTests),
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        configure?.Invoke(options);
        return new WorkerPool(options);
    }

    /// <summary>Registers on a wait handle or on a pool signal, behind one shape, so every behaviour is tested on both.</summary>
    public sealed class Source : IDisposable
    {
        private readonly AutoResetEvent? _event;
        private readonly PoolSignal? _signal;

        private Source(bool native)
        {
            if (native)
            {
                _signal = new PoolSignal();
            }
            else
            {
                _event = new AutoResetEvent(false);
            }
        }

        public static Source Create(string kind) => new(kind == "signal");

        public void Set()
        {
            _event?.Set();
            _signal?.Set();
        }

        public RegisteredWait Register(WorkerPool pool, WaitOrTimerCallback callback, object? state, TimeSpan timeout, bool once) =>
            _signal is not null
                ? pool.RegisterWait(_signal, callback, state, timeout, once)
                : pool.RegisterWaitForSingleObject(_event!, callback, state, timeout, once);

        public void Dispose() => _event?.Dispose();
    }

    public static TheoryData<string> Kinds => new() { "event", "signal" };

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Signal_QueuesTheCallback_WithTimedOutFalse_OnThePool(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        var calls = new BlockingCollection<(object? State, bool TimedOut, WorkerPool? Pool)>();
        RegisteredWait registration = source.Register(pool, (state, timedOut) => calls.Add((state, timedOut, WorkerPool.Current)), "s", Timeout.InfiniteTimeSpan, once: false);
        source.Set();
        Assert.True(calls.TryTake(out var call, Waits.MustHappen));
        Assert.Equal(("s", false, pool), call);
        source.Set();
        Assert.True(calls.TryTake(out call, Waits.MustHappen));
        Assert.False(call.TimedOut);
        Assert.True(registration.Unregister(null));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Timeout_QueuesTheCallback_WithTimedOutTrue_AndRepeats(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        var calls = new BlockingCollection<bool>();
        RegisteredWait registration = source.Register(pool, (_, timedOut) => calls.Add(timedOut), null, TimeSpan.FromMilliseconds(10), once: false);
        Assert.True(calls.TryTake(out bool first, Waits.MustHappen));
        Assert.True(first);
        Assert.True(calls.TryTake(out bool second, Waits.MustHappen));
        Assert.True(second); // repeating: the timeout starts again
        source.Set();
        Assert.True(Waits.Poll(() => TookASignal(calls), Waits.MustHappen), "the signal was not reported with timedOut false");
        Assert.True(registration.Unregister(null));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Timeouts_NeverComeEarly(string kind)
    {
        // Timeouts that are not whole multiples of the coarse clock's tick, started at scattered moments: the n-th
        // timeout of a repeating registration comes no sooner than n timeouts after the registration call (a repeated
        // timeout restarts when the previous one is detected, at or after its due time).
        using var pool = NewPool();
        const int Registrations = 24;
        const int FiringsEach = 3;
        var sources = new Source[Registrations];
        var registrations = new RegisteredWait[Registrations];
        var timeouts = new TimeSpan[Registrations];
        var registered = new long[Registrations];
        var fired = new long[Registrations, FiringsEach];
        var counts = new int[Registrations];
        using var done = new CountdownEvent(Registrations);
        for (int i = 0; i < Registrations; i++)
        {
            int index = i;
            sources[i] = Source.Create(kind);
            timeouts[i] = TimeSpan.FromMilliseconds(3 + 7 * i % 41);
            registered[i] = System.Diagnostics.Stopwatch.GetTimestamp();
            registrations[i] = sources[i].Register(pool, (_, timedOut) =>
            {
                int n = Interlocked.Increment(ref counts[index]) - 1;
                if (timedOut && n < FiringsEach)
                {
                    fired[index, n] = System.Diagnostics.Stopwatch.GetTimestamp();
                    if (n == FiringsEach - 1)
                    {
                        done.Signal();
                    }
                }
            }, null, timeouts[i], once: false);
            Thread.SpinWait(1_000 * (i % 5)); // scatter the registrations across clock ticks
        }
        Waits.For(done, "three timeouts of every registration");
        for (int i = 0; i < Registrations; i++)
        {
            Assert.True(registrations[i].Unregister(null));
            sources[i].Dispose();
            for (int n = 0; n < FiringsEach; n++)
            {
                TimeSpan elapsed = System.Diagnostics.Stopwatch.GetElapsedTime(registered[i], fired[i, n]);
                TimeSpan due = (n + 1) * timeouts[i];
                Assert.True(elapsed >= due, $"{kind}: registration {i}, timeout {n + 1} came {elapsed.TotalMilliseconds:F3} ms after the registration, before {due.TotalMilliseconds} ms.");
            }
        }
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Timeouts_RacingSignals_NeverComeEarly(string kind)
    {
        // Signals restart a repeating registration's timeout while timeouts expire: more setting threads than cores, set
        // at moments scattered around the timeouts, so a set is now and then descheduled between reading the clock and
        // restarting the timeout. However the two interleave, the n-th timeout callback comes no sooner than n timeouts
        // after the registration: a restart counts from no earlier than the timeout that expired before it.
        using var pool = NewPool(o => o.MinThreads = 2);
        const int Registrations = 16;
        TimeSpan timeout = TimeSpan.FromMilliseconds(2);
        var sources = new Source[Registrations];
        var registrations = new RegisteredWait[Registrations];
        var registered = new long[Registrations];
        var timeoutCounts = new int[Registrations];
        var failures = new ConcurrentQueue<string>();
        int timedOutTotal = 0;
        for (int i = 0; i < Registrations; i++)
        {
            int index = i;
            sources[i] = Source.Create(kind);
            registered[i] = System.Diagnostics.Stopwatch.GetTimestamp();
            registrations[i] = sources[i].Register(pool, (_, timedOut) =>
            {
                if (!timedOut)
                {
                    return;
                }
                long now = System.Diagnostics.Stopwatch.GetTimestamp();
                int n = Interlocked.Increment(ref timeoutCounts[index]);
                Interlocked.Increment(ref timedOutTotal);
                TimeSpan elapsed = System.Diagnostics.Stopwatch.GetElapsedTime(registered[index], now);
                if (elapsed < n * timeout)
                {
                    failures.Enqueue($"{kind}: registration {index}, timeout {n} came {elapsed.TotalMilliseconds:F3} ms after the registration, before {(n * timeout).TotalMilliseconds} ms");
                }
            }, null, timeout, once: false);
        }
        int setters = Environment.ProcessorCount + 2;
        var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(Stress.Enabled ? 5 : 1);
        var threads = new Thread[setters];
        for (int t = 0; t < setters; t++)
        {
            int seed = t;
            threads[t] = new Thread(() =>
            {
                var random = new Random(seed);
                while (DateTime.UtcNow < deadline)
                {
                    sources[random.Next(Registrations)].Set();
                    Thread.SpinWait(random.Next(20_000)); // up to a few timeouts' worth between sets
                }
            })
            { IsBackground = true };
            threads[t].Start();
        }
        foreach (Thread thread in threads)
        {
            Assert.True(thread.Join(Waits.MustHappen));
        }
        for (int i = 0; i < Registrations; i++)
        {
            Assert.True(registrations[i].Unregister(null));
            sources[i].Dispose();
        }
        Assert.True(Volatile.Read(ref timedOutTotal) > 0, "no timeout expired: the sets never left a registration a timeout long");
        Assert.Empty(failures);
    }

    public static TheoryData<string, double> SubMillisecondTimeouts => new()
    {
        { "event", 1.9 },
        { "event", 0.5 },
        { "signal", 1.9 },
        { "signal", 0.5 },
    };

    [Theory]
    [MemberData(nameof(SubMillisecondTimeouts))]
    public void SubMillisecondTimeouts_NeverComeEarly_FirstOrRepeated(string kind, double milliseconds)
    {
        // The fraction of a millisecond is part of the timeout: a run-once registration times out no sooner than the
        // whole timeout after the registration call, and the n-th timeout of a repeating one no sooner than n timeouts.
        // A wait thread judges timeouts when it wakes, so each one also watches a busy neighbour handle, set without
        // pause until the end, and the registrations come a tenth of a millisecond apart: the threads are awake the
        // moment they deem a timeout due.
        TimeSpan timeout = TimeSpan.FromMilliseconds(milliseconds);
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        const int Registrations = 200;
        const int FiringsEach = 3; // of the repeating ones: every tenth registration
        const int PerWaitThread = Spindle.Registrations.WaitThread.MaxHandles - 1; // and the neighbour
        var neighbours = new List<AutoResetEvent>();
        var neighbourRegistrations = new List<RegisteredWait>();
        var registered = new long[Registrations];
        var fired = new long[Registrations, FiringsEach];
        var counts = new int[Registrations];
        var registrations = new RegisteredWait[Registrations];
        using var done = new CountdownEvent(Registrations);
        long spacing = System.Diagnostics.Stopwatch.Frequency / 10_000;
        long start = System.Diagnostics.Stopwatch.GetTimestamp();
        for (int i = 0; i < Registrations; i++)
        {
            int index = i;
            bool once = i % 10 != 9;
            int wanted = once ? 1 : FiringsEach;
            if (kind == "event" && i % PerWaitThread == 0)
            {
                var neighbour = new AutoResetEvent(false);
                neighbours.Add(neighbour);
                neighbourRegistrations.Add(pool.RegisterWaitForSingleObject(neighbour, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false));
            }
            while (System.Diagnostics.Stopwatch.GetTimestamp() < start + i * spacing)
            {
                SetAll(neighbours);
            }
            registered[i] = System.Diagnostics.Stopwatch.GetTimestamp();
            registrations[i] = source.Register(pool, (_, timedOut) =>
            {
                long now = System.Diagnostics.Stopwatch.GetTimestamp();
                int n = Interlocked.Increment(ref counts[index]) - 1;
                if (timedOut && n < wanted)
                {
                    fired[index, n] = now;
                    if (n == wanted - 1)
                    {
                        done.Signal();
                    }
                }
            }, null, timeout, once);
        }
        long giveUp = System.Diagnostics.Stopwatch.GetTimestamp() + (long)(Waits.MustHappen.TotalSeconds * System.Diagnostics.Stopwatch.Frequency);
        while (!done.IsSet)
        {
            Assert.True(System.Diagnostics.Stopwatch.GetTimestamp() < giveUp, $"Did not happen within {Waits.MustHappen.TotalSeconds} s: the timeouts of every registration ({done.CurrentCount} missing)");
            SetAll(neighbours);
        }
        neighbourRegistrations.ForEach(r => r.Unregister(null));
        neighbours.ForEach(e => e.Dispose());
        var early = new List<string>();
        for (int i = 0; i < Registrations; i++)
        {
            registrations[i].Unregister(null);
            int firings = registrations[i].ExecuteOnlyOnce ? 1 : FiringsEach;
            for (int n = 0; n < firings; n++)
            {
                TimeSpan elapsed = System.Diagnostics.Stopwatch.GetElapsedTime(registered[i], fired[i, n]);
                TimeSpan due = (n + 1) * timeout;
                if (elapsed < due)
                {
                    early.Add($"registration {i}, timeout {n + 1}: {elapsed.TotalMilliseconds:F3} ms < {due.TotalMilliseconds} ms");
                }
            }
        }
        Assert.True(early.Count == 0, $"{kind}: {early.Count} timeouts came early: {string.Join("; ", early.Take(10))}");
    }

    private static void SetAll(List<AutoResetEvent> handles)
    {
        foreach (AutoResetEvent handle in handles)
        {
            handle.Set();
        }
        Thread.SpinWait(20);
    }

    [Fact]
    public void MillisecondOverloads_TimeOutNoSoonerThanTheirTimeout_AndTakeTheirInfiniteValue()
    {
        using var pool = NewPool();
        using var neverSignalled = new AutoResetEvent(false);
        var overloads = new Func<WaitOrTimerCallback, int, RegisteredWait>[]
        {
            (callback, ms) => pool.RegisterWaitForSingleObject(neverSignalled, callback, null, ms, executeOnlyOnce: true),
            (callback, ms) => pool.RegisterWaitForSingleObject(neverSignalled, callback, null, (long)ms, executeOnlyOnce: true),
            (callback, ms) => pool.RegisterWaitForSingleObject(neverSignalled, callback, null, (uint)ms, executeOnlyOnce: true),
        };
        var early = new ConcurrentQueue<string>();
        using var done = new CountdownEvent(overloads.Length * 2 * 20);
        for (int o = 0; o < overloads.Length; o++)
        {
            for (int ms = 1; ms <= 2; ms++)
            {
                for (int i = 0; i < 20; i++)
                {
                    int overload = o, timeoutMs = ms;
                    long registered = System.Diagnostics.Stopwatch.GetTimestamp();
                    RegisteredWait registration = overloads[o]((_, timedOut) =>
                    {
                        TimeSpan elapsed = System.Diagnostics.Stopwatch.GetElapsedTime(registered);
                        if (!timedOut || elapsed < TimeSpan.FromMilliseconds(timeoutMs))
                        {
                            early.Enqueue($"overload {overload}, {timeoutMs} ms: timed out {timedOut} after {elapsed.TotalMilliseconds:F3} ms");
                        }
                        done.Signal();
                    }, ms);
                    Assert.Equal(TimeSpan.FromMilliseconds(ms), registration.Timeout);
                    Thread.SpinWait(200 * i);
                }
            }
        }
        Waits.For(done, "every timeout");
        Assert.Empty(early);

        int fired = 0;
        RegisteredWait[] infinite =
        [
            pool.RegisterWaitForSingleObject(neverSignalled, (_, _) => Interlocked.Increment(ref fired), null, Timeout.Infinite, executeOnlyOnce: true),
            pool.RegisterWaitForSingleObject(neverSignalled, (_, _) => Interlocked.Increment(ref fired), null, -1L, executeOnlyOnce: true),
            pool.RegisterWaitForSingleObject(neverSignalled, (_, _) => Interlocked.Increment(ref fired), null, uint.MaxValue, executeOnlyOnce: true),
        ];
        Assert.All(infinite, r => Assert.Equal(Timeout.InfiniteTimeSpan, r.Timeout));
        Waits.Never(() => Volatile.Read(ref fired) > 0, "an infinite timeout firing");
        Assert.All(infinite, r => Assert.True(r.Unregister(null)));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void RegisteredWait_ReportsTheTimeoutItWasGiven(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        TimeSpan timeout = TimeSpan.FromTicks(12_345_678); // 1,234.5678 ms
        RegisteredWait registration = source.Register(pool, (_, _) => { }, null, timeout, once: false);
        Assert.Equal(timeout, registration.Timeout);
        Assert.True(registration.Unregister(null));
        RegisteredWait infinite = source.Register(pool, (_, _) => { }, null, Timeout.InfiniteTimeSpan, once: false);
        Assert.Equal(Timeout.InfiniteTimeSpan, infinite.Timeout);
        Assert.True(infinite.Unregister(null));
    }

    private static bool TookASignal(BlockingCollection<bool> calls)
    {
        while (calls.TryTake(out bool timedOut))
        {
            if (!timedOut)
            {
                return true;
            }
        }
        return false;
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void RunOnce_FiresOnce_ThenStopsWatching(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        int count = 0;
        using var fired = new ManualResetEventSlim();
        RegisteredWait registration = source.Register(pool, (_, timedOut) => { Assert.False(timedOut); Interlocked.Increment(ref count); fired.Set(); }, null, Timeout.InfiniteTimeSpan, once: true);
        Assert.True(registration.ExecuteOnlyOnce);
        source.Set();
        Waits.For(fired, "the run-once callback");
        source.Set();
        source.Set();
        Waits.Never(() => Volatile.Read(ref count) > 1, "a run-once registration firing twice");
        Assert.True(registration.Unregister(null)); // the first Unregister still succeeds
        Assert.False(registration.Unregister(null));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void RunOnceWithTimeout_FiresOnce_EitherForTheSignalOrForTheTimeout(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        var calls = new ConcurrentQueue<bool>();
        source.Register(pool, (_, timedOut) => calls.Enqueue(timedOut), null, TimeSpan.FromMilliseconds(5), once: true);
        Waits.Until(() => !calls.IsEmpty, "the timeout");
        source.Set();
        Waits.Never(() => calls.Count > 1, "a second callback of a run-once registration");
        Assert.True(calls.Single());
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_WhileTheCallbackRuns_SignalsTheWaitObjectOnlyAfterItReturns(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        using var inside = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        int count = 0;
        RegisteredWait registration = source.Register(pool, (_, _) =>
        {
            Interlocked.Increment(ref count);
            inside.Set();
            release.Wait(Waits.MustHappen);
        }, null, Timeout.InfiniteTimeSpan, once: false);
        source.Set();
        Waits.For(inside, "the callback to start");
        using var done = new ManualResetEvent(false);
        Assert.True(registration.Unregister(done));
        Assert.True(registration.IsUnregistered);
        Assert.False(done.WaitOne(Waits.MustNotHappen), "the wait object was signalled while the callback still ran");
        release.Set();
        Assert.True(done.WaitOne(Waits.MustHappen), "the wait object was not signalled after the callback returned");
        source.Set();
        Waits.Never(() => Volatile.Read(ref count) > 1, "a callback after Unregister");
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_WithASemaphoreAtItsMaximum_WhileTheCallbackRuns_ThrowsNothingOnTheWorker_AndLeavesItFull(string kind)
    {
        // The wait object is signalled on the worker that ran the callback, as the callback returns; a Semaphore already
        // at its maximum cannot be released, and that must not become an exception of the pool's (under the default
        // policy, the end of the process).
        var pool = NewPool();
        var reported = new ConcurrentQueue<Exception>();
        pool.UnhandledException += (_, e) => reported.Enqueue(e.Exception);
        using Source source = Source.Create(kind);
        using var inside = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        RegisteredWait registration = source.Register(pool, (_, _) =>
        {
            inside.Set();
            release.Wait(Waits.MustHappen);
        }, null, Timeout.InfiniteTimeSpan, once: false);
        source.Set();
        Waits.For(inside, "the callback to start");
        using var full = new Semaphore(1, 1);
        Assert.True(registration.Unregister(full));
        release.Set();
        // Dispose waits for the item that ran the callback, so the signal has been tried (and anything it threw
        // reported) once it returns.
        Waits.RunBounded(pool.Dispose, "dispose");
        Assert.True(reported.IsEmpty, "The pool reported: " + string.Join(" | ", reported.Select(e => $"{e.GetType().Name}: {e.Message}")));
        Assert.True(full.WaitOne(0), "the semaphore lost its count");
        Assert.False(full.WaitOne(0), "the semaphore was released past its maximum");
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_WithASemaphoreAtItsMaximum_AndNothingRunning_ReturnsTrue_WithoutThrowing(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        int count = 0;
        RegisteredWait registration = source.Register(pool, (_, _) => Interlocked.Increment(ref count), null, Timeout.InfiniteTimeSpan, once: false);
        using var full = new Semaphore(1, 1);
        Assert.True(registration.Unregister(full));
        Assert.True(registration.IsUnregistered);
        Assert.False(registration.Unregister(null));
        Assert.True(full.WaitOne(0), "the semaphore lost its count");
        Assert.False(full.WaitOne(0), "the semaphore was released past its maximum");
        source.Set();
        Waits.Never(() => Volatile.Read(ref count) != 0, "a callback after Unregister");
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_WithNothingRunning_SignalsTheWaitObjectAtOnce_AndASecondCallDoesNothing(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        RegisteredWait registration = source.Register(pool, (_, _) => { }, null, Timeout.InfiniteTimeSpan, once: false);
        using var semaphore = new Semaphore(0, 5);
        Assert.True(registration.Unregister(semaphore));
        Assert.True(semaphore.WaitOne(Waits.MustHappen));
        using var second = new ManualResetEvent(false);
        Assert.False(registration.Unregister(second));
        Assert.False(second.WaitOne(Waits.MustNotHappen), "a second Unregister signalled its wait object");
        Assert.Throws<ArgumentException>("waitObject", () => registration.Unregister(new Mutex()));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_AfterShutdownEndedTheRegistration_ReturnsTrue_AndSignalsTheWaitObject(string kind)
    {
        var pool = NewPool();
        using Source source = Source.Create(kind);
        int count = 0;
        RegisteredWait registration = source.Register(pool, (_, _) => Interlocked.Increment(ref count), null, Timeout.InfiniteTimeSpan, once: false);
        pool.Dispose();
        Assert.True(registration.IsUnregistered);
        using var done = new ManualResetEvent(false);
        Assert.True(registration.Unregister(done));
        Assert.True(done.WaitOne(Waits.MustHappen), "the wait object was not signalled");
        using var second = new Semaphore(0, 1);
        Assert.False(registration.Unregister(second));
        Assert.False(second.WaitOne(Waits.MustNotHappen), "a second Unregister signalled its wait object");
        Assert.Equal(0, Volatile.Read(ref count));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_AfterShutdownBegan_WhileTheCallbackRuns_SignalsTheWaitObjectOnlyAfterItReturns(string kind)
    {
        var pool = NewPool();
        using Source source = Source.Create(kind);
        using var inside = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        RegisteredWait registration = source.Register(pool, (_, _) =>
        {
            inside.Set();
            release.Wait(Waits.MustHappen);
        }, null, Timeout.InfiniteTimeSpan, once: false);
        source.Set();
        Waits.For(inside, "the callback to start");
        // Dispose ends the registration at once, then waits for the running callback.
        TestThread disposer = Waits.Start(pool.Dispose, "dispose");
        Waits.Until(() => registration.IsUnregistered, "shutdown to end the registration");
        using var done = new ManualResetEvent(false);
        Assert.True(registration.Unregister(done));
        Assert.False(done.WaitOne(Waits.MustNotHappen), "the wait object was signalled while the callback still ran");
        release.Set();
        Assert.True(done.WaitOne(Waits.MustHappen), "the wait object was not signalled after the callback returned");
        disposer.Join();
    }

    [Fact]
    public void Unregister_AfterADisposedHandleEndedTheRegistration_ReturnsTrue_AndSignalsTheWaitObject()
    {
        using var pool = NewPool();
        var doomed = new AutoResetEvent(false);
        using var survivor = new AutoResetEvent(false);
        RegisteredWait lost = pool.RegisterWaitForSingleObject(doomed, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
        pool.RegisterWaitForSingleObject(survivor, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
        Thread.Sleep(20);
        doomed.Dispose();
        Waits.Until(() =>
        {
            survivor.Set(); // makes the wait thread wait again, which finds the disposed handle
            return lost.IsUnregistered;
        }, "the disposed handle's registration to end");
        using var done = new ManualResetEvent(false);
        Assert.True(lost.Unregister(done));
        Assert.True(done.WaitOne(Waits.MustHappen), "the wait object was not signalled");
        Assert.False(lost.Unregister(null));
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void Unregister_FromInsideItsOwnCallback_SignalsAfterTheCallbackReturns(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        using var done = new ManualResetEvent(false);
        bool signalledInside = true;
        RegisteredWait? registration = null;
        using var registered = new ManualResetEventSlim();
        registration = source.Register(pool, (_, _) =>
        {
            registered.Wait(Waits.MustHappen);
            registration!.Unregister(done);
            signalledInside = done.WaitOne(0);
        }, null, Timeout.InfiniteTimeSpan, once: false);
        registered.Set();
        source.Set();
        Assert.True(done.WaitOne(Waits.MustHappen));
        Assert.False(signalledInside);
    }

    private sealed class HandleLessWaitHandle : WaitHandle
    {
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void BlockingUnregister_FromInsideItsOwnCallback_ReturnsTrueWithoutWaitingForItself(string kind)
    {
        using var pool = NewPool();
        using Source source = Source.Create(kind);
        using var registered = new ManualResetEventSlim();
        using var returned = new ManualResetEventSlim();
        bool result = false;
        int calls = 0;
        RegisteredWait? registration = null;
        registration = source.Register(pool, (_, _) =>
        {
            Interlocked.Increment(ref calls);
            registered.Wait(Waits.MustHappen);
            result = registration!.Unregister(new HandleLessWaitHandle());
            returned.Set();
        }, null, Timeout.InfiniteTimeSpan, once: false);
        registered.Set();
        source.Set();
        Waits.For(returned, "the blocking Unregister inside the callback to return");
        Assert.True(result);
        Assert.True(registration.IsUnregistered);
        source.Set();
        Waits.Never(() => Volatile.Read(ref calls) > 1, "a callback after Unregister");
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void QueuedButNotStartedFirings_AreDroppedByUnregister(string kind)
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        using Source source = Source.Create(kind);
        using var gate = new ManualResetEventSlim();
        using var blocked = new ManualResetEventSlim();
        int count = 0;
        pool.QueueUserWorkItem(_ => { blocked.Set(); gate.Wait(Waits.MustHappen); }, null);
        Waits.For(blocked, "the only worker to be busy");
        RegisteredWait registration = source.Register(pool, (_, _) => Interlocked.Increment(ref count), null, Timeout.InfiniteTimeSpan, once: false);
        source.Set();
        Waits.Until(() => pool.PendingWorkItemCount >= 1, "the firing to be queued");
        Assert.True(registration.Unregister(null));
        gate.Set();
        Waits.Until(() => pool.PendingWorkItemCount == 0, "the queue to drain");
        Waits.Never(() => Volatile.Read(ref count) > 0, "a firing that started after Unregister");
    }

    [Theory]
    [MemberData(nameof(Kinds))]
    public void CallbacksOfOneRegistration_NeverOverlap_AndNoSignalIsLost(string kind)
    {
        const int signals = 300;
        using var pool = NewPool(o => { o.MinThreads = 4; o.MaxThreads = 4; });
        using Source source = Source.Create(kind);
        int running = 0;
        int overlaps = 0;
        int count = 0;
        RegisteredWait registration = source.Register(pool, (_, _) =>
        {
            if (Interlocked.Increment(ref running) > 1)
            {
                Interlocked.Increment(ref overlaps);
            }
            Thread.SpinWait(200);
            Interlocked.Decrement(ref running);
            Interlocked.Increment(ref count);
        }, null, Timeout.InfiniteTimeSpan, once: false);
        int expected = 0;
        for (int i = 0; i < signals; i++)
        {
            source.Set();
            if (kind == "signal")
            {
                expected++; // a pool signal with a waiting registration releases it on every Set
            }
            else
            {
                // An auto-reset event holds one pending set: wait for the wait thread to consume each.
                int target = i + 1;
                Waits.Until(() => Volatile.Read(ref count) >= target, "the event's callback");
                expected++;
            }
        }
        Waits.Until(() => Volatile.Read(ref count) == expected, $"{expected} callbacks");
        Assert.Equal(0, overlaps);
        registration.Unregister(null);
    }

    [Fact]
    public void MoreThan64Handles_AreSpreadOverWaitThreads_AndEachOneFires()
    {
        const int handles = 200;
        using var pool = NewPool();
        var events = Enumerable.Range(0, handles).Select(_ => new AutoResetEvent(false)).ToArray();
        var fired = new int[handles];
        using var all = new CountdownEvent(handles);
        var registrations = events
            .Select((e, i) => pool.RegisterWaitForSingleObject(e, (_, _) => { Interlocked.Increment(ref fired[i]); all.Signal(); }, null, Timeout.Infinite, executeOnlyOnce: false))
            .ToArray();
        Assert.Equal((handles + 62) / 63, pool.WaitThreadCount); // 63 per thread, the fewest WaitAny allows
        Assert.Equal(handles, pool.RegisteredWaitCount);
        for (int i = handles - 1; i >= 0; i--)
        {
            events[i].Set();
        }
        Waits.For(all, "every handle's callback");
        Assert.All(fired, f => Assert.Equal(1, f));
        foreach (RegisteredWait registration in registrations)
        {
            Assert.True(registration.Unregister(null));
        }
        Assert.Equal(0, pool.RegisteredWaitCount);
        foreach (AutoResetEvent e in events)
        {
            e.Dispose();
        }
    }

    [Fact]
    public void WaitThreads_AreReused_AfterRegistrationsEnd()
    {
        using var pool = NewPool();
        using var handle = new AutoResetEvent(false);
        for (int i = 0; i < 100; i++)
        {
            RegisteredWait registration = pool.RegisterWaitForSingleObject(handle, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
            registration.Unregister(null);
        }
        Assert.Equal(1, pool.WaitThreadCount); // one thread lingers for the idle timeout and takes the next registration
    }

    [Fact]
    public void IdleWaitThread_Exits_AfterTheIdleTimeout()
    {
        using var pool = NewPool(o => o.IdleTimeout = TimeSpan.FromMilliseconds(20));
        using var handle = new AutoResetEvent(false);
        pool.RegisterWaitForSingleObject(handle, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false).Unregister(null);
        Waits.Until(() => pool.WaitThreadCount == 0, "the idle wait thread to exit");
        using var fired = new ManualResetEventSlim();
        pool.RegisterWaitForSingleObject(handle, (_, _) => fired.Set(), null, Timeout.Infinite, executeOnlyOnce: true);
        handle.Set();
        Waits.For(fired, "a registration after the wait thread exited");
    }

    [Fact]
    public void DisposingARegisteredHandle_UnregistersIt_AndTheOthersKeepWorking()
    {
        using var pool = NewPool();
        var doomed = new AutoResetEvent(false);
        using var survivor = new AutoResetEvent(false);
        RegisteredWait lost = pool.RegisterWaitForSingleObject(doomed, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
        using var fired = new ManualResetEventSlim();
        pool.RegisterWaitForSingleObject(survivor, (_, _) => fired.Set(), null, Timeout.Infinite, executeOnlyOnce: false);
        Thread.Sleep(20);
        doomed.Dispose();
        Waits.Until(() => lost.IsUnregistered || Kick(survivor, fired), "the disposed handle's registration to end");
        survivor.Set();
        Waits.For(fired, "the surviving registration");

        static bool Kick(AutoResetEvent survivor, ManualResetEventSlim fired)
        {
            survivor.Set(); // makes the wait thread wait again, which finds the disposed handle
            return false;
        }
    }

    [Fact]
    public void Callbacks_FlowTheRegisteringContext_WhenThePoolDoes()
    {
        using var pool = NewPool();
        var signal = new PoolSignal();
        using var handle = new AutoResetEvent(false);
        var seen = new BlockingCollection<string?>();
        s_flowed.Value = "registrar";
        try
        {
            pool.RegisterWait(signal, (_, _) => seen.Add(s_flowed.Value), null, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
            pool.RegisterWaitForSingleObject(handle, (_, _) => seen.Add(s_flowed.Value), null, Timeout.Infinite, executeOnlyOnce: true);
        }
        finally
        {
            s_flowed.Value = null;
        }
        signal.Set();
        handle.Set();
        Assert.True(seen.TryTake(out string? first, Waits.MustHappen));
        Assert.True(seen.TryTake(out string? second, Waits.MustHappen));
        Assert.Equal("registrar", first);
        Assert.Equal("registrar", second);
    }

    [Fact]
    public void HundredThousandSignalRegistrations_AddNoThread_AndEachFiresOnItsSet()
    {
        const int registrations = 100_000;
        using var pool = NewPool(o => { o.MinThreads = 2; o.MaxThreads = 2; });
        var signals = new PoolSignal[registrations];
        var counts = new int[registrations];
        for (int i = 0; i < registrations; i++)
        {
            signals[i] = new PoolSignal();
            int index = i;
            pool.RegisterWait(signals[i], (_, _) => Interlocked.Increment(ref counts[index]), null, Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        }
        Assert.Equal(registrations, pool.RegisteredWaitCount);
        Assert.Equal(0, pool.WaitThreadCount);
        Assert.False(pool.HasTimerThread); // infinite timeouts need no timer either
        Assert.True(pool.ThreadCount <= 2);
        int[] signalled = Enumerable.Range(0, registrations).Where(i => i % 7 == 0).ToArray();
        for (int round = 1; round <= 2; round++)
        {
            for (int i = 0; i < registrations; i += 7)
            {
                signals[i].Set();
            }
            int expectedRound = round;
            Waits.Until(() => signalled.All(i => Volatile.Read(ref counts[i]) == expectedRound), "the signalled registrations to fire");
        }
        for (int i = 0; i < registrations; i++)
        {
            Assert.Equal(i % 7 == 0 ? 2 : 0, counts[i]);
        }
    }

    [Fact]
    public void Dispose_WithRegistrationsOutstanding_UnregistersThem_AndRunsNoCallbackAfterItReturns()
    {
        var pool = NewPool();
        var signals = Enumerable.Range(0, 100).Select(_ => new PoolSignal()).ToArray();
        var events = Enumerable.Range(0, 100).Select(_ => new AutoResetEvent(false)).ToArray();
        int count = 0;
        var registrations = signals.Select(s => pool.RegisterWait(s, (_, _) => Interlocked.Increment(ref count), null, TimeSpan.FromMilliseconds(1), executeOnlyOnce: false))
            .Concat(events.Select(e => pool.RegisterWaitForSingleObject(e, (_, _) => Interlocked.Increment(ref count), null, 1, executeOnlyOnce: false)))
            .ToArray();
        Waits.Until(() => Volatile.Read(ref count) > 200, "the timeouts to be firing");
        pool.Dispose();
        int atDispose = Volatile.Read(ref count);
        Assert.All(registrations, r => Assert.True(r.IsUnregistered));
        Assert.Equal(0, pool.RegisteredWaitCount);
        Assert.Equal(0, pool.WaitThreadCount);
        foreach (PoolSignal signal in signals)
        {
            signal.Set();
        }
        foreach (AutoResetEvent e in events)
        {
            e.Set();
        }
        Waits.Never(() => Volatile.Read(ref count) != atDispose, "a callback after Dispose returned");
        // Shutdown ended them, and the owner's first Unregister still succeeds (it would signal a wait object); later
        // ones do nothing.
        Assert.All(registrations, r => Assert.True(r.Unregister(null)));
        Assert.All(registrations, r => Assert.False(r.Unregister(null)));
        Assert.Throws<ObjectDisposedException>(() => pool.RegisterWait(signals[0], (_, _) => { }, null, Timeout.InfiniteTimeSpan, false));
        Assert.Throws<ObjectDisposedException>(() => pool.RegisterWaitForSingleObject(events[0], (_, _) => { }, null, Timeout.Infinite, false));
        foreach (AutoResetEvent e in events)
        {
            e.Dispose();
        }
    }

    [Fact]
    public void DisposedHandle_IsRejectedAtTheCall_ByEveryOverload_WithoutTakingASlot()
    {
        using var pool = NewPool();
        using var live = new AutoResetEvent(false);
        RegisteredWait first = pool.RegisterWaitForSingleObject(live, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
        Assert.Equal(1, pool.WaitThreadCount);
        var disposed = new AutoResetEvent(false);
        disposed.Dispose();
        int called = 0;
        WaitOrTimerCallback callback = (_, _) => Interlocked.Increment(ref called);
        for (int round = 0; round < Spindle.Registrations.WaitThread.MaxHandles; round++)
        {
            Assert.Throws<ObjectDisposedException>(() => pool.RegisterWaitForSingleObject(disposed, callback, null, 1, executeOnlyOnce: false));
            Assert.Throws<ObjectDisposedException>(() => pool.RegisterWaitForSingleObject(disposed, callback, null, 1L, executeOnlyOnce: true));
            Assert.Throws<ObjectDisposedException>(() => pool.RegisterWaitForSingleObject(disposed, callback, null, 1u, executeOnlyOnce: false));
            Assert.Throws<ObjectDisposedException>(() => pool.RegisterWaitForSingleObject(disposed, callback, null, TimeSpan.FromMilliseconds(1), executeOnlyOnce: true));
            Assert.Throws<ObjectDisposedException>(() => pool.RegisterWaitForSingleObject(disposed, callback, null, Timeout.InfiniteTimeSpan, executeOnlyOnce: false));
        }
        Assert.Equal(1, pool.RegisteredWaitCount);
        Assert.Equal(1, pool.WaitThreadCount);
        // No slot was taken: the first wait thread still has room for 62 more handles.
        var more = Enumerable.Range(0, Spindle.Registrations.WaitThread.MaxHandles - 1).Select(_ => new AutoResetEvent(false)).ToArray();
        RegisteredWait[] registrations = more.Select(e => pool.RegisterWaitForSingleObject(e, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false)).ToArray();
        Assert.Equal(1, pool.WaitThreadCount);
        Waits.Never(() => Volatile.Read(ref called) > 0, "a callback of a rejected registration");
        Assert.True(first.Unregister(null));
        Assert.All(registrations, r => Assert.True(r.Unregister(null)));
        Array.ForEach(more, e => e.Dispose());
    }

    [Fact]
    public void BadInput_IsRejectedAtTheCall_WithoutRegistering()
    {
        using var pool = NewPool();
        using var handle = new AutoResetEvent(false);
        var signal = new PoolSignal();
        WaitOrTimerCallback callback = (_, _) => { };
        Assert.Throws<ArgumentNullException>("waitObject", () => pool.RegisterWaitForSingleObject(null!, callback, null, Timeout.Infinite, false));
        Assert.Throws<ArgumentNullException>("callBack", () => pool.RegisterWaitForSingleObject(handle, null!, null, Timeout.Infinite, false));
        Assert.Throws<ArgumentOutOfRangeException>("millisecondsTimeOutInterval", () => pool.RegisterWaitForSingleObject(handle, callback, null, -2, false));
        Assert.Throws<ArgumentOutOfRangeException>("millisecondsTimeOutInterval", () => pool.RegisterWaitForSingleObject(handle, callback, null, -2L, false));
        Assert.Throws<ArgumentOutOfRangeException>("millisecondsTimeOutInterval", () => pool.RegisterWaitForSingleObject(handle, callback, null, int.MaxValue + 1L, false));
        Assert.Throws<ArgumentOutOfRangeException>("millisecondsTimeOutInterval", () => pool.RegisterWaitForSingleObject(handle, callback, null, int.MaxValue + 1u, false));
        Assert.Throws<ArgumentOutOfRangeException>("millisecondsTimeOutInterval", () => pool.RegisterWaitForSingleObject(handle, callback, null, uint.MaxValue - 1, false));
        Assert.Throws<ArgumentOutOfRangeException>("timeout", () => pool.RegisterWaitForSingleObject(handle, callback, null, TimeSpan.FromMilliseconds(-5), false));
        Assert.Throws<ArgumentOutOfRangeException>("timeout", () => pool.RegisterWaitForSingleObject(handle, callback, null, TimeSpan.FromDays(30), false));
        Assert.Throws<ArgumentNullException>("signal", () => pool.RegisterWait(null!, callback, null, Timeout.InfiniteTimeSpan, false));
        Assert.Throws<ArgumentNullException>("callBack", () => pool.RegisterWait(signal, null!, null, Timeout.InfiniteTimeSpan, false));
        Assert.Throws<ArgumentOutOfRangeException>("timeout", () => pool.RegisterWait(signal, callback, null, TimeSpan.FromMilliseconds(-2), false));
        Assert.Throws<ArgumentOutOfRangeException>("mode", () => new PoolSignal(false, (PoolSignalMode)7));
        Assert.Equal(0, pool.RegisteredWaitCount);
        Assert.Equal(0, pool.WaitThreadCount);
    }
}

/// <summary>
/// A run-once registration whose callback has run has ended: the pool keeps nothing of it (a caller that never
/// unregisters it, as the built-in pool allows, leaks nothing), and a later Unregister still returns true and signals.
/// </summary>
public sealed class RunOnceRegistrationEndTests
{
    private sealed class Payload
    {
        public readonly byte[] Data = new byte[1024];
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void AFiredRunOnceRegistration_IsNotKeptByThePool(bool onSignal)
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(RunOnceRegistrationEndTests) });
        WeakReference state = RegisterRunOnceAndLetItRun(pool, onSignal);
        Waits.Until(() => pool.RegisteredWaitCount == 0, "the run-once registration to end");
        Assert.True(Waits.Poll(() =>
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            return !state.IsAlive;
        }, Waits.MustHappen), "the state of a fired run-once registration is still reachable from the pool");

        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference RegisterRunOnceAndLetItRun(WorkerPool pool, bool onSignal)
        {
            var state = new Payload();
            using var called = new ManualResetEventSlim();
            if (onSignal)
            {
                var signal = new PoolSignal();
                pool.RegisterWait(signal, (_, _) => called.Set(), state, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
                signal.Set();
                Waits.For(called, "the run-once callback");
            }
            else
            {
                using var handle = new ManualResetEvent(true);
                pool.RegisterWaitForSingleObject(handle, (_, _) => called.Set(), state, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
                Waits.For(called, "the run-once callback");
            }
            return new WeakReference(state);
        }
    }

    [Fact]
    public void UnregisterAfterARunOnceCallback_ReturnsTrueOnce_AndSignalsItsWaitObject()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(RunOnceRegistrationEndTests) });
        var signal = new PoolSignal();
        int calls = 0;
        RegisteredWait registration = pool.RegisterWait(signal, (_, _) => Interlocked.Increment(ref calls), null,
            Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
        Assert.False(registration.IsUnregistered);
        Assert.Equal(1, pool.RegisteredWaitCount);
        signal.Set();
        Waits.Until(() => registration.IsUnregistered, "the run-once registration to end after its callback");
        Assert.Equal(0, pool.RegisteredWaitCount);
        signal.Set();
        using var unregistered = new ManualResetEvent(false);
        Assert.True(registration.Unregister(unregistered));
        Assert.True(unregistered.WaitOne(Waits.MustHappen));
        Assert.False(registration.Unregister(null));
        Assert.Equal(1, Volatile.Read(ref calls));
    }
}

/// <summary>The pool signal on its own: set, reset, auto and manual modes, awaiting, cancellation.</summary>
public sealed class PoolSignalTests
{
    [Fact]
    public async Task AutoReset_ReleasesOneWaiterPerSet_InArrivalOrder()
    {
        var signal = new PoolSignal();
        Task first = signal.WaitAsync();
        Task second = signal.WaitAsync();
        Assert.False(first.IsCompleted);
        signal.Set();
        await first.WaitAsync(Waits.MustHappen);
        Assert.False(second.IsCompleted);
        Assert.False(signal.IsSet);
        signal.Set();
        await second.WaitAsync(Waits.MustHappen);
        signal.Set(); // nobody waiting: stays set for the next waiter
        Assert.True(signal.IsSet);
        Assert.True(signal.WaitAsync().IsCompleted);
        Assert.False(signal.IsSet);
    }

    [Fact]
    public async Task ManualReset_ReleasesEveryWaiter_AndStaysSetUntilReset()
    {
        var signal = new PoolSignal(false, PoolSignalMode.ManualReset);
        Task[] waiters = Enumerable.Range(0, 5).Select(_ => signal.WaitAsync()).ToArray();
        signal.Set();
        await Task.WhenAll(waiters).WaitAsync(Waits.MustHappen);
        Assert.True(signal.IsSet);
        Assert.True(signal.WaitAsync().IsCompleted);
        signal.Reset();
        Assert.False(signal.IsSet);
        Assert.False(signal.WaitAsync().IsCompleted);
        Assert.Equal(PoolSignalMode.ManualReset, signal.Mode);
    }

    [Fact]
    public async Task AwaitingTheSignal_ContinuesAsynchronously_NotInsideSet()
    {
        var signal = new PoolSignal();
        using var setReturned = new ManualResetEventSlim();
        bool continuedAfterSetReturned = false;
        Task waiter = AwaitSignal(); // runs synchronously up to the await: the wait is registered before Set
        Assert.False(waiter.IsCompleted);
        signal.Set(); // a continuation run inline here would block until the timeout and record false
        setReturned.Set();
        await waiter.WaitAsync(Waits.MustHappen);
        Assert.True(continuedAfterSetReturned);

        async Task AwaitSignal()
        {
            await signal;
            continuedAfterSetReturned = setReturned.Wait(Waits.MustHappen);
        }
    }

    [Fact]
    public async Task CancelledWait_IsCancelled_AndDoesNotConsumeALaterSet()
    {
        var signal = new PoolSignal();
        using var cts = new CancellationTokenSource();
        Task cancelled = signal.WaitAsync(cts.Token);
        Task next = signal.WaitAsync();
        cts.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => cancelled.WaitAsync(Waits.MustHappen));
        signal.Set();
        await next.WaitAsync(Waits.MustHappen); // the set went to the live waiter
        Assert.True(signal.WaitAsync(new CancellationToken(true)).IsCanceled);
    }

    [Fact]
    public void AWaitReleasedBySet_IsNotKeptReachableByItsToken()
    {
        var signal = new PoolSignal();
        using var longLived = new CancellationTokenSource(); // a host's stopping token, say: outlives every wait
        WeakReference released = WaitAndRelease(signal, longLived.Token);
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        Assert.False(released.IsAlive, "the released wait is still reachable from the token's registrations");
        GC.KeepAlive(longLived);

        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference WaitAndRelease(PoolSignal signal, CancellationToken token)
        {
            Task wait = signal.WaitAsync(token);
            signal.Set();
            Assert.True(wait.Wait(Waits.MustHappen, CancellationToken.None)); // not the wait's own token: it must not cancel this
            return new WeakReference(wait);
        }
    }

    [Fact]
    public void Registrations_TakeTurns_OnAnAutoResetSignal()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSignalTests), MinThreads = 1, MaxThreads = 1 });
        var signal = new PoolSignal();
        var order = new ConcurrentQueue<int>();
        using var all = new CountdownEvent(6);
        for (int id = 0; id < 3; id++)
        {
            int me = id;
            pool.RegisterWait(signal, (_, _) => { order.Enqueue(me); all.Signal(); }, null, Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        }
        for (int i = 0; i < 6; i++)
        {
            signal.Set();
        }
        Waits.For(all, "six releases");
        Assert.Equal(new[] { 0, 1, 2 }, order.Take(3).Order());
        Assert.Equal(new[] { 0, 1, 2 }, order.Skip(3).Order());
    }

    [Fact]
    public void ManualResetSignal_FiresEveryRegistrationOncePerSet()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSignalTests) });
        var signal = new PoolSignal(false, PoolSignalMode.ManualReset);
        var counts = new int[4];
        for (int id = 0; id < counts.Length; id++)
        {
            int me = id;
            pool.RegisterWait(signal, (_, _) => Interlocked.Increment(ref counts[me]), null, Timeout.InfiniteTimeSpan, executeOnlyOnce: false);
        }
        signal.Set();
        Waits.Until(() => counts.All(c => Volatile.Read(ref c) == 1), "one firing each");
        Waits.Never(() => counts.Any(c => Volatile.Read(ref c) > 1), "a repeating registration spinning on a set manual signal");
        signal.Set();
        Waits.Until(() => counts.All(c => Volatile.Read(ref c) == 2), "one more firing each");
    }

    [Fact]
    public void RegisteringOnASetSignal_FiresAtOnce_AndConsumesAnAutoResetSet()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSignalTests) });
        var signal = new PoolSignal(initialState: true);
        using var fired = new ManualResetEventSlim();
        pool.RegisterWait(signal, (_, timedOut) => { Assert.False(timedOut); fired.Set(); }, null, Timeout.InfiniteTimeSpan, executeOnlyOnce: true);
        Waits.For(fired, "the registration on a set signal");
        Assert.False(signal.IsSet);
    }
}
