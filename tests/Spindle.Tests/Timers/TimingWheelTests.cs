using System;
using System.Collections.Generic;
using System.Linq;
using Spindle.Timers;
using Xunit;

namespace Spindle.Tests.Timers;

/// <summary>The timing wheel on its own: placement, cascading, removal, next deadline, against a sorted reference model.</summary>
public sealed class TimingWheelTests
{
    private sealed class Node(int id) : TimerNode
    {
        public int Id { get; } = id;

        public override string ToString() => $"#{Id} due {When}";
    }

    private static List<Node> Advance(TimingWheel wheel, long now)
    {
        var expired = new List<TimerNode>();
        wheel.Advance(now, expired);
        return expired.Cast<Node>().ToList();
    }

    [Fact]
    public void Entries_ExpireAtTheirTick_NotBefore_InDueOrder()
    {
        var wheel = new TimingWheel();
        var nodes = new[] { 5L, 1L, 64L, 63L, 4_095L, 4_096L, 300_000L }.Select((when, i) => (node: new Node(i), when)).ToArray();
        foreach ((Node node, long when) in nodes)
        {
            wheel.Insert(node, when);
        }
        Assert.Equal(nodes.Length, wheel.Count);
        var order = new List<long>();
        foreach (long when in nodes.Select(n => n.when).Order())
        {
            Assert.Empty(Advance(wheel, when - 1)); // nothing early
            List<Node> expired = Advance(wheel, when);
            Assert.Equal(when, Assert.Single(expired).When);
            order.Add(when);
        }
        Assert.Equal(0, wheel.Count);
        Assert.Equal(long.MaxValue, wheel.NextDeadline());
    }

    [Fact]
    public void NextDeadline_IsNeverAfterTheEarliestEntry()
    {
        var wheel = new TimingWheel();
        wheel.Insert(new Node(1), 10_000); // level 2
        long deadline = wheel.NextDeadline();
        Assert.True(deadline <= 10_000, $"deadline {deadline}");
        // Walking deadline to deadline cascades the entry down until it expires exactly on time.
        int steps = 0;
        while (wheel.Count > 0)
        {
            long next = wheel.NextDeadline();
            List<Node> expired = Advance(wheel, next);
            Assert.True(expired.Count == 0 || next == 10_000, $"expired at {next}");
            Assert.True(++steps < 10, "the wheel keeps cascading");
        }
    }

    [Fact]
    public void Remove_TakesAnEntryOut_AndReportsWhetherItWasIn()
    {
        var wheel = new TimingWheel();
        var a = new Node(1);
        var b = new Node(2);
        var c = new Node(3);
        wheel.Insert(a, 100);
        wheel.Insert(b, 100);
        wheel.Insert(c, 100);
        Assert.True(wheel.Remove(b));
        Assert.False(wheel.Remove(b));
        Assert.False(b.IsScheduled);
        Assert.Equal(new[] { 1, 3 }, Advance(wheel, 100).Select(n => n.Id));
        Assert.False(wheel.Remove(a)); // expired entries are out of the wheel
    }

    [Fact]
    public void AnEntryDueInThePast_ExpiresOnTheNextAdvance()
    {
        var wheel = new TimingWheel();
        Advance(wheel, 1_000);
        wheel.Insert(new Node(1), 10);
        Assert.Equal(1_000, wheel.NextDeadline());
        Assert.Single(Advance(wheel, 1_000));
    }

    [Fact]
    public void AnEmptyWheel_CatchesUp_SoNewEntriesArePlacedRelativeToNow()
    {
        var wheel = new TimingWheel();
        wheel.CatchUpIfEmpty(1_000_000);
        Assert.Equal(1_000_000, wheel.Elapsed);
        wheel.Insert(new Node(1), 1_000_005);
        Assert.Equal(1_000_005, wheel.NextDeadline()); // level 0: the exact tick
    }

    [Fact]
    public void CrossingTheTopLevelBoundary_StillExpiresOnTime()
    {
        var wheel = new TimingWheel();
        long boundary = 1L << 36;
        wheel.CatchUpIfEmpty(boundary - 10);
        var node = new Node(1);
        wheel.Insert(node, boundary + 1_000); // differs from elapsed above bit 35: wraps at the top level
        long now = boundary - 10;
        while (wheel.Count > 0)
        {
            long next = wheel.NextDeadline();
            Assert.True(next > now - 1 && next <= boundary + 1_000, $"next deadline {next}");
            List<Node> expired = Advance(wheel, next);
            now = next;
            if (expired.Count > 0)
            {
                Assert.Equal(boundary + 1_000, now);
            }
        }
    }

