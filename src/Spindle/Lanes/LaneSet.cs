using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Threading;

namespace Spindle.Lanes;

/// <summary>
/// The pool's lanes, by priority class, and the rule that picks which one a worker serves next.
/// </summary>
/// <remarks>
/// <para>Dispatch rule. Fired timers come first (the scheduler's urgent queue). Then the highest class with runnable
/// work: High, then Normal (whose members are the Normal lanes and the pool's own queue, the default lane, with share
/// 1), then Low. Within a class, lanes take turns by weighted round robin: the lane under the class's cursor keeps it
/// for <c>share</c> dispatches while it has runnable work, then the cursor moves to the next runnable lane. A lane at
/// its cap is skipped (its items hold no worker).</para>
/// <para>Minimum share of lower classes (no starvation): each class records when it last started an item. When the
/// Normal or Low class has runnable work that has not been served for <see cref="StarvationIntervalMs"/>, the next
/// dispatch of any worker serves it first (a class's wait starts when its first lane gets work or at its last dispatch,
/// whichever is later). So while higher classes keep every worker busy, a lower class with runnable
/// work still starts an item at least every <see cref="StarvationIntervalMs"/> (plus the length of the items in
/// progress). The clock is <see cref="LaneClock"/>: a millisecond tick (Environment.TickCount64 steps every 4 ms on
/// Linux) would have stretched the bound by most of a tick.</para>
/// <para>State and its writers: the class arrays (copy-on-write, under <see cref="_lock"/>, read lock-free);
/// <see cref="LaneClass.Ready"/> and <see cref="_anyReady"/> (atomics, by the thread that moved a lane's queued count
/// between 0 and 1); the round-robin cursor, its credit and the last-served times (plain racy stores by dispatching
/// workers: a lost update only shifts a turn by an item, never loses work, because every runnable lane is visited on
/// each pick); <see cref="_closed"/> (under the lock, by the pool's shutdown).</para>
/// <para>The fast path of a pool without runnable lane work is one load of <see cref="_anyReady"/>, a line that is
/// written only when a lane's queue goes from empty to non-empty or back.</para>
/// </remarks>
internal sealed partial class LaneSet
{
    public const int HighClass = 0;
    public const int NormalClass = 1;
    public const int LowClass = 2;

    /// <summary>The longest a lower class with runnable work goes without a dispatch while higher classes keep the workers busy.</summary>
    public const int StarvationIntervalMs = 10;

    private readonly LaneClass[] _classes = [new(), new(), new()];
    private readonly object _lock = new();
    private readonly ILaneHost _host;
    private PaddedInt32 _anyReady;
    private Lane[] _all = [];
    private bool _closed;

    public LaneSet(ILaneHost host, int? starvationIntervalMs)
    {
        _host = host;
        // Served once the class has waited the interval less the longest a turn of a higher class takes to end after
        // it sees the lower work (LaneClock.TurnYield, checked after each item), so that the start comes within the
        // interval plus the length of the items in progress, as documented.
        long interval = LaneClock.FromMilliseconds(starvationIntervalMs ?? StarvationIntervalMs);
        _starvationInterval = Math.Max(interval - LaneClock.TurnYield, interval / 2);
    }

    // In LaneClock ticks.
    private readonly long _starvationInterval;

    /// <summary>Whether some lane may have queued work (a hint: one load on the dispatch path).</summary>
    public bool AnyReady
    {
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        get => Volatile.Read(ref _anyReady.Value) != 0;
    }

    /// <summary>The lanes in the set (a snapshot): every lane that has not stopped, and, after the pool's stop, the lanes it stopped (the sweep's).</summary>
    public Lane[] All => Volatile.Read(ref _all);

    /// <summary>Adds a lane; false when the pool's shutdown has begun (no lane is created then).</summary>
    public bool TryAdd(Lane lane)
    {
        lock (_lock)
        {
            if (_closed)
            {
                return false;
            }
            LaneClass laneClass = _classes[lane.ClassIndex];
            Volatile.Write(ref laneClass.Lanes, [.. laneClass.Lanes, lane]);
            Volatile.Write(ref _all, [.. _all, lane]);
            return true;
        }
    }

