using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>
/// The pool's work sources, listed once, and the orders in which each kind of thread takes from them: the whole
/// dispatch policy. Every question about queued work (is there any, how much, what is left, what does the debugger see,
/// what does a cancelling shutdown drop) is one visit over the same list (<c>WorkSources.Visit.cs</c>).
/// </summary>
/// <remarks>
/// <para>The sources, in the order a worker looks at them:</para>
/// <list type="number">
/// <item><b>urgent</b>: fired timers (<see cref="UrgentQueue"/>), ahead of everything within a streak;</item>
/// <item><b>lanes</b> by class, High, Normal, Low (<see cref="LaneSet"/>), the pool's own queue being the Normal class's
/// default member: the lane set's rule decides between them, with a minimum share for each class;</item>
/// <item><b>the pool's own queue</b>, which is this worker's LIFO slot, then its ring (newest first), then the global
/// queue (<see cref="GlobalQueue"/>, oldest first, in batches);</item>
/// <item><b>peers</b>: other workers' rings and LIFO slots, as a thief.</item>
/// </list>
/// <para>The orders (each a few lines below):</para>
/// <list type="bullet">
/// <item><b>worker</b> (<see cref="TakeForWorker"/>): urgent, lanes, the pool's queue (<see cref="TakePoolQueue"/>): a
/// timed look outside when due, then LIFO slot, ring, a stalled watched peer, global batch;</item>
/// <item><b>look</b> (<see cref="TakeForLook"/>), the fairness part of the worker's order: a stranded peer (when the
/// stall monitor asked), the aged bottom of its own ring, then one global item (or a batch, with nothing local);</item>
/// <item><b>searcher</b> (<see cref="TakeForSearcher"/>): its own slot and ring once after a wake, urgent, High and
/// Normal lanes, global batch, peers, Low lanes;</item>
/// <item><b>lane turn</b> (<see cref="TakeNextInTurn"/>, <c>WorkSources.Turns.cs</c>): the same lane's next item while
/// nothing else competes for the worker;</item>
/// <item><b>relief</b> (<see cref="TakeForRelief"/>): High lanes, one global item, Normal and Low lanes (never a
/// worker's local queue: the relief thread runs outside work that waits for a free worker);</item>
/// <item><b>drain</b> (<see cref="TakeLeftovers"/>, after the workers): urgent, global, then the lanes' leftovers;</item>
/// <item><b>cancel</b> (<see cref="CancelQueued"/>): the global queue, the lanes, every worker's ring and slot, as a thief.</item>
/// </list>
/// <para>Every source is its own owner: this type holds references and takes through each source's own protocol (the
/// ring's and the slot's for a worker's queues). What a worker decides for itself (its look interval, its peer watch,
/// its timer streak) stays in the worker and is asked through its methods.</para>
/// </remarks>
internal sealed partial class WorkSources
{
    private readonly GlobalQueue _global;

    // Set once by Connect, before any thread of the pool exists.
    private WorkerRoster _roster = null!;
    private IdleCoordinator _idle = null!;

    public WorkSources(GlobalQueue global, UrgentQueue urgent, LaneSet lanes)
    {
        _global = global;
        Urgent = urgent;
        Lanes = lanes;
    }

    /// <summary>Fired timers, looked at before any other queue.</summary>
    public UrgentQueue Urgent { get; }

    /// <summary>The pool's lanes besides its own queue, and the rule between them.</summary>
    public LaneSet Lanes { get; }

    /// <summary>
    /// The pool's workers, whose local queues are sources too, and the idle coordinator, which a worker's take of a
    /// full batch asks to wake a searcher (set once, before any worker exists).
    /// </summary>
    public void Connect(WorkerRoster roster, IdleCoordinator idle)
    {
        _roster = roster;
        _idle = idle;
    }

    /// <summary>The worker's order: urgent, then lanes by their rule (the pool's queue among them), else the pool's queue.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TakeForWorker(Worker self, out WorkItemEntry item)
    {
        if (Urgent.MayBeWaiting && TakeWhileTimersWait(self, out item))
        {
            return true;
        }
        return TakeOrdinary(self, out item);
    }

    /// <summary>The worker's order without urgent work: lanes by their rule when any is ready, else the pool's queue.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TakeOrdinary(Worker self, out WorkItemEntry item) =>
        Lanes.AnyReady ? Lanes.TryTakeByPriority(new LaneTaker(self), out item) : TakePoolQueue(self, out item);

