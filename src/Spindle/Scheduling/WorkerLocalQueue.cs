using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>
/// A worker's local queue: the ring, the LIFO slot, the buffer of a global batch, and the age watch of the ring's
/// bottom. Its owner (the worker's thread) pushes and pops; thieves steal through <see cref="TryTakeLifoSlot"/> and the
/// ring's own protocol. Each method says who may call it; the work sources' orders and the scheduler's local enqueue
/// call them on <see cref="Worker.Local"/>.
/// </summary>
internal sealed class WorkerLocalQueue(WorkStealingRing ring, RunningItemRecord record)
{
    /// <summary>Most items a worker takes from the global queue at once (fewer when its items are longer, see <see cref="TryTakeGlobalBatch"/>).</summary>
    internal const int GlobalBatchSize = 32;

    /// <summary>
    /// Most short spins (about 0.3 µs each) a worker waits, before it takes a batch from the global queue, for a
    /// producer it has caught up with to get a whole batch ahead (see <see cref="GlobalQueue.TryDequeueBatch"/>): a
    /// consumer at the producer's heels takes each item just after it was written, and the two threads pass the queue's
    /// cache lines back and forth for every item or two.
    /// </summary>
    /// <remarks>
    /// <para>Measured with outside batches of 1,000 <c>Run</c> items (<c>task-run</c>) on 2 cores, two sets of 30
    /// interleaved runs of each: medians of 5.44M and 5.37M items/s without the wait, 6.28M and 5.73M with it (3 spins
    /// then).</para>
    /// <para>Why 12: the wait gives up at the first spin that sees no new item, so its length only matters while a
    /// producer keeps publishing, and a producer that a consumer has caught up with publishes slowly (it is the one
    /// fetching the lines back): at 100 ns an item, 3 spins let it get about 10 items ahead, not a batch of 32. Counting
    /// the sizes of the takes over one timed <c>task-run</c> (1,000,000 items): with 3 spins two takes in three came out
    /// short (mostly 16-31 items) and the producer spent 104-117 ns per <c>Run</c>; with 12, 85 % were whole (90 % of
    /// the items) and it spent 81-96 ns. Eight interleaved runs of each: medians of 6.63M items/s with 3 and 7.21M with
    /// 12 (7.20M with 40); <c>burst-remote</c>, <c>queue-drain/mixed</c>, <c>socket-echo</c> and <c>http</c> level in
    /// 3-5 pairs each.</para>
    /// </remarks>
    internal const int GlobalTakeGapWaits = 12;

    /// <summary>How long a thief leaves a running owner's lone queued item to its owner: 3 µs.</summary>
    private static readonly long s_stealGraceTicks = Math.Max(1, Stopwatch.Frequency * 3 / 1_000_000);

    /// <summary>The ring: the owner pushes and pops at its top, thieves steal at its bottom (see <see cref="WorkStealingRing"/>).</summary>
    public readonly WorkStealingRing Ring = ring;

    // The LIFO slot (Go's runnext): the newest IWorkItem this worker queued to itself without an ExecutionContext,
    // the item it will most likely run next. Protocol: only the owner stores a non-null value (a release store when the
    // slot is empty, an exchange when it displaces an older item into the ring); the owner and thieves take the value
    // with a CAS to null, so exactly one of them gets it. The value is a whole item (an IWorkItem has no separate
    // state), so a thief whose CAS succeeds after the owner took the object and queued the same object again has simply
    // taken that newer queueing: no ABA hazard. Taking it costs one CAS and no copy, against a fence, index arithmetic
    // and a three-reference copy for the ring.
    private PaddedReference _lifoSlot;

    // What the owner runs (its record): a thief asks it before it takes a lone item (see MayStealFrom).
    private readonly RunningItemRecord _ownerRecord = record;

    // Owner only: the most items a take from the global queue moves (see LimitGlobalTakes).
    private int _globalTakeLimit = GlobalBatchSize;