    /// <summary>A lane has stopped: it leaves the dispatch rotation (its continuations now go to the pool's queue).</summary>
    public void Remove(Lane lane)
    {
        lock (_lock)
        {
            LaneClass laneClass = _classes[lane.ClassIndex];
            Volatile.Write(ref laneClass.Lanes, Array.FindAll(laneClass.Lanes, l => l != lane));
            Volatile.Write(ref _all, Array.FindAll(_all, l => l != lane));
        }
    }

    public void OnLaneReady(Lane lane)
    {
        LaneClass laneClass = _classes[lane.ClassIndex];
        if (Interlocked.Increment(ref laneClass.Ready) == 1)
        {
            // The class had nothing waiting: its wait starts now, not at its last dispatch long ago.
            laneClass.LastServed = LaneClock.Now;
        }
        Interlocked.Increment(ref _anyReady.Value);
    }

    public void OnLaneIdle(Lane lane)
    {
        Interlocked.Decrement(ref _classes[lane.ClassIndex].Ready);
        Interlocked.Decrement(ref _anyReady.Value);
    }

    /// <summary>
    /// A lane item was published and a slot is free: wake a worker if nobody is looking, and if nobody is free to, let
    /// the relief thread know (a lane's items, like the pool's queue's, are seen by busy workers only between items).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void WakeForLane() => _host.WakeWorkerForOutsideWork();

    /// <summary>A refused producer left a lane marked ready during a shutdown: wake a worker to pass it (never the relief).</summary>
    public void WakeForLeftover() => _host.WakeWorkerIfNeeded();

    /// <summary>
    /// A worker ended its turn in a lane that was at its cap and still has work: a slot is free and no
    /// enqueue will wake anyone for it (they found the lane at its cap). The worker leaves the lane to serve something
    /// else (a timer, a higher or competing lane, the pool's own work, a lower class's minimum share), and that may
    /// block; so if someone is parked (and nobody searches: the wake's own rule), a parked worker is woken for the lane
    /// now. (A deferral on this worker was not enough: the stall monitor settles a deferral as soon as the worker's local
    /// queues are empty or it completes an item, while the lane's work can wait behind whatever the worker takes next.)
    /// Only a parked worker: with none parked, a thread is not created for work this worker may well come back to.
    /// </summary>
    public void OnSlotFreedWithWork()
    {
        if (_host.AnyWorkerParked)
        {
            _host.WakeWorkerIfNeeded();
        }
        else
        {
            // Nobody to wake, and no enqueue told the relief thread of this work (it found the lane at its cap).
            _host.OnWorkUnattended();
        }
    }