    /// <summary>
    /// The pool's own queue for its owner (the Normal class's default lane): a look outside when the worker's pacer
    /// says one is due, then its LIFO slot, its ring, a watched peer found stalled, a batch of the global queue.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TakePoolQueue(Worker self, out WorkItemEntry item)
    {
        if (self.DispatchLooksOutside() && TakeForLook(self, out item))
        {
            return true;
        }
        WorkerLocalQueue local = self.Local;
        return local.TryTakeLifoSlot(out item)
            || local.Ring.TryPop(out item)
            || TakeFromWatchedPeer(self, out item)
            || TakeGlobalBatch(self, out item);
    }

    /// <summary>
    /// While fired timers may be waiting: the next timer callback, or, when this worker's run of them has lasted its
    /// turn (see <see cref="TimerPacer.UrgentGoesFirst"/>), an ordinary item first if there is one. False when neither was
    /// there (the caller goes on to its ordinary queues, which may have filled since).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TakeWhileTimersWait(Worker self, out WorkItemEntry item)
    {
        if (!self.UrgentGoesFirst() && TakeOrdinary(self, out item))
        {
            self.NoteTurn(timerCallback: false);
            return true;
        }
        if (Urgent.TryTake(out item))
        {
            self.NoteTurn(timerCallback: true);
            return true;
        }
        return false;
    }

    /// <summary>
    /// A look outside the worker's own queues, when its pacer or the stall monitor says one is due (see
    /// <see cref="Worker.TryBeginLook"/>): a stranded peer's item first when the monitor asked (it has waited longest),
    /// then the aged bottom of the worker's ring, then outside work: one global item while local work waits (a batch's
    /// rest would wait behind the local chain), a batch when there is none.
    /// </summary>
    /// <remarks>
    /// <para>The interval is timed, not counted, so the wait of outside work is bounded in time whatever the local items'
    /// length: one clock read per look, and the next interval is the number of items that took about
    /// <see cref="LookPacer.FairnessLookTicks"/> in the last one (it shrinks at once, and grows at most fourfold per look, so
    /// items that turn long are noticed soon). Items of 20 µs get a look every 5 items, items of 1 ms after each item,
    /// trivial items every <see cref="LookPacer.FairnessInterval"/>.</para>
    /// <para>While the LIFO slot holds this worker's next item, or its ring holds items, the look takes one outside item,
    /// not a batch. A batch's rest would go into the ring, which the owner reaches only when the slot is empty, and a
    /// chain that re-queues itself through the slot never leaves it empty, so those items would wait for the ageing rule
    /// below, one per <see cref="LookPacer.OldestLocalAgeMs"/>, while the rest of the outside queue grew behind them. And a batch
    /// pushed onto a ring that still holds the previous batch's rest is popped first (the owner pops the newest), so
    /// under a steady inflow from outside (socket completions) the older items sank to the ring's far end and waited
    /// there for as long as the inflow lasted: round trips of 20-100 ms among 1-2 ms ones. Left in the global queue,
    /// they go to whichever worker looks next, in queue order.</para>
    /// <para>The ring's bottom is taken only once nobody has taken from it (its top index has not moved) for
    /// <see cref="LookPacer.OldestLocalAgeMs"/>, so a self-requeue loop cannot starve it; it comes before outside work, which under
    /// a steady inflow is never missing, so checked after it the aged item waited for the inflow to stop. Not on every
    /// look: taking the oldest item of a tree-shaped workload (tasks spawning tasks) opens a whole new subtree, and done
    /// every 61 items it made skynet's live frontier breadth-first, turning its gen0 collections into gen2 ones. Except
    /// below a chain at the ring's top (each item popping the one its predecessor pushed), which passes over the items
    /// below it for good: after <see cref="LookPacer.ChainLooks"/> looks of it, they go one per look, oldest first, taking
    /// turns with outside work while there is some (see <see cref="WorkerLocalQueue.TakeAgedBottom"/>).</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining | RarePath.Compile)]
    private bool TakeForLook(Worker self, out WorkItemEntry item)
    {
        if (!self.TryBeginLook(out bool requested))
        {
            item = default;
            return false;
        }
        if (requested && TakeFromStranded(self, out item))
        {
            return true;
        }
        WorkerLocalQueue local = self.Local;
        if (local.TookBelowChain && !_global.IsEmpty)
        {
            local.GiveLookOutside(); // items below a chain take every other look while outside work waits
        }
        else if (local.TakeAgedBottom(out item))
        {
            return true;
        }
        return local.IsEmpty ? TakeGlobalBatch(self, out item) : TakeOneGlobal(self, out item);
    }