    // Owner only: the ring's top index at the last fairness look (-1: none yet), and when it was first seen.
    private long _bottomTop = -1;
    private long _bottomSince;

    // Owner only: the ring's bottom index at the last look (-1: none yet), how many looks running found a chain at the
    // ring's top in between, and whether the last look took the ring's oldest item for such a chain.
    private long _lookBottom = -1;
    private int _chainLooks;
    private bool _tookBelowChain;

    /// <summary>Thieves and the scheduler: the LIFO slot's item, if any (a snapshot).</summary>
    public object? PeekLifoSlot() => Volatile.Read(ref _lifoSlot.Value);

    /// <summary>Owner only: whether its LIFO slot holds an item (a plain read of its own field is current).</summary>
    public bool HoldsLifoItem => _lifoSlot.Value is not null;

    /// <summary>Whether the queue holds no item (ring and LIFO slot; a snapshot).</summary>
    public bool IsEmpty => PeekLifoSlot() is null && Ring.IsEmpty;

    /// <summary>Items queued (ring and LIFO slot; a snapshot).</summary>
    public int Count => Ring.Count + (PeekLifoSlot() is null ? 0 : 1);

    /// <summary>Owner or thief: takes the LIFO slot's item.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeLifoSlot(out WorkItemEntry item)
    {
        object? next = Volatile.Read(ref _lifoSlot.Value);
        if (next is not null && Interlocked.CompareExchange(ref _lifoSlot.Value, null, next) == next)
        {
            item = new WorkItemEntry(next, WorkItemEntry.WorkItemMarker, null);
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>
    /// Owner only: takes back the entry (<paramref name="callback"/>, <paramref name="state"/>) if it is still queued as
    /// the newest of its kind: in the LIFO slot (where an entry wrapped as a work item goes, a queue-wait sample for
    /// instance) or at the ring's newest end. A thief that takes it first keeps it (the slot's CAS and the ring's pop
    /// decide). Returns whether it took the entry back.
    /// </summary>
    public bool TryTakeBackNewest(object callback, object state)
    {
        object? held = _lifoSlot.Value; // only the owner stores non-null: a plain read of its own field is current
        if (held is IEntryWrapper && new WorkItemEntry(held, WorkItemEntry.WorkItemMarker, null).Holds(callback, state))
        {
            return Interlocked.CompareExchange(ref _lifoSlot.Value, null, held) == held;
        }
        return Ring.TryPopIfNewest(callback, state);
    }

    /// <summary>
    /// Owner only: queues an <see cref="IWorkItem"/> without ExecutionContext into the LIFO slot, moving the item it
    /// displaces into the ring (or, with the ring full, half of the ring to the global queue). Returns whether the queue
    /// now holds more than the new item (work to share).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool PushToLifoSlot(object workItem, Scheduler scheduler)
    {
        if (_lifoSlot.Value is null)
        {
            // Only the owner stores non-null, so the slot stays empty until the store below.
            Volatile.Write(ref _lifoSlot.Value, workItem);
            return !Ring.IsEmpty;
        }
        object? displaced = Interlocked.Exchange(ref _lifoSlot.Value, workItem);
        if (displaced is not null)
        {
            var entry = new WorkItemEntry(displaced, WorkItemEntry.WorkItemMarker, null);
            if (!Ring.TryPush(entry))
            {
                OverflowToGlobal(entry, scheduler);
            }
        }
        return true;
    }

    /// <summary>Owner only, with its ring full: half of it moves to the global queue, then the item goes in.</summary>
    public void OverflowToGlobal(in WorkItemEntry entry, Scheduler scheduler)
    {
        for (int i = Ring.Capacity / 2; i > 0 && Ring.TrySteal(out WorkItemEntry oldest); i--)
        {
            scheduler.EnqueueOverflow(oldest);
        }
        if (!Ring.TryPush(entry))
        {
            scheduler.EnqueueOverflow(entry);
        }
    }

    /// <summary>
    /// Owner only: takes a batch from the global queue, after giving a producer this worker has caught up with a moment
    /// to get a batch ahead (<see cref="GlobalTakeGapWaits"/>): returns the first, keeps the rest in the ring
    /// (where they can be stolen), copied there straight from the queue's slots (see
    /// <see cref="GlobalQueue.TryDequeueIntoRing"/>). At most <see cref="GlobalBatchSize"/> items, and at most the
    /// worker's count of dispatches between looks (<see cref="LimitGlobalTakes"/>). <paramref name="full"/>: the batch was as large as it
    /// could be and the global queue may hold more (others may take that, and steal the rest of the batch).
    /// </summary>
    /// <remarks>
    /// Why the look count bounds the batch: a batch in the ring waits for its owner alone, while the items queued after it
    /// are taken by the other workers and by this one's looks (which come at every dispatch once items are long), so an
    /// item near the end of a batch of 32 starts after items queued well after it, by up to 32 items of its owner's work
    /// (and by the owner's whole time off a core when it is preempted). Bounded to what the worker runs in about
    /// <see cref="LookPacer.FairnessLookTicks"/>, an item waits in the ring no longer than it would for the next look,
    /// while short items (which the count allows 61 of) still come 32 to a take, so a drain of tiny items keeps its
    /// batches. Measured on 2 cores, 64 loopback connections echoing 1 byte through the pool's socket driver (items of
    /// about 8 µs, takes of 4-10 instead of mostly 32), seven interleaved pairs of runs: round-trip p99 median 1,824 µs
    /// against 2,092 (lower in six), throughput unchanged; 4 KB messages, four pairs: 2,083 against 2,402 µs.
    /// </remarks>
    public bool TryTakeGlobalBatch(WorkSources sources, out WorkItemEntry item, out bool full)
    {
        int room = Ring.Capacity - Ring.Count;
        int want = Math.Min(_globalTakeLimit, room + 1);
        int taken = sources.TakeGlobalIntoRing(Ring, want, GlobalTakeGapWaits, out item);
        // A whole batch says the queue may hold more; a take cut short (by the limit, or the ring's room) asks the queue.
        full = taken == want && (taken == GlobalBatchSize || !sources.GlobalIsEmpty);
        return taken != 0;
    }

    /// <summary>
    /// Owner only, at each look: takes from the global queue move at most <paramref name="dispatchesPerLook"/> items
    /// (and at most <see cref="GlobalBatchSize"/>), the worker's count of dispatches until its next look, so about
    /// <see cref="LookPacer.FairnessLookTicks"/> of its work (see <see cref="TryTakeGlobalBatch"/>).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public void LimitGlobalTakes(int dispatchesPerLook)
    {
        Debug.Assert(dispatchesPerLook >= 1);
        _globalTakeLimit = Math.Clamp(dispatchesPerLook, 1, GlobalBatchSize);
    }

    /// <summary>
    /// Owner only, at a look: whether the last look took the ring's oldest item from below a chain (see
    /// <see cref="TakeAgedBottom"/>). Outside work, when there is some, then has this look; the caller says so with
    /// <see cref="GiveLookOutside"/>.
    /// </summary>
    public bool TookBelowChain => _tookBelowChain;

    /// <summary>Owner only: this look goes outside; the next one may take from below the chain again.</summary>
    public void GiveLookOutside() => _tookBelowChain = false;

    /// <summary>
    /// Owner only, at a look: the ring's oldest item, when it has waited long enough. That is when the worker has run a
    /// chain at the top of its ring for <see cref="LookPacer.ChainLooks"/> looks running, each item popping the one its
    /// predecessor pushed while everything below stays where it is (it then takes the oldest at every look while the chain
    /// lasts), or when nobody has taken from the bottom (its top index has not moved) for
    /// <see cref="LookPacer.OldestLocalAgeMs"/>.
    /// </summary>
    /// <remarks>
    /// <para>A chain: between two looks the ring's bottom index stayed within one place of where it was at the first (the
    /// worker popped what it had just pushed, or ran nothing of its ring). Two async loops handing a turn to each other
    /// through a semaphore do this, each continuation queued to the worker that released it, and so does an item that
    /// queues itself again; whatever waits below them is passed over by every LIFO pop. With the ageing rule alone, the
    /// 250 loops a worker held below such pairs got a turn one per 20 ms, each every few seconds, and which of them ran
    /// depended on how the run began: the comparison program's 1,000-loop handoff read a Jain index of 0.2 in some runs and
    /// 0.99 in others. Taken at every look while the chain lasts, they get a look interval's turn each in queue order.</para>
    /// <para>Work that spreads (an item that queues several, a tree worked through depth-first) moves the bottom by more
    /// than one between looks and is left to its LIFO order: taking the oldest item at every look made a tree's live frontier
    /// breadth-first (see <c>WorkSources.TakeForLook</c>). Its bottom still gets the ageing rule.</para>
    /// </remarks>
    [MethodImpl(RarePath.Compile)]
    public bool TakeAgedBottom(out WorkItemEntry item)
    {
        (long bottom, long lowest, long highest) = Ring.BottomRange;
        bool chain = _lookBottom >= 0 && lowest >= _lookBottom - 1 && highest <= _lookBottom + 1;
        _chainLooks = chain ? _chainLooks + 1 : 0;
        _lookBottom = bottom;
        Ring.ResetBottomRange();
        _tookBelowChain = false;

        long top = Ring.Top;
        long now = Environment.TickCount64;
        if (Ring.IsEmpty)
        {
            // No bottom to age. -1 is an index the ring never has, so the first look that finds items starts their
            // clock: keeping the empty ring's top here made items pushed later look as old as this look.
            _bottomTop = -1;
        }
        else if (_chainLooks >= LookPacer.ChainLooks && bottom - top >= (HoldsLifoItem ? 1 : 2) && Ring.TrySteal(out item))
        {
            // Something waits below the chain's next item (the LIFO slot's, or else the ring's newest): the oldest goes first.
            _tookBelowChain = true;
            _bottomTop = Ring.Top;
            _bottomSince = now;
            return true;
        }
        else if (top != _bottomTop)
        {
            _bottomTop = top;
            _bottomSince = now;
        }
        else if (now - _bottomSince >= LookPacer.OldestLocalAgeMs && Ring.TrySteal(out item))
        {
            _bottomTop = Ring.Top;
            _bottomSince = now;
            return true;
        }
        item = default;
        return false;
    }

    /// <summary>
    /// Thief: whether the owner's queued items may be taken now. An owner that
    /// is running an item and holds exactly one queued item (in its LIFO slot, or alone in its ring) will most likely run
    /// that item next, within nanoseconds in a chain of short items, and a thief taking it would move the chain from core
    /// to core. Such an item is left to its owner until the owner has started nothing for a grace period
    /// (<see cref="s_stealGraceTicks"/>): its current item computes or blocks on, as a parent that forked a child does,
    /// and the child is taken. Surplus items (more than one) and the items of an owner between items may be taken at once.
    /// </summary>
    /// <remarks>
    /// A heuristic over snapshots of the owner's counts and queues: it decides only when a thief tries, never whether
    /// the take is safe (the ring's and the slot's own protocols do that), so a stale read costs at most a later steal.
    /// </remarks>
    public bool MayStealFrom()
    {
        long started = _ownerRecord.StartedCount;
        if (started == _ownerRecord.CompletedCount)
        {
            return true; // between items
        }
        int queued = Count;
        if (queued != 1)
        {
            return queued > 1;
        }
        long deadline = Stopwatch.GetTimestamp() + s_stealGraceTicks;
        while (_ownerRecord.StartedCount == started)
        {
            if (Stopwatch.GetTimestamp() >= deadline)
            {
                return true;
            }
            Thread.SpinWait(8);
        }
        return false; // the owner moved on: it has most likely taken the item itself
    }
}