    /// <summary>Whether a worker could start a lane item now (runnable work in some lane; a snapshot).</summary>
    public bool AnyRunnable()
    {
        if (!AnyReady)
        {
            return false;
        }
        foreach (Lane lane in All)
        {
            if (lane.HasRunnableWork)
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>
    /// Whether work of a class below <paramref name="lane"/>'s waits: a ready lane, or, below a High lane, the pool's own
    /// work as <paramref name="self"/> sees it. A turn ends once that has been so for a millisecond (checked after each
    /// item), so that the minimum share holds.
    /// </summary>
    public bool IsLowerWorkWaiting<TTaker>(Lane lane, TTaker self)
        where TTaker : struct, ILaneTaker
    {
        for (int c = lane.ClassIndex + 1; c <= LowClass; c++)
        {
            if (Volatile.Read(ref _classes[c].Ready) != 0)
            {
                return true;
            }
        }
        return lane.ClassIndex == HighClass && !self.SeesNoPoolWork;
    }

    /// <summary>
    /// Whether the slot holder of <paramref name="lane"/> may run the lane's next item in its turn: no other lane of its
    /// class or of a higher class is ready, and, for a Normal or Low lane, <paramref name="self"/> sees none of the
    /// pool's own work (its local queues and the global queue; other workers' rings are theirs to run).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool IsAloneInTurn<TTaker>(Lane lane, TTaker self)
        where TTaker : struct, ILaneTaker
    {
        int classIndex = lane.ClassIndex;
        LaneClass[] classes = _classes;
        if (Volatile.Read(ref classes[classIndex].Ready) > 1)
        {
            return false;
        }
        for (int c = HighClass; c < classIndex; c++)
        {
            if (Volatile.Read(ref classes[c].Ready) != 0)
            {
                return false;
            }
        }
        return classIndex == HighClass || self.SeesNoPoolWork;
    }

    /// <summary>Items queued in lanes (a snapshot).</summary>
    public long QueuedCount
    {
        get
        {
            long queued = 0;
            foreach (Lane lane in All)
            {
                queued += lane.QueuedCount;
            }
            return queued;
        }
    }

    /// <summary>
    /// The dispatch path when some lane may have work: takes the next item by the dispatch rule (see the remarks),
    /// the pool's own queue included as the Normal class's default lane. Sets <see cref="Worker.CurrentLane"/> when the
    /// item came from a lane.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public bool TryTakeByPriority<TTaker>(TTaker self, out WorkItemEntry item)
        where TTaker : struct, ILaneTaker
    {
        long now = LaneClock.Now;
        LaneClass low = _classes[LowClass];
        LaneClass normal = _classes[NormalClass];
        // Minimum share first: the lowest class whose runnable work has waited past the interval.
        // A class found with nothing runnable counts as served: it has nothing waiting.
        if (Volatile.Read(ref low.Ready) != 0 && now - low.LastServed >= _starvationInterval)
        {
            low.LastServed = now;
            if (TryTakeInClass(low, self, withDefault: false, out item))
            {
                return true;
            }
        }
        if (now - normal.LastServed >= _starvationInterval)
        {
            normal.LastServed = now;
            if (TryTakeInClass(normal, self, withDefault: true, out item))
            {
                return true;
            }
        }
        LaneClass high = _classes[HighClass];
        if (Volatile.Read(ref high.Ready) != 0 && TryTakeInClass(high, self, withDefault: false, out item))
        {
            return true;
        }
        if (TryTakeInClass(normal, self, withDefault: true, out item))
        {
            normal.LastServed = now;
            return true;
        }
        if (Volatile.Read(ref low.Ready) != 0 && TryTakeInClass(low, self, withDefault: false, out item))
        {
            low.LastServed = now;
            return true;
        }
        return false;
    }

    /// <summary>
    /// A searching worker's look at the lanes of the classes from <paramref name="firstClass"/> to
    /// <paramref name="lastClass"/> (the default lane is searched by the caller, between Normal and Low).
    /// </summary>
    public bool TryTakeForSearcher<TTaker>(TTaker self, int firstClass, int lastClass, out WorkItemEntry item)
        where TTaker : struct, ILaneTaker
    {
        for (int c = firstClass; c <= lastClass; c++)
        {
            LaneClass laneClass = _classes[c];
            if (Volatile.Read(ref laneClass.Ready) != 0 && TryTakeInClass(laneClass, self, withDefault: false, out item))
            {
                laneClass.LastServed = LaneClock.Now;
                return true;
            }
        }
        item = default;
        return false;
    }

    /// <summary>Weighted round robin over the runnable members of one class (see the remarks).</summary>
    private static bool TryTakeInClass<TTaker>(LaneClass laneClass, TTaker self, bool withDefault, out WorkItemEntry item)
        where TTaker : struct, ILaneTaker
    {
        Lane[] lanes = Volatile.Read(ref laneClass.Lanes);
        int members = lanes.Length + (withDefault ? 1 : 0);
        if (members == 0)
        {
            item = default;
            return false;
        }
        int cursor = laneClass.Cursor;
        if ((uint)cursor >= (uint)members)
        {
            cursor = 0;
        }
        // The member under the cursor while its turn lasts.
        int credit = laneClass.Credit;
        if (credit > 0 && TryTakeFrom(lanes, cursor, self, out item))
        {
            laneClass.Credit = credit - 1;
            return true;
        }
        // Its turn is over (or it has nothing runnable): the next runnable member starts a turn. The last candidate is
        // the member under the cursor again, with a new turn.
        for (int i = 1; i <= members; i++)
        {
            int index = cursor + i;
            if (index >= members)
            {
                index -= members;
            }
            if (TryTakeFrom(lanes, index, self, out item))
            {
                laneClass.Cursor = index;
                laneClass.Credit = (index < lanes.Length ? lanes[index].Share : 1) - 1;
                return true;
            }
        }
        item = default;
        return false;
    }

    /// <summary>Takes from member <paramref name="index"/> of a class: a lane, or (one past the lanes) the default lane.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static bool TryTakeFrom<TTaker>(Lane[] lanes, int index, TTaker self, out WorkItemEntry item)
        where TTaker : struct, ILaneTaker
    {
        if (index < lanes.Length)
        {
            Lane lane = lanes[index];
            if (lane.IsRunnable && lane.TryTake(out item))
            {
                self.EnterLane(lane);
                return true;
            }
            item = default;
            return false;
        }
        return self.TryTakeDefault(out item);
    }

    /// <summary>
    /// The relief thread's take (see <see cref="Threading.OutsideRelief"/>): an item of the first runnable lane of the
    /// classes from <paramref name="firstClass"/> to <paramref name="lastClass"/>, looked at from each class's cursor on,
    /// with a slot of the lane (so its cap holds). The workers' turns and credits are left as they are: the relief takes
    /// an item now and then, and only while no worker is free. Lanes that take long-running items are skipped: such an
    /// item would hold the relief thread for its whole length (a worker runs it inside a blocking region, for which the
    /// pool adds a thread; the relief thread cannot be replaced).
    /// </summary>
    public bool TryTakeForRelief(int firstClass, int lastClass, out WorkItemEntry item, out Lane? lane)
    {
        for (int c = firstClass; c <= lastClass; c++)
        {
            LaneClass laneClass = _classes[c];
            if (Volatile.Read(ref laneClass.Ready) == 0)
            {
                continue;
            }
            Lane[] lanes = Volatile.Read(ref laneClass.Lanes);
            int start = laneClass.Cursor;
            if ((uint)start >= (uint)lanes.Length)
            {
                start = 0; // the Normal class's cursor on its default lane, or a class that lost lanes
            }
            for (int i = 0; i < lanes.Length; i++)
            {
                int index = start + i;
                if (index >= lanes.Length)
                {
                    index -= lanes.Length;
                }
                Lane candidate = lanes[index];
                if (!candidate.TakesLongRunningItems && candidate.IsRunnable && candidate.TryTake(out item))
                {
                    laneClass.LastServed = LaneClock.Now;
                    lane = candidate;
                    return true;
                }
            }
        }
        item = default;
        lane = null;
        return false;
    }

    /// <summary>
    /// The sum of the lanes' head tokens (<see cref="Lane.HeadToken"/>): it changes whenever anyone takes a lane's item
    /// (the relief thread's measure of whether the workers are serving the lanes), except by a hash collision, which
    /// only makes the relief run one item it could have left to a worker. Lanes added or removed meanwhile change it too,
    /// which only makes the relief wait one more delay.
    /// </summary>
    public long TakenMark
    {
        get
        {
            long mark = 0;
            foreach (Lane lane in All)
            {
                mark += lane.HeadToken;
            }
            return mark;
        }
    }

    /// <summary>One priority class: its lanes and its dispatch state. Each class is its own object, on its own lines.</summary>
    private sealed class LaneClass
    {
        public Lane[] Lanes = [];
        // Lanes of the class with queued items (atomics; may be off by one for an instant, see Lane).
        public int Ready;
        // Round robin (plain, racy by design): the member whose turn it is and the dispatches left in its turn.
        public int Cursor;
        public int Credit;
        // LaneClock.Now of the last dispatch in this class (plain, racy by design).
        public long LastServed = LaneClock.Now;
    }
}
