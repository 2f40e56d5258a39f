using System;
using System.Threading;
using Spindle.Parking;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// The one-permit contract of <see cref="ThreadBlocker"/>, run against every kind this platform has: a signal is never
/// lost, is consumed by one wait, and a timed wait times out.
/// </summary>
public abstract class ThreadBlockerContractTests
{
    private protected abstract BlockerKind Kind { get; }

    /// <summary>False when this platform lacks the primitive (the tests then have nothing to check).</summary>
    protected virtual bool IsAvailable => true;

    private ThreadBlocker Create()
    {
        ThreadBlocker blocker = ThreadBlocker.Create(Kind);
        Assert.Equal(Kind, blocker.Kind);
        return blocker;
    }

    [Fact]
    public void SignalBeforeWait_MakesTheWaitReturnAtOnce()
    {
        if (!IsAvailable)
        {
            return;
        }
        ThreadBlocker blocker = Create();
        blocker.Signal();
        Assert.True(blocker.Wait(0));

        blocker.Signal();
        bool returned = false;
        Waits.RunBounded(() => returned = blocker.Wait(), "an infinite wait after a signal");
        Assert.True(returned);
    }

    [Fact]
    public void WaitThenSignalFromAnotherThread_WakesTheWaiter()
    {
        if (!IsAvailable)
        {
            return;
        }
        ThreadBlocker blocker = Create();
        for (int round = 0; round < 20; round++)
        {
            bool woke = false;
            TestThread waiter = Waits.Start(() => woke = blocker.Wait(), "waiter");
            // Give the waiter time to go to sleep in some rounds and none in others.
            if (round % 2 == 0)
            {
                Thread.Sleep(20);
            }
            blocker.Signal();
            waiter.Join();
            Assert.True(woke);
        }
    }

    [Fact]
    public void TimedWait_WithoutASignal_TimesOutReturningFalse()
    {
        if (!IsAvailable)
        {
            return;
        }
        ThreadBlocker blocker = Create();
        Assert.False(blocker.Wait(0));
        Assert.False(blocker.Wait(1));
        Assert.False(blocker.Wait(50));
        // Still usable after timing out.
        blocker.Signal();
        Assert.True(blocker.Wait(0));
    }

    [Fact]
    public void ASignal_IsConsumedByOneWait()
    {
        if (!IsAvailable)
        {
            return;
        }
        ThreadBlocker blocker = Create();
        blocker.Signal();
        Assert.True(blocker.Wait(Timeout.Infinite));
        Assert.False(blocker.Wait(50));

        // Signals do not accumulate: it is one permit.
        blocker.Signal();
        blocker.Signal();
        blocker.Signal();
        Assert.True(blocker.Wait(0));
        Assert.False(blocker.Wait(50));
    }

    [Fact]
    public void PingPongBetweenTwoThreads_NeverHangs() => RunPingPong(iterations: 20_000);

    internal void RunPingPong(int iterations)
    {
        if (!IsAvailable)
        {
            return;
        }
        // Each thread owns one blocker and waits only on it; the other thread signals it.
        ThreadBlocker ping = Create();
        ThreadBlocker pong = Create();
        int pingRounds = 0, pongRounds = 0;
        TestThread left = Waits.Start(() =>
        {
            for (int i = 0; i < iterations; i++)
            {
                pong.Signal();
                ping.Wait();
                pingRounds++;
            }
        }, "ping");
        TestThread right = Waits.Start(() =>
        {
            for (int i = 0; i < iterations; i++)
            {
                pong.Wait();
                pongRounds++;
                ping.Signal();
            }
        }, "pong");
        left.Join();
        right.Join();
        Assert.Equal(iterations, pingRounds);
        Assert.Equal(iterations, pongRounds);
        // Every signal was consumed: no permit is left over.
        Assert.False(ping.Wait(0));
        Assert.False(pong.Wait(0));
    }

    [Fact]
    public void TimedWaitsRacingSignals_ConsumeEachSignalExactlyOnce() => RunTimedWaitRace(iterations: 2_000);

    internal void RunTimedWaitRace(int iterations)
    {
        if (!IsAvailable)
        {
            return;
        }
        // The waiter polls with very short timed waits, so signals keep landing just as a wait times out. Each signal
        // is sent only after the previous one was consumed, so the count of successful waits is exact.
        ThreadBlocker blocker = Create();
        ThreadBlocker acknowledged = Create();
        int consumed = 0;
        TestThread waiter = Waits.Start(() =>
        {
            for (int i = 0; i < iterations; i++)
            {
                long deadline = Environment.TickCount64 + (long)Waits.MustHappen.TotalMilliseconds;
                while (!blocker.Wait(i % 3))
                {
                    if (Environment.TickCount64 > deadline)
                    {
                        return;
                    }
                }
                consumed++;
                acknowledged.Signal();
            }
        }, "timed waiter");
        var random = new Random(iterations);
        for (int i = 0; i < iterations; i++)
        {
            Thread.SpinWait(random.Next(0, 5_000));
            blocker.Signal();
            Assert.True(acknowledged.Wait(Waits.MustHappenMilliseconds), $"Signal {i} was never consumed.");
        }
        waiter.Join();
        Assert.Equal(iterations, consumed);
        Assert.False(blocker.Wait(0));
    }
}