    [Fact]
    public void TheLongestDueTime_PlacedFromAnUpperBoundOfNow_ExpiresAtItsTick_NotBefore()
    {
        // A pool places a long timer from an upper bound of the present (the coarse clock plus its margin, at most
        // 51 ms) and catches an empty wheel up to a lower bound, so the largest due time Timer accepts, 0xFFFFFFFE ms,
        // lands a few dozen ticks beyond 2^32 ticks after Elapsed.
        var wheel = new TimingWheel();
        wheel.CatchUpIfEmpty(1_000);
        long due = 1_000 + 0xFFFFFFFEL + 52;
        var node = new Node(1);
        wheel.Insert(node, due);
        Assert.Equal(due, node.When);
        Assert.True(wheel.NextDeadline() <= due);
        Assert.Empty(Advance(wheel, due - 1));
        Assert.Same(node, Assert.Single(Advance(wheel, due)));
    }

    [Fact]
    public void ALongDueTime_InsertedWhileElapsedTrails_ExpiresAtItsTick_NotBefore()
    {
        // Elapsed moves only when the wheel is advanced: with an entry an hour away its owner sleeps until then, so an
        // entry inserted ten minutes in is placed relative to a tick ten minutes old. Walking deadline to deadline, as
        // the pool's timer thread does, each entry expires exactly at its own tick.
        var wheel = new TimingWheel();
        var hour = new Node(1);
        wheel.Insert(hour, 3_600_000);
        long due = 600_000 + 0xFFFFFFFEL;
        var longest = new Node(2);
        wheel.Insert(longest, due);
        Assert.Equal(due, longest.When);
        var expiries = new List<(int Id, long At)>();
        int steps = 0;
        while (wheel.Count > 0)
        {
            long next = wheel.NextDeadline();
            foreach (Node node in Advance(wheel, next))
            {
                expiries.Add((node.Id, next));
            }
            Assert.True(++steps < 100, "the wheel keeps cascading");
        }
        Assert.Equal(new[] { (1, 3_600_000L), (2, due) }, expiries);
    }

    [Fact]
    public void RemoveAll_EmptiesTheWheel()
    {
        var wheel = new TimingWheel();
        for (int i = 0; i < 500; i++)
        {
            wheel.Insert(new Node(i), i * 997L);
        }
        var removed = new List<TimerNode>();
        wheel.RemoveAll(removed);
        Assert.Equal(500, removed.Count);
        Assert.Equal(0, wheel.Count);
        Assert.Equal(long.MaxValue, wheel.NextDeadline());
        Assert.All(removed, n => Assert.False(n.IsScheduled));
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void RandomOperations_MatchASortedModel(int seed)
    {
        var random = new Random(seed);
        var wheel = new TimingWheel();
        var model = new Dictionary<Node, long>();
        long now = 0;
        int nextId = 0;
        for (int step = 0; step < 20_000; step++)
        {
            int action = random.Next(10);
            if (action < 5)
            {
                // Delays from sub-level-0 to several levels up.
                long delay = random.Next(4) switch
                {
                    0 => random.Next(64),
                    1 => random.Next(4_096),
                    2 => random.Next(300_000),
                    _ => random.NextInt64(20_000_000),
                };
                var node = new Node(nextId++);
                wheel.Insert(node, now + delay);
                model[node] = now + delay;
            }
            else if (action < 7 && model.Count > 0)
            {
                Node victim = model.Keys.ElementAt(random.Next(model.Count));
                Assert.True(wheel.Remove(victim));
                model.Remove(victim);
            }
            else
            {
                // Advance either to the next deadline or by a random stretch.
                long target = random.Next(2) == 0 && wheel.Count > 0 ? wheel.NextDeadline() : now + random.Next(random.Next(2) == 0 ? 100 : 100_000);
                target = Math.Max(target, now);
                List<Node> expired = Advance(wheel, target);
                var expected = model.Where(kv => kv.Value <= target).Select(kv => kv.Key).ToHashSet();
                Assert.Equal(expected.Count, expired.Count);
                Assert.All(expired, n => Assert.Contains(n, expected));
                for (int i = 1; i < expired.Count; i++)
                {
                    Assert.True(expired[i - 1].When <= expired[i].When, "expired out of due order");
                }
                foreach (Node node in expired)
                {
                    model.Remove(node);
                }
                now = target;
            }
            Assert.Equal(model.Count, wheel.Count);
            if (model.Count > 0)
            {
                Assert.True(wheel.NextDeadline() <= model.Values.Min(), "the next deadline is after an entry's tick");
            }
        }
    }
}
