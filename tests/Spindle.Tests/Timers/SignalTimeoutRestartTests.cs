using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Threading;
using Xunit;

namespace Spindle.Tests.Timers;

/// <summary>
/// A <see cref="PoolSignal"/> registration's timeout never comes early: it counts from the registration, from the last
/// signal, and, for a repeating registration, from the last timeout as the pool saw it (as a wait thread counts from the
/// timeout it detects), whatever the timer thread was doing meanwhile. The order of events is forced through the
/// timer thread's hand-over hook, which runs while the thread holds the timer lock.
/// </summary>
public sealed class SignalTimeoutRestartTests
{
    [Fact]
    public void ASignalWhileTheRegistrationStartsItsTimeout_CountsFromTheSignal()
    {
        var timeout = TimeSpan.FromMilliseconds(300);
        var signal = new PoolSignal();
        var timeouts = new BlockingCollection<long>();
        Thread? registrar = null;
        RegisteredWait? registration = null;
        long setAt = 0;
        int armed = 0;
        WorkerPool? self = null;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnTimerFiringsHandOver = () =>
            {
                if (Interlocked.Exchange(ref armed, 0) != 1)
                {
                    return;
                }
                // The registrar links its waiter to the signal and then waits for the timer lock this thread holds,
                // to start the timeout; the signal set meanwhile restarts that timeout (the lock is re-entrant here).
                registrar = new Thread(() => registration = self!.RegisterWait(signal,
                    (_, timedOut) => { if (timedOut) { timeouts.Add(Stopwatch.GetTimestamp()); } }, null, timeout, executeOnlyOnce: false));
                registrar.Start();
                while ((registrar.ThreadState & System.Threading.ThreadState.WaitSleepJoin) == 0)
                {
                    Thread.SpinWait(100);
                }
                Thread.Sleep(100);
                setAt = Stopwatch.GetTimestamp();
                signal.Set();
            },
        });
        self = pool;
        Volatile.Write(ref armed, 1);
        using ITimer trigger = pool.CreateTimer(_ => { }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);

        Assert.True(timeouts.TryTake(out long firstTimeout, Waits.MustHappen), "no timeout came");
        registrar!.Join();
        TimeSpan afterSet = Stopwatch.GetElapsedTime(setAt, firstTimeout);
        Assert.True(afterSet >= timeout, $"the first timeout came {afterSet.TotalMilliseconds:F1} ms after the signal");
        registration!.Unregister(null);
    }

    [Fact]
    public void ARepeatingTimeout_CountsFromTheLastTimeoutAsSeen_NotFromItsDueTime()
    {
        var timeout = TimeSpan.FromMilliseconds(200);
        int holdOnce = 0;
        long heldUntil = 0;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            // A timer thread that comes late: it holds the timer lock past the registration's first due time.
            OnTimerFiringsHandOver = () =>
            {
                if (Interlocked.Exchange(ref holdOnce, 0) == 1)
                {
                    Thread.Sleep(250);
                    Volatile.Write(ref heldUntil, Stopwatch.GetTimestamp());
                }
            },
        });
        var signal = new PoolSignal();
        var timeouts = new BlockingCollection<long>();
        RegisteredWait registration = pool.RegisterWait(signal,
            (_, timedOut) => { if (timedOut) { timeouts.Add(Stopwatch.GetTimestamp()); } }, null, timeout, executeOnlyOnce: false);
        Volatile.Write(ref holdOnce, 1);
        using ITimer trigger = pool.CreateTimer(_ => { }, null, TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan);

        Assert.True(timeouts.TryTake(out _, Waits.MustHappen), "no first timeout");
        Assert.True(timeouts.TryTake(out long second, Waits.MustHappen), "no second timeout");
        long firstSeen = Volatile.Read(ref heldUntil); // the first timeout could not be seen before the hold ended
        Assert.NotEqual(0, firstSeen);
        TimeSpan gap = Stopwatch.GetElapsedTime(firstSeen, second);
        Assert.True(gap >= timeout, $"the second timeout came {gap.TotalMilliseconds:F1} ms after the first could be seen");
        registration.Unregister(null);
    }
}