    /// <summary>
    /// A searching worker's order: its own LIFO slot and ring when <paramref name="ownFirst"/> (a worker woken as a
    /// searcher skipped them), urgent, the High and Normal lanes, a global batch, the other workers' rings and LIFO slots
    /// (from a random victim), then the Low lanes.
    /// </summary>
    public bool TakeForSearcher(Worker self, bool ownFirst, out WorkItemEntry item)
    {
        if (ownFirst && (self.Local.TryTakeLifoSlot(out item) || self.Local.Ring.TryPop(out item)))
        {
            return true;
        }
        if (Urgent.MayBeWaiting && Urgent.TryTake(out item))
        {
            self.NoteTurn(timerCallback: true);
            return true;
        }
        bool lanesReady = Lanes.AnyReady;
        return (lanesReady && Lanes.TryTakeForSearcher(new LaneTaker(self), LaneSet.HighClass, LaneSet.NormalClass, out item))
            || TakeGlobalBatch(self, out item)
            || StealFromPeers(self, out item)
            || (lanesReady && Lanes.TryTakeForSearcher(new LaneTaker(self), LaneSet.LowClass, LaneSet.LowClass, out item));
    }

    /// <summary>
    /// The relief thread's order: a High lane's item, then the oldest of the global queue (one item, in
    /// <paramref name="one"/>), then a Normal or Low lane's; <paramref name="lane"/> is the lane it came from (null for
    /// the pool's queue), whose slot the caller now holds.
    /// </summary>
    public bool TakeForRelief(Span<WorkItemEntry> one, out WorkItemEntry item, out Lane? lane)
    {
        bool lanesReady = Lanes.AnyReady;
        if (lanesReady && Lanes.TryTakeForRelief(LaneSet.HighClass, LaneSet.HighClass, out item, out lane))
        {
            return true;
        }
        if (_global.TryDequeueBatch(one.Slice(0, 1)) != 0)
        {
            item = one[0];
            one[0] = default;
            lane = null;
            return true;
        }
        if (lanesReady)
        {
            return Lanes.TryTakeForRelief(LaneSet.NormalClass, LaneSet.LowClass, out item, out lane);
        }
        item = default;
        lane = null;
        return false;
    }

    /// <summary>
    /// The drain's order, once no worker is left to take: a batch of fired timers, else of the global queue, into
    /// <paramref name="batch"/>; when both are empty, one lane's leftover (<paramref name="lane"/> set, taken through the
    /// lane's cap). Returns how many entries <paramref name="batch"/> holds (0 with or without a lane item).
    /// </summary>
    public int TakeLeftovers(Span<WorkItemEntry> batch, out WorkItemEntry laneItem, out Lane? lane)
    {
        int taken = 0;
        while (taken < batch.Length && Urgent.TryTake(out batch[taken]))
        {
            taken++;
        }
        if (taken == 0)
        {
            taken = _global.TryDequeueBatch(batch);
        }
        if (taken != 0 || !Lanes.TryTakeLeftover(out laneItem, out lane))
        {
            laneItem = default;
            lane = null;
        }
        return taken;
    }

    /// <summary>
    /// Takes up to <paramref name="max"/> items from the global queue, oldest first: the oldest into
    /// <paramref name="first"/>, the rest into <paramref name="ring"/> (see <see cref="GlobalQueue.TryDequeueIntoRing"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public int TakeGlobalIntoRing(WorkStealingRing ring, int max, int gapWaits, out WorkItemEntry first) =>
        _global.TryDequeueIntoRing(ring, max, gapWaits, out first);

    /// <summary>Whether the global queue holds no item (a snapshot).</summary>
    public bool GlobalIsEmpty => _global.IsEmpty;

    /// <summary>
    /// A look the stall monitor asked for: one item another worker queued to itself before it blocked or began a long
    /// item (see <see cref="WorkerRequests.Stranded"/>): its LIFO slot first (the item it queued last, typically the one it
    /// waits for), else the oldest of its ring. One item, run now: the looking worker is busy with work of its own, and
    /// more items pushed into its ring would wait there behind its own chain; the monitor asks again at its next tick
    /// while the victim stays stranded.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool TakeFromStranded(Worker self, out WorkItemEntry item)
    {
        foreach (Worker victim in _roster.Workers)
        {
            if (victim == self || !victim.Requests.Stranded || victim.Local.IsEmpty || !victim.Local.MayStealFrom())
            {
                continue;
            }
            if (victim.Local.TryTakeLifoSlot(out item) || (!victim.Local.Ring.IsEmpty && victim.Local.Ring.TrySteal(out item)))
            {
                self.Counts.CountSteal();
                return true;
            }
        }
        item = default;
        return false;
    }

