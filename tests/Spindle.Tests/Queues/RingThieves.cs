using System;
using System.Threading;
using Spindle.Queues;

namespace Spindle.Tests.Queues;

/// <summary>
/// Thieves for the ring's concurrency tests: each takes, at random, one item or half of whatever ring
/// <c>victim</c> returns (half into a ring of its own, which it then pops), hands every item to <c>take</c>, and polls
/// closely while the victim is empty, until <see cref="FinishAndJoin"/> has been called and the victim is empty.
/// </summary>
internal sealed class RingThieves
{
    private readonly TestThread[] _threads;
    private int _taken;
    private volatile bool _ownerDone;

    /// <summary>Starts <paramref name="count"/> thieves and returns once every one is running.</summary>
    public RingThieves(int count, Func<WorkStealingRing> victim, Func<WorkStealingRing> ownRing, Action<WorkItemEntry> take)
    {
        using var ready = new CountdownEvent(count);
        _threads = new TestThread[count];
        for (int t = 0; t < count; t++)
        {
            int seed = t;
            _threads[t] = Waits.Start(() =>
            {
                WorkStealingRing own = ownRing();
                var random = new Random(seed);
                int idle = 0;
                ready.Signal();
                while (true)
                {
                    WorkStealingRing ring = victim();
                    bool took;
                    if (random.Next(2) == 0)
                    {
                        took = ring.TrySteal(out WorkItemEntry stolen);
                        if (took)
                        {
                            take(stolen);
                            Interlocked.Increment(ref _taken);
                        }
                    }
                    else
                    {
                        int taken = ring.StealHalfInto(own, out WorkItemEntry first);
                        took = taken > 0;
                        if (took)
                        {
                            take(first);
                            Interlocked.Add(ref _taken, taken);
                            while (own.TryPop(out WorkItemEntry moved))
                            {
                                take(moved);
                            }
                        }
                    }
                    if (!took)
                    {
                        if (_ownerDone && victim().IsEmpty)
                        {
                            return;
                        }
                        Thread.SpinWait(random.Next(1, 20)); // poll closely: the owner keeps the ring nearly full
                        if (++idle % 4096 == 0)
                        {
                            Thread.Yield();
                        }
                    }
                }
            }, $"thief {t}");
        }
        Waits.For(ready, "the thieves to start");
    }

    /// <summary>Items the thieves took.</summary>
    public int Taken => Volatile.Read(ref _taken);

    /// <summary>The owner has pushed its last item: the thieves stop once the victim is empty.</summary>
    public void FinishAndJoin()
    {
        _ownerDone = true;
        foreach (TestThread thread in _threads)
        {
            thread.Join();
        }
    }
}
