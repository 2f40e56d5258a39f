using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>Pool timers: firing, periods, Change and Dispose, races, ordering, context, the TimeProvider, shutdown, bad input.</summary>
public sealed class WorkerPoolTimerTests
{
    private static readonly AsyncLocal<string?> s_flowed = new();

    private static WorkerPool NewPool(Action<WorkerPoolOptions>? configure = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolTimerTests),
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        configure?.Invoke(options);
        return new WorkerPool(options);
    }

    [Fact]
    public void OneShotTimer_FiresOnceOnAWorkerOfThePool_NeverBeforeItsDueTime()
    {
        using var pool = NewPool();
        using var fired = new ManualResetEventSlim();
        int count = 0;
        WorkerPool? current = null;
        long elapsedTicks = 0;
        long start = Stopwatch.GetTimestamp();
        using ITimer timer = pool.CreateTimer(state =>
        {
            elapsedTicks = Stopwatch.GetTimestamp() - start;
            current = WorkerPool.Current;
            Assert.Equal("state", state);
            Interlocked.Increment(ref count);
            fired.Set();
        }, "state", TimeSpan.FromMilliseconds(30), Timeout.InfiniteTimeSpan);
        Waits.For(fired, "the timer");
        Assert.True(elapsedTicks >= TimeSpan.FromMilliseconds(30).TotalSeconds * Stopwatch.Frequency, $"fired after {elapsedTicks * 1000.0 / Stopwatch.Frequency} ms");
        Assert.Same(pool, current);
        Waits.Never(() => Volatile.Read(ref count) > 1, "a one-shot timer firing twice");
        Assert.Equal(0, pool.ScheduledTimerCount);
    }

    [Fact]
    public void ManyTimers_EveryOneFiresExactlyOnce_NoneEarly()
    {
        const int timers = 5_000;
        using var pool = NewPool();
        var ledger = new int[timers];
        var early = 0;
        using var all = new CountdownEvent(timers);
        var list = new List<ITimer>();
        var random = new Random(7);
        for (int i = 0; i < timers; i++)
        {
            int index = i;
            int dueMs = random.Next(0, 200);
            long dueAt = Stopwatch.GetTimestamp() + dueMs * Stopwatch.Frequency / 1000;
            list.Add(pool.CreateTimer(_ =>
            {
                if (Stopwatch.GetTimestamp() < dueAt)
                {
                    Interlocked.Increment(ref early);
                }
                Interlocked.Increment(ref ledger[index]);
                all.Signal();
            }, null, TimeSpan.FromMilliseconds(dueMs), Timeout.InfiniteTimeSpan));
        }
        Waits.For(all, "every timer");
        Waits.Never(() => ledger.Any(c => Volatile.Read(ref c) > 1), "a timer firing twice");
        Assert.All(ledger, c => Assert.Equal(1, c));
        Assert.Equal(0, early);
        Assert.True(pool.HasTimerThread);
        Assert.Equal(0, pool.ScheduledTimerCount);
        list.ForEach(t => t.Dispose());
    }

    [Fact]
    public void PeriodicTimer_FiresRepeatedly_UntilDisposed()
    {
        using var pool = NewPool();
        int count = 0;
        using var five = new CountdownEvent(5);
        ITimer timer = pool.CreateTimer(_ =>
        {
            Interlocked.Increment(ref count);
            if (five.CurrentCount > 0)
            {
                five.Signal();
            }
        }, null, TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(5));
        Waits.For(five, "five periods");
        timer.Dispose();
        Thread.Sleep(20); // a firing that had started may still finish
        int afterDispose = Volatile.Read(ref count);
        Waits.Never(() => Volatile.Read(ref count) != afterDispose, "a firing after Dispose returned");
        Assert.Equal(0, pool.ScheduledTimerCount);
    }

    [Fact]
    public void PeriodicTimer_WithAFractionalPeriod_NeverFiresAheadOfItsSchedule()
    {
        // Periods are rounded up to the wheel's milliseconds: the k-th firing may come later than due + k * period,
        // never earlier.
        using var pool = NewPool();
        const int Firings = 12;
        TimeSpan due = TimeSpan.FromMilliseconds(3);
        TimeSpan period = TimeSpan.FromMilliseconds(2.5);
        var fired = new long[Firings];
        int count = 0;
        using var done = new ManualResetEventSlim(false);
        long created = Stopwatch.GetTimestamp();
        ITimer timer = pool.CreateTimer(_ =>
        {
            int k = Interlocked.Increment(ref count) - 1;
            if (k < Firings)
            {
                fired[k] = Stopwatch.GetTimestamp();
                if (k == Firings - 1)
                {
                    done.Set();
                }
            }
        }, null, due, period);
        Waits.For(done, $"{Firings} periodic firings");
        timer.Dispose();
        for (int k = 0; k < Firings; k++)
        {
            TimeSpan elapsed = Stopwatch.GetElapsedTime(created, fired[k]);
            Assert.True(elapsed >= due + k * period, $"Firing {k} came {elapsed.TotalMilliseconds:F3} ms after creation, before its schedule.");
        }
    }

    [Fact]
    public void LongTimers_PlacedWithTheCoarseClock_NeverFireEarly()
    {
        // Delays from MinDelayTicks up are placed from the coarse clock's upper bound (where it is on): each timer still
        // fires no earlier than its delay after the call, and at most the margin plus the wheel's slack later.
        using var pool = NewPool();
        TimeSpan due = TimeSpan.FromSeconds(Spindle.Timers.CoarseClock.IsEnabled
            ? Math.Min((double)Spindle.Timers.CoarseClock.MinDelayTicks / Stopwatch.Frequency, 11.0)
            : 2.0);
        const int Timers = 20;
        var fired = new long[Timers];
        var created = new long[Timers];
        using var all = new CountdownEvent(Timers);
        var timers = new ITimer[Timers];
        for (int i = 0; i < Timers; i++)
        {
            int index = i;
            created[i] = Stopwatch.GetTimestamp();
            timers[i] = pool.CreateTimer(_ =>
            {
                fired[index] = Stopwatch.GetTimestamp();
                all.Signal();
            }, null, due + TimeSpan.FromMilliseconds(i * 0.37), Timeout.InfiniteTimeSpan);
            Thread.SpinWait(2_000 * i); // spread the calls across the coarse clock's ticks
        }
        Waits.For(all, $"{Timers} long timers");
        for (int i = 0; i < Timers; i++)
        {
            timers[i].Dispose();
            TimeSpan elapsed = Stopwatch.GetElapsedTime(created[i], fired[i]);
            TimeSpan wanted = due + TimeSpan.FromMilliseconds(i * 0.37);
            Assert.True(elapsed >= wanted, $"Timer {i} fired {elapsed.TotalMilliseconds:F3} ms after it was created, before its {wanted.TotalMilliseconds:F3} ms.");
        }
    }

    [Fact]
    public void TimerOnAPoolWithoutWorkers_FlowsTheContextOnlyWhenThereIsOne()
    {
        using var pool = NewPool(o => o.MinThreads = 0);
        string? seenWithout = "unset";
        string? seenWith = null;
        using var both = new CountdownEvent(2);
        using ITimer plain = pool.CreateTimer(_ => { seenWithout = s_flowed.Value; both.Signal(); }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);
        s_flowed.Value = "flowed to the timer";
        try
        {
            using ITimer flowing = pool.CreateTimer(_ => { seenWith = s_flowed.Value; both.Signal(); }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);
            Waits.For(both, "both timers");
        }
        finally
        {
            s_flowed.Value = null;
        }
        Assert.Null(seenWithout);
        Assert.Equal("flowed to the timer", seenWith);
    }

    [Fact]
    public void Change_Reschedules_Stops_AndReturnsFalseOnceDisposed()
    {
        using var pool = NewPool();
        int count = 0;
        using var fired = new SemaphoreSlim(0);
        ITimer timer = pool.CreateTimer(_ => { Interlocked.Increment(ref count); fired.Release(); }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        Waits.Never(() => Volatile.Read(ref count) > 0, "a timer created stopped firing");

        Assert.True(timer.Change(TimeSpan.FromMilliseconds(5), Timeout.InfiniteTimeSpan));
        Waits.For(fired, "the started timer");

        Assert.True(timer.Change(TimeSpan.FromHours(1), Timeout.InfiniteTimeSpan));
        Assert.Equal(1, pool.ScheduledTimerCount);
        Assert.True(timer.Change(TimeSpan.Zero, Timeout.InfiniteTimeSpan)); // moved earlier: fires now
        Waits.For(fired, "the timer moved earlier");

        Assert.True(timer.Change(TimeSpan.FromHours(1), TimeSpan.FromHours(1)));
        Assert.True(timer.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan)); // stopped
        Assert.Equal(0, pool.ScheduledTimerCount);

        timer.Dispose();
        timer.Dispose(); // idempotent
        Assert.False(timer.Change(TimeSpan.Zero, Timeout.InfiniteTimeSpan));
        Waits.Never(() => Volatile.Read(ref count) > 2, "a disposed timer firing");
    }

    [Fact]
    public async Task DisposeAsync_CancelsTheTimer()
    {
        using var pool = NewPool();
        int count = 0;
        // Due well inside the must-not-happen window, and far enough out that a descheduled test thread still disposes
        // the timer first.
        ITimer timer = pool.CreateTimer(_ => Interlocked.Increment(ref count), null, TimeSpan.FromMilliseconds(120), Timeout.InfiniteTimeSpan);
        await timer.DisposeAsync();
        Waits.Never(() => Volatile.Read(ref count) > 0, "a timer disposed before its due time firing");
    }

    public static TheoryData<string, bool> CreatorsAndPeriodicity => new()
    {
        { "pool", false },
        { "pool", true },
        { "provider", false },
        { "provider", true },
    };

    private static ITimer CreateTimer(WorkerPool pool, string creator, TimerCallback callback, TimeSpan dueTime, TimeSpan period) =>
        creator == "provider"
            ? pool.TimeProvider.CreateTimer(callback, null, dueTime, period)
            : pool.CreateTimer(callback, null, dueTime, period);

    [Theory]
    [MemberData(nameof(CreatorsAndPeriodicity))]
    public async Task DisposeAsync_CompletesOnlyOnceTheRunningCallbackHasReturned(string creator, bool periodic)
    {
        // As with TimeProvider.System's timers: code that awaits DisposeAsync may free what the callback uses.
        using var pool = NewPool();
        using var inside = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        int running = 0;
        int started = 0;
        ITimer timer = CreateTimer(pool, creator, _ =>
        {
            Interlocked.Increment(ref running);
            Interlocked.Increment(ref started);
            inside.Set();
            gate.Wait(Waits.MustHappen);
            Interlocked.Decrement(ref running);
        }, TimeSpan.Zero, periodic ? TimeSpan.FromMilliseconds(1) : Timeout.InfiniteTimeSpan);
        Task disposal;
        try
        {
            Waits.For(inside, "the callback to start");
            disposal = timer.DisposeAsync().AsTask();
            Waits.Never(() => disposal.IsCompleted, "DisposeAsync completing while a callback is still running");
        }
        finally
        {
            gate.Set();
        }
        await disposal.WaitAsync(Waits.MustHappen);
        Assert.Equal(0, Volatile.Read(ref running));
        int startedBefore = Volatile.Read(ref started);
        Waits.Never(() => Volatile.Read(ref started) != startedBefore, "a callback starting after DisposeAsync completed");
        Assert.False(timer.Change(TimeSpan.Zero, Timeout.InfiniteTimeSpan));
        await timer.DisposeAsync(); // a second call, once nothing runs, completes too
    }

    [Fact]
    public async Task DisposeAsync_WaitsForEveryOverlappingCallbackOfAPeriodicTimer()
    {
        // Far more overlapping callbacks of one timer than a handful: each one must be waited for.
        const int Overlapping = 48;
        using var pool = NewPool(o => { o.MinThreads = Overlapping + 2; o.MaxThreads = Overlapping + 2; });
        using var gate = new ManualResetEventSlim();
        int running = 0;
        ITimer timer = pool.CreateTimer(_ =>
        {
            Interlocked.Increment(ref running);
            gate.Wait(Waits.MustHappen);
            Interlocked.Decrement(ref running);
        }, null, TimeSpan.Zero, TimeSpan.FromMilliseconds(1));
        Task first, second;
        try
        {
            Waits.Until(() => Volatile.Read(ref running) >= Overlapping, $"{Overlapping} overlapping callbacks");
            first = timer.DisposeAsync().AsTask();
            second = timer.DisposeAsync().AsTask();
            Waits.Never(() => first.IsCompleted || second.IsCompleted, "DisposeAsync completing while callbacks are still running");
        }
        finally
        {
            gate.Set();
        }
        await Task.WhenAll(first, second).WaitAsync(Waits.MustHappen);
        Assert.Equal(0, Volatile.Read(ref running));
    }

    [Fact]
    public async Task DisposeAsyncRacingShortCallbacks_CompletesEveryTime_AndNeverWhileOneRuns()
    {
        const int Timers = 300;
        using var pool = NewPool(o => { o.MinThreads = 4; o.MaxThreads = 4; });
        var running = new int[Timers];
        var started = new int[Timers];
        var timers = new ITimer[Timers];
        for (int i = 0; i < Timers; i++)
        {
            int index = i;
            timers[i] = pool.CreateTimer(_ =>
            {
                Interlocked.Increment(ref running[index]);
                Interlocked.Increment(ref started[index]);
                Thread.SpinWait(50 * (index % 13));
                Interlocked.Decrement(ref running[index]);
            }, null, TimeSpan.FromMilliseconds(index % 3), TimeSpan.FromMilliseconds(1 + index % 2));
        }
        Waits.Until(() => Enumerable.Range(0, Timers).All(i => Volatile.Read(ref started[i]) > 0), "every timer to fire");
        var stillRunning = new List<int>();
        for (int i = 0; i < Timers; i++)
        {
            await timers[i].DisposeAsync().AsTask().WaitAsync(Waits.MustHappen);
            if (Volatile.Read(ref running[i]) != 0)
            {
                stillRunning.Add(i);
            }
            Thread.SpinWait(100 * (i % 7)); // dispose at scattered points of the callbacks
        }
        Assert.Empty(stillRunning);
        int[] startedAfter = (int[])started.Clone(); // every timer is disposed and idle: the counts are final
        Waits.Never(() => Enumerable.Range(0, Timers).Any(i => Volatile.Read(ref started[i]) != startedAfter[i]), "a callback starting after DisposeAsync completed");
    }

    [Fact]
    public async Task DisposeAsync_OfAnIdleTimer_CompletesAtOnce_AndASecondCallIsFine()
    {
        using var pool = NewPool();
        int count = 0;
        ITimer stopped = pool.CreateTimer(_ => Interlocked.Increment(ref count), null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        Assert.True(stopped.DisposeAsync().IsCompletedSuccessfully);
        Assert.True(stopped.DisposeAsync().IsCompletedSuccessfully);
        ITimer pending = pool.TimeProvider.CreateTimer(_ => Interlocked.Increment(ref count), null, TimeSpan.FromHours(1), TimeSpan.FromHours(1));
        Assert.True(pending.DisposeAsync().IsCompletedSuccessfully);
        pending.Dispose();
        Assert.True(pending.DisposeAsync().IsCompletedSuccessfully);
        using var fired = new ManualResetEventSlim();
        ITimer done = pool.CreateTimer(_ => fired.Set(), null, TimeSpan.Zero, Timeout.InfiniteTimeSpan);
        Waits.For(fired, "the timer");
        await done.DisposeAsync().AsTask().WaitAsync(Waits.MustHappen);
        Assert.True(done.DisposeAsync().IsCompletedSuccessfully);
        Assert.Equal(0, Volatile.Read(ref count));
    }

    [Fact]
    public async Task DisposeAsync_CalledByTheTimersOwnCallback_CompletesAfterTheCallbackReturns()
    {
        using var pool = NewPool();
        using var returning = new ManualResetEventSlim();
        ITimer? timer = null;
        Task? disposal = null;
        bool completedInside = true;
        using var created = new ManualResetEventSlim();
        timer = pool.CreateTimer(_ =>
        {
            created.Wait(Waits.MustHappen);
            disposal = timer!.DisposeAsync().AsTask();
            completedInside = disposal.IsCompleted;
            returning.Set();
        }, null, TimeSpan.Zero, TimeSpan.FromMilliseconds(1));
        created.Set();
        Waits.For(returning, "the callback to call DisposeAsync");
        Assert.False(completedInside, "DisposeAsync completed inside the callback it waits for");
        await disposal!.WaitAsync(Waits.MustHappen);
    }

    [Fact]
    public async Task DisposeAsync_Completes_WhenTheRunningCallbackThrows()
    {
        using var pool = NewPool();
        using var inside = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        ITimer timer = pool.CreateTimer(_ =>
        {
            inside.Set();
            gate.Wait(Waits.MustHappen);
            throw new InvalidOperationException("from the timer callback");
        }, null, TimeSpan.Zero, Timeout.InfiniteTimeSpan);
        Task disposal;
        try
        {
            Waits.For(inside, "the callback to start");
            disposal = timer.DisposeAsync().AsTask();
            Waits.Never(() => disposal.IsCompleted, "DisposeAsync completing while the callback is still running");
        }
        finally
        {
            gate.Set();
        }
        await disposal.WaitAsync(Waits.MustHappen);
    }

    [Fact]
    public void Dispose_DoesNotWaitForARunningCallback()
    {
        using var pool = NewPool();
        using var inside = new ManualResetEventSlim();
        using var gate = new ManualResetEventSlim();
        int count = 0;
        ITimer timer = pool.CreateTimer(_ =>
        {
            Interlocked.Increment(ref count);
            inside.Set();
            gate.Wait(); // longer than the bound below: a Dispose that waited for the callback would exceed it
        }, null, TimeSpan.Zero, TimeSpan.FromMilliseconds(1));
        try
        {
            Waits.For(inside, "the callback to start");
            Waits.RunBounded(timer.Dispose, "Dispose while the callback is blocked");
            Assert.True(Volatile.Read(ref count) >= 1);
        }
        finally
        {
            gate.Set();
        }
    }

    [Fact]
    public void Dispose_DropsAFiringThatIsQueuedButNotStarted()
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        using var gate = new ManualResetEventSlim();
        using var blocked = new ManualResetEventSlim();
        int count = 0;
        pool.QueueUserWorkItem(_ => { blocked.Set(); gate.Wait(Waits.MustHappen); }, null);
        Waits.For(blocked, "the only worker to be busy");
        ITimer timer = pool.CreateTimer(_ => Interlocked.Increment(ref count), null, TimeSpan.Zero, Timeout.InfiniteTimeSpan);
        Waits.Until(() => pool.PendingWorkItemCount == 1 && pool.ScheduledTimerCount == 0, "the firing to be queued");
        timer.Dispose();
        gate.Set();
        Waits.Until(() => pool.PendingWorkItemCount == 0, "the queue to drain");
        Waits.Never(() => Volatile.Read(ref count) > 0, "a firing of a disposed timer");
    }

    [Fact]
    public void DisposeRacingTheFiring_EachTimerRunsAtMostOnce_AndNoneIsLeftScheduled()
    {
        const int rounds = 2_000;
        using var pool = NewPool(o => { o.MinThreads = 2; o.MaxThreads = 2; });
        var runs = new int[rounds];
        var timers = new ITimer[rounds];
        for (int i = 0; i < rounds; i++)
        {
            int index = i;
            timers[i] = pool.CreateTimer(_ => Interlocked.Increment(ref runs[index]), null, TimeSpan.FromMilliseconds(i % 3), Timeout.InfiniteTimeSpan);
            if (i % 4 != 0)
            {
                Thread.SpinWait(i % 700);
            }
            timers[(i * 7) % (i + 1)].Dispose(); // this round's timer or an earlier one, at various delays
        }
        foreach (ITimer timer in timers)
        {
            timer.Dispose();
        }
        Waits.Until(() => pool.PendingWorkItemCount == 0, "the queued firings to drain");
        Assert.Equal(0, pool.ScheduledTimerCount);
        Assert.All(runs, r => Assert.InRange(r, 0, 1));
    }

    [Fact]
    public void TimersOnAOneThreadPool_FireInDueOrder()
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        var order = new ConcurrentQueue<int>();
        using var all = new CountdownEvent(10);
        using var gate = new ManualResetEventSlim();
        // Hold the only worker until every timer is due, so all ten wait in the ready list together.
        pool.QueueUserWorkItem(_ => gate.Wait(Waits.MustHappen), null);
        var timers = new ITimer[10];
        for (int i = 9; i >= 0; i--) // created latest-due first: the order must come from the due times
        {
            int id = i;
            timers[i] = pool.CreateTimer(_ => { order.Enqueue(id); all.Signal(); }, null, TimeSpan.FromMilliseconds(10 + 10 * i), Timeout.InfiniteTimeSpan);
        }
        // The due tick each timer got (a slow first call can shift the early-created ones later than planned).
        long[] due = timers.Select(t => ((Spindle.Timers.TimerNode)t).When).ToArray();
        Thread.Sleep(150);
        gate.Set();
        Waits.For(all, "the ten timers");
        int[] fired = order.ToArray();
        for (int k = 1; k < fired.Length; k++)
        {
            Assert.True(due[fired[k - 1]] <= due[fired[k]], $"fired {string.Join(",", fired)} with due ticks {string.Join(",", due)}");
        }
        Array.ForEach(timers, t => t.Dispose());
    }

    [Fact]
    public void TimerCallbacks_JumpTheQueue_OfABusyPool()
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        using var fired = new ManualResetEventSlim();
        long backlogLeftWhenFired = -1;
        int backlogDone = 0;
        const int backlog = 1_000;
        for (int i = 0; i < backlog; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                Thread.Sleep(0);
                Thread.SpinWait(5_000);
                Interlocked.Increment(ref backlogDone);
            }, null);
        }
        using ITimer timer = pool.CreateTimer(_ =>
        {
            backlogLeftWhenFired = backlog - Volatile.Read(ref backlogDone);
            fired.Set();
        }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);
        Waits.For(fired, "the timer");
        Waits.Until(() => Volatile.Read(ref backlogDone) == backlog, "the backlog");
        // The timer ran as soon as it was due, ahead of the backlog queued before it (with a 1 ms due time it cannot
        // have waited for 1,000 items, unless timers were queued behind ordinary work).
        Assert.True(backlogLeftWhenFired > 0, "the timer ran only after the whole backlog");
    }

    [Fact]
    public void ABurstOfDueTimers_LetsAnItemQueuedBehindItRun_BeforeTheRestOfTheBurst()
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        using var gate = new ManualResetEventSlim();
        using var all = new CountdownEvent(20);
        int callbacksStarted = 0;
        int startedBeforeItem = -1;
        using var itemRan = new ManualResetEventSlim();
        // Hold the only worker until all twenty timers are due, so they wait together ahead of ordinary work.
        pool.QueueUserWorkItem(_ => gate.Wait(Waits.MustHappen), null);
        var timers = new ITimer[20];
        for (int i = 0; i < timers.Length; i++)
        {
            timers[i] = pool.CreateTimer(_ =>
            {
                Interlocked.Increment(ref callbacksStarted);
                long until = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 500; // 2 ms of work, far past a turn
                while (Stopwatch.GetTimestamp() < until)
                {
                    Thread.SpinWait(20);
                }
                all.Signal();
            }, null, TimeSpan.FromMilliseconds(5), Timeout.InfiniteTimeSpan);
        }
        Thread.Sleep(100);
        pool.QueueUserWorkItem(_ =>
        {
            startedBeforeItem = Volatile.Read(ref callbacksStarted);
            itemRan.Set();
        }, null);
        gate.Set();
        Waits.For(itemRan, "the ordinary item");
        Waits.For(all, "the twenty timers");
        Array.ForEach(timers, t => t.Dispose());
        // Timers still go first, but after a run of callbacks one ordinary item gets its turn: the item queued behind
        // the burst starts after one or two callbacks, not after all twenty (40 ms of them).
        Assert.InRange(startedBeforeItem, 1, 2);
    }

    [Fact]
    public void Callback_FlowsTheExecutionContext_WhenThePoolDoes()
    {
        using var flowing = NewPool();
        using var notFlowing = NewPool(o => o.FlowExecutionContext = false);
        s_flowed.Value = "caller";
        try
        {
            foreach ((WorkerPool pool, string? expected) in new[] { (flowing, "caller"), (notFlowing, (string?)null) })
            {
                string? seen = "unset";
                using var fired = new ManualResetEventSlim();
                using ITimer timer = pool.CreateTimer(_ => { seen = s_flowed.Value; fired.Set(); }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);
                Waits.For(fired, "the timer");
                Assert.Equal(expected, seen);
            }
        }
        finally
        {
            s_flowed.Value = null;
        }
    }

    [Fact]
    public void ThrowingCallback_FollowsTheExceptionPolicy()
    {
        using var pool = NewPool();
        using var reported = new ManualResetEventSlim();
        Exception? seen = null;
        pool.UnhandledException += (_, e) => { seen = e.Exception; e.Handled = true; reported.Set(); };
        using ITimer timer = pool.CreateTimer(_ => throw new InvalidOperationException("boom"), null, TimeSpan.Zero, Timeout.InfiniteTimeSpan);
        Waits.For(reported, "the exception report");
        Assert.Equal("boom", Assert.IsType<InvalidOperationException>(seen).Message);
    }

    [Fact]
    public void CreatingATimer_ReadiesTheThreadsItsFiringsNeed_EvenUnscheduled()
    {
        using var pool = NewPool();
        Assert.False(pool.HasTimerThread);
        Assert.Equal(0, pool.ThreadCount);
        using ITimer timer = pool.CreateTimer(static _ => { }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        // Created under load at the first firing instead, each thread would wait for its first time slice.
        Assert.True(pool.HasTimerThread, "an unscheduled timer did not start the timer thread");
        Assert.Equal(1, pool.ThreadCount); // one worker, parked until the first firing
        Assert.Equal(0, pool.ScheduledTimerCount);

        using var fired = new ManualResetEventSlim();
        WorkerPool? ranOn = null;
        using ITimer second = pool.CreateTimer(_ => { ranOn = WorkerPool.Current; fired.Set(); }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        Assert.Equal(1, pool.ThreadCount); // the worker is not added twice
        second.Change(TimeSpan.FromMilliseconds(5), Timeout.InfiniteTimeSpan);
        Waits.For(fired, "the timer started by Change");
        Assert.Same(pool, ranOn);
    }

    [Fact]
    public void ManyTimers_HoldNoThreadOfTheirOwn()
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        Assert.False(pool.HasTimerThread); // started by the first timer only
        var timers = Enumerable.Range(0, 10_000)
            .Select(i => pool.CreateTimer(static _ => { }, null, TimeSpan.FromHours(1), Timeout.InfiniteTimeSpan))
            .ToList();
        Assert.Equal(10_000, pool.ScheduledTimerCount);
        Assert.True(pool.HasTimerThread); // the one timer thread of the pool
        Assert.True(pool.ThreadCount <= 1);
        Assert.Equal(0, pool.DedicatedThreadCount);
        Assert.Equal(0, pool.WaitThreadCount);
        timers.ForEach(t => t.Dispose());
        Assert.Equal(0, pool.ScheduledTimerCount);
    }

    [Fact]
    public void Dispose_WithTimersOutstanding_TheyFireElsewhereUntilDisposed_ThenTheTimerThreadExits()
    {
        var pool = NewPool();
        int count = 0;
        WorkerPool? firedOn = pool;
        var timers = Enumerable.Range(0, 1_000)
            .Select(i => pool.CreateTimer(_ =>
            {
                Interlocked.Increment(ref count);
                Volatile.Write(ref firedOn, WorkerPool.Current);
            }, null, TimeSpan.FromMilliseconds(i % 20), TimeSpan.FromMilliseconds(1)))
            .ToList();
        Waits.Until(() => Volatile.Read(ref count) > 100, "the timers to be firing");
        Assert.True(pool.TimerThreadIsAlive);
        pool.Dispose();
        Assert.Equal(0, pool.ThreadCount);
        Assert.Throws<ObjectDisposedException>(() => pool.CreateTimer(_ => { }, null, TimeSpan.Zero, Timeout.InfiniteTimeSpan));
        Assert.Throws<ObjectDisposedException>(() => pool.TimeProvider.CreateTimer(_ => { }, null, TimeSpan.Zero, Timeout.InfiniteTimeSpan));

        // The timers outlive the pool's workers: their callbacks go on, on the built-in pool, and are counted.
        int atDispose = Volatile.Read(ref count);
        Waits.Until(() => Volatile.Read(ref count) > atDispose + 100 && Volatile.Read(ref firedOn) is null, "callbacks after Dispose");
        Assert.True(pool.RedirectedCallbackCount > 0);

        foreach (ITimer timer in timers)
        {
            timer.Dispose();
        }
        Assert.Equal(0, pool.ScheduledTimerCount);
        Waits.Until(() => !pool.TimerThreadIsAlive, "the timer thread exits once no timer is scheduled");
        int afterDispose = Volatile.Read(ref count);
        Waits.Never(() => Volatile.Read(ref count) > afterDispose + 1_000, "callbacks go on after every timer was disposed");
        Assert.All(timers, t => Assert.False(t.Change(TimeSpan.Zero, Timeout.InfiniteTimeSpan)));
    }

    [Fact]
    public void TimerChangedAfterThePoolStopped_FiresOnTheBuiltInPool()
    {
        var pool = NewPool();
        using var fired = new ManualResetEventSlim();
        WorkerPool? firedOn = pool;
        ITimer timer = pool.CreateTimer(_ =>
        {
            firedOn = WorkerPool.Current;
            fired.Set();
        }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        pool.Dispose();
        Waits.Until(() => !pool.TimerThreadIsAlive, "the timer thread exits with nothing scheduled");
        Assert.True(timer.Change(TimeSpan.FromMilliseconds(5), Timeout.InfiniteTimeSpan));
        Waits.For(fired, "the timer fires");
        Assert.Null(firedOn);
        Assert.Equal(1, pool.RedirectedCallbackCount);
        timer.Dispose();
        Waits.Until(() => !pool.TimerThreadIsAlive, "the timer thread exits again");
    }

    [Fact]
    public void BadInput_IsRejectedAtTheCall()
    {
        using var pool = NewPool();
        Assert.Throws<ArgumentNullException>("callback", () => pool.CreateTimer(null!, null, TimeSpan.Zero, Timeout.InfiniteTimeSpan));
        Assert.Throws<ArgumentOutOfRangeException>("dueTime", () => pool.CreateTimer(_ => { }, null, TimeSpan.FromMilliseconds(-2), Timeout.InfiniteTimeSpan));
        Assert.Throws<ArgumentOutOfRangeException>("period", () => pool.CreateTimer(_ => { }, null, TimeSpan.Zero, TimeSpan.FromMilliseconds(-5)));
        Assert.Throws<ArgumentOutOfRangeException>("dueTime", () => pool.CreateTimer(_ => { }, null, TimeSpan.FromDays(60), Timeout.InfiniteTimeSpan));
        Assert.Equal(0, pool.ScheduledTimerCount);
        using ITimer timer = pool.CreateTimer(_ => { }, null, TimeSpan.FromHours(1), Timeout.InfiniteTimeSpan);
        Assert.Throws<ArgumentOutOfRangeException>("dueTime", () => timer.Change(TimeSpan.FromMilliseconds(-3), TimeSpan.Zero));
        Assert.Equal(1, pool.ScheduledTimerCount); // the failed Change left the timer as it was
    }

    /// <summary>
    /// Values <see cref="TimeProvider.System"/> (and <see cref="Timer"/>) accept because they judge a time on its whole
    /// milliseconds: -0.5 ms and -100 ns are zero, -1.5 ms is infinite, 4,294,967,294.5 ms is the maximum.
    /// </summary>
    public static TheoryData<long, bool> FractionalEdges => new()
    {
        { -5_000, false },
        { -1, false },
        { -15_000, true },
        { 0xFFFFFFFEL * TimeSpan.TicksPerMillisecond + 5_000, false },
    };

    [Theory]
    [MemberData(nameof(FractionalEdges))]
    public void TimesTheSystemTimersAccept_AreAccepted_WithTheSameMeaning(long ticks, bool infinite)
    {
        TimeSpan value = TimeSpan.FromTicks(ticks);
        using (ITimer system = TimeProvider.System.CreateTimer(_ => { }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan))
        {
            system.Change(value, Timeout.InfiniteTimeSpan); // the reference accepts it
            system.Change(Timeout.InfiniteTimeSpan, value);
        }
        using var pool = NewPool();
        using var fired = new ManualResetEventSlim();
        using ITimer timer = pool.TimeProvider.CreateTimer(_ => fired.Set(), null, Timeout.InfiniteTimeSpan, value);
        Assert.True(timer.Change(value, Timeout.InfiniteTimeSpan));
        bool firesSoon = ticks < 0 && !infinite;
        if (firesSoon)
        {
            Waits.For(fired, "a timer due in a negative fraction of a millisecond, which is zero");
        }
        else
        {
            Assert.False(fired.Wait(Waits.MustNotHappen), "a timer due at infinity or at the maximum fired");
        }
        // CancellationTokenSource validates its delay by the same rule, then hands the TimeSpan to the provider unchanged.
        using var source = new CancellationTokenSource(value, pool.TimeProvider);
        Assert.Equal(firesSoon, Waits.Poll(() => source.IsCancellationRequested, firesSoon ? Waits.MustHappen : Waits.MustNotHappen));
    }

    [Fact]
    public async Task TimeProvider_DrivesTaskDelay_OnThePoolsTimers()
    {
        using var pool = NewPool();
        TimeProvider provider = pool.TimeProvider;
        Assert.Same(provider, pool.TimeProvider);
        long start = Stopwatch.GetTimestamp();
        await Task.Delay(TimeSpan.FromMilliseconds(20), provider);
        Assert.True(Stopwatch.GetElapsedTime(start) >= TimeSpan.FromMilliseconds(20));
        Assert.True(pool.HasTimerThread, "Task.Delay did not use the pool's timers");
    }

    [Fact]
    public void TimeProvider_CancellationTokenSourceTimeout_Fires()
    {
        using var pool = NewPool();
        // The source's timer is the provider's, created stopped; it starts only once the callback is registered (a
        // registration made after the cancellation would run at once on this thread).
        using var cts = new CancellationTokenSource(Timeout.InfiniteTimeSpan, pool.TimeProvider);
        WorkerPool? current = null;
        using var cancelled = new ManualResetEventSlim();
        cts.Token.Register(() => { current = WorkerPool.Current; cancelled.Set(); });
        cts.CancelAfter(TimeSpan.FromMilliseconds(10));
        Waits.For(cancelled, "the timed cancellation");
        Assert.Same(pool, current); // the timer callback, and so the cancellation, ran on the pool
    }

    [Fact]
    public void TimeProvider_CreateTimer_FollowsTheITimerContract()
    {
        using var pool = NewPool();
        TimeProvider provider = pool.TimeProvider;
        int count = 0;
        using var fired = new SemaphoreSlim(0);
        ITimer timer = provider.CreateTimer(s => { Assert.Equal(42, s); Interlocked.Increment(ref count); fired.Release(); }, 42, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        Waits.Never(() => Volatile.Read(ref count) > 0, "a timer created with an infinite due time firing");
        Assert.True(timer.Change(TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(2)));
        Waits.For(fired, "the first period");
        Waits.For(fired, "the second period");
        Assert.True(timer.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan));
        Thread.Sleep(10);
        int stopped = Volatile.Read(ref count);
        Waits.Never(() => Volatile.Read(ref count) > stopped, "a stopped timer firing");
        timer.Dispose();
        Assert.False(timer.Change(TimeSpan.Zero, Timeout.InfiniteTimeSpan));
        Assert.Throws<ArgumentNullException>("callback", () => provider.CreateTimer(null!, null, TimeSpan.Zero, TimeSpan.Zero));
        Assert.Throws<ArgumentOutOfRangeException>("period", () => provider.CreateTimer(_ => { }, null, TimeSpan.Zero, TimeSpan.FromMilliseconds(-2)));
        Assert.Equal(TimeProvider.System.GetUtcNow().Year, provider.GetUtcNow().Year); // time itself is the system's
    }

    [Fact]
    public void SlowPeriodicCallback_DoesNotPileUpFirings()
    {
        using var pool = NewPool(o => { o.MinThreads = 1; o.MaxThreads = 1; });
        using var gate = new ManualResetEventSlim();
        int count = 0;
        // The only worker is blocked for 100 ms while a 1 ms periodic timer comes due about 100 times.
        pool.QueueUserWorkItem(_ => gate.Wait(Waits.MustHappen), null);
        using ITimer timer = pool.CreateTimer(_ => Interlocked.Increment(ref count), null, TimeSpan.FromMilliseconds(1), TimeSpan.FromMilliseconds(1));
        Thread.Sleep(100);
        timer.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        gate.Set();
        Waits.Until(() => pool.PendingWorkItemCount == 0, "the worker to catch up");
        Thread.Sleep(20);
        // Firings that came due while the previous one was still queued merged into it: at most one was waiting.
        Assert.True(Volatile.Read(ref count) <= 2, $"{count} firings ran after the stall");
    }
}