    /// <summary>A searcher's steal: half of a peer's ring (or its LIFO slot), starting at a random victim.</summary>
    private bool StealFromPeers(Worker self, out WorkItemEntry item)
    {
        Worker[] workers = _roster.Workers;
        int count = workers.Length;
        if (count > 1)
        {
            int start = (int)((uint)self.Backoff.SpinCount(Backoff.MaxExponent) % (uint)count);
            for (int i = 0; i < count; i++)
            {
                Worker victim = workers[(start + i) % count];
                if (victim == self || victim.Local.IsEmpty || !victim.Local.MayStealFrom())
                {
                    continue;
                }
                if ((!victim.Local.Ring.IsEmpty && victim.Local.Ring.StealHalfInto(self.Local.Ring, out item) > 0) || victim.Local.TryTakeLifoSlot(out item))
                {
                    self.Counts.CountSteal();
                    return true;
                }
            }
        }
        item = default;
        return false;
    }

    /// <summary>
    /// The owner, with its own queues empty, before it takes from the global queue: counts the take down its watch of a
    /// peer, and at the watch's end takes half of the peer's ring if the peer has stalled with items in it (see
    /// <see cref="PeerWatch"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TakeFromWatchedPeer(Worker self, out WorkItemEntry item)
    {
        if (self.PeerWatch.CountTake())
        {
            return EndPeerWatch(self, out item);
        }
        item = default;
        return false;
    }

    [MethodImpl(MethodImplOptions.NoInlining | RarePath.Compile)]
    private bool EndPeerWatch(Worker self, out WorkItemEntry item)
    {
        if (self.PeerWatch.TryEnd(self, _roster.Workers, self.Local.Ring, out item))
        {
            self.Counts.CountPeerWatchSteal();
            WakeParkedForRestInRing(self);
            return true;
        }
        return false;
    }

    /// <summary>The owner: a batch of the global queue into its ring (see <see cref="WorkerLocalQueue.TryTakeGlobalBatch"/>).</summary>
    private bool TakeGlobalBatch(Worker self, out WorkItemEntry item)
    {
        if (!self.Local.TryTakeGlobalBatch(this, out item, out bool full))
        {
            return false;
        }
        // Outside work reached the worker by another path (its search, or its own queues running dry): a requested look
        // is met. Kept, it would send the next dispatch outside again, ahead of the worker's local items.
        self.Requests.ClearLookOutside();
        if (full)
        {
            // A full batch: the global queue may hold more, and others can steal the rest of this batch.
            _idle.WakeWorkerIfNeeded();
        }
        else
        {
            WakeParkedForRestInRing(self);
        }
        return true;
    }

    /// <summary>
    /// The owner, after a partial batch or a peer-watch steal moved items into its ring (which was empty: every caller
    /// takes only once its own queues are): if any wait there and a worker is parked, wakes it, as a local push does
    /// (nothing happens while one searches; no thread is added).
    /// </summary>
    /// <remarks>
    /// The rest is this worker's next work, but its first item may block on it. The stall monitor sleeps while a worker
    /// is parked, on the premise that everything that reaches a queue then wakes one; without this wake, the rest of a
    /// batch taken while the last searcher was parking (still in this worker's hands, invisible to the searcher's final
    /// look) waited for the first item, for ever if it blocked on them (a channel consumer queued with its producer:
    /// the comparison program's ping-pong/channel hung about once in 150 runs on 2 cores). Against a worker parking
    /// meanwhile, the local push's protocol: the ring push is unfenced, and a worker that parks while another is awake
    /// looks once more after a bounded first sleep, by when the push is visible (see IdleCoordinator).
    /// </remarks>
    private void WakeParkedForRestInRing(Worker self)
    {
        if (_idle.IdleCount != 0 && !self.Local.Ring.IsEmpty)
        {
            _idle.WakeWorkerIfNeeded();
        }
    }

    /// <summary>
    /// The owner, at a look while local work waits: one item of the global queue, no batch (noted by its look pacer),
    /// taken straight into <paramref name="item"/> (see <see cref="GlobalQueue.TryDequeueIntoRing"/> on copies).
    /// </summary>
    private bool TakeOneGlobal(Worker self, out WorkItemEntry item)
    {
        item = default;
        if (_global.TryDequeueBatch(MemoryMarshal.CreateSpan(ref item, 1)) != 0)
        {
            self.NoteTookOutside();
            return true;
        }
        return false;
    }
}
