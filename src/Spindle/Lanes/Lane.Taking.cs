using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Queues;

namespace Spindle.Lanes;

// The slot holders' side of a lane: taking a slot and items, the turn, and the room a dequeue gives back. The cap
// protocol is in the class remarks (Lane.cs); the handshake with a serial lane's cancel sweep is in Lane.Shutdown.cs.
internal sealed partial class Lane
{
    /// <summary>An item has left the queue (to run, to be cancelled, or as a leftover): give back its room.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void OnDequeued()
    {
        if (_room is not null)
        {
            ReleaseRoom();
        }
    }

    /// <summary>Gives back the room of a dequeued item, unless it is owed to a continuation admitted past the bound.</summary>
    private void ReleaseRoom()
    {
        int over = Volatile.Read(ref _overBound);
        while (over > 0)
        {
            int seen = Interlocked.CompareExchange(ref _overBound, over - 1, over);
            if (seen == over)
            {
                return;
            }
            over = seen;
        }
        _room!.Release();
    }

    /// <summary>
    /// Takes a slot and the oldest item: false, having taken neither, when the lane is at its cap or its queue is empty.
    /// The caller runs the item and then calls <see cref="OnTurnDone"/>.
    /// </summary>
    public bool TryTake(out WorkItemEntry item)
    {
        if (!TryAcquireSlot())
        {
            item = default;
            return false;
        }
        item = default;
        if (_stopped)
        {
            // A worker with an old snapshot of the lane set: a stopped lane's entries are the after-stop drive's. The
            // stop needs every slot free, so a slot held here means the stop came first and is visible.
            GiveBackAfterStopSlot();
            return false;
        }
        if (!TryDequeueAsHolder(out item))
        {
            // The slot was held for an instant only, but a shutdown's stop check may have seen it held and left the
            // stop to whoever gives the last slot back: that is this thread now, as in OnTurnDone (the decrement is a
            // full fence before the read of the state; BeginShutdown writes the state before its own check reads the
            // count, so at least one of the two sees the other and stops the lane). Entries a serial lane's cancel
            // sweep keeps this thread from taking stay queued: MarkIdle finds them and leaves the lane ready.
            int running = Interlocked.Decrement(ref _running.Value);
            MarkIdle();
            if (running == 0 && _state != StateRunning)
            {
                TryStop();
            }
            return false;
        }
        OnDequeued();
        return true;
    }

    /// <summary>The slot holder's next item in its turn (it keeps the slot); false when the queue is empty.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeNextInTurn(out WorkItemEntry item)
    {
        if (!TryDequeueAsHolder(out item))
        {
            return false;
        }
        OnDequeued();
        return true;
    }

    /// <summary>
    /// The slot holder's dequeue. A serial lane's holder announces it (<see cref="_holderTaking"/>) and takes nothing
    /// while a cancel sweep that could not get the slot runs (<see cref="_sweepIntent"/>); see Lane.Shutdown.cs for the
    /// handshake. Two plain stores and a load per item: the sweep pays the fence.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TryDequeueAsHolder(out WorkItemEntry item)
    {
        item = default;
        if (Cap != 1)
        {
            return _queue.TryDequeueBatch(MemoryMarshal.CreateSpan(ref item, 1)) != 0;
        }
        Volatile.Write(ref _holderTaking.Value, 1);
        bool taken = Volatile.Read(ref _sweepIntent) == 0 && _queue.TryDequeueBatch(MemoryMarshal.CreateSpan(ref item, 1)) != 0;
        Volatile.Write(ref _holderTaking.Value, 0);
        return taken;
    }

    /// <summary>
    /// Whether the item <paramref name="distance"/> positions past the head has been published (0: the next item); a
    /// hint for a turn's pace, see GlobalQueue.IsPublishedAhead.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool IsPublishedAhead(int distance) => _queue.IsPublishedAhead(distance);

    /// <summary>Waits briefly for a producer at work to get <paramref name="gap"/> items ahead; see GlobalQueue.WaitForGap.</summary>
    public void WaitForGap(int gap, int maxWaits) => _queue.WaitForGap(gap, maxWaits);

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool TryAcquireSlot()
    {
        if (Cap == int.MaxValue)
        {
            Interlocked.Increment(ref _running.Value);
            return true;
        }
        int running = Volatile.Read(ref _running.Value);
        while (running < Cap)
        {
            int seen = Interlocked.CompareExchange(ref _running.Value, running + 1, running);
            if (seen == running)
            {
                return true;
            }
            running = seen;
        }
        return false;
    }

    /// <summary>
    /// A worker has ended its turn (items it ran, or cancelled): gives its slot back. If the lane was at its cap and still
    /// has work, the returned value tells the worker to make sure someone serves it should the worker's next item block.
    /// </summary>
    public bool OnTurnDone(int completed)
    {
        if (completed != 0)
        {
            Interlocked.Add(ref _completed, completed);
        }
        int running = Interlocked.Decrement(ref _running.Value); // a full fence before the read of the queue
        Debug.Assert(running >= 0);
        if (!_queue.IsEmpty)
        {
            if (_stopped)
            {
                // The lane stopped during the turn's last item (a pool's stop marks lanes stopped as its last worker
                // leaves): what arrived since is the after-stop drive's, and this slot was what held it back.
                DriveAfterStop();
                return false;
            }
            return running == Cap - 1;
        }
        if (_state != StateRunning && running == 0)
        {
            TryStop();
        }
        return false;
    }

    /// <summary>
    /// How many items past the head a turn wants published before it takes the next item at its producer's heels, and
    /// how many it then takes without looking again (see <see cref="TryTakeNextInTurn(ref int, out WorkItemEntry)"/>). Two items share a cache line of
    /// the lane's queue, so eight are four lines.
    /// </summary>
    private const int LaneTurnGap = 8;

    /// <summary>Most waits of <c>Thread.SpinWait(8)</c> (about 0.3 µs each on the 2-core VM) a turn spends for a gap.</summary>
    private const int LaneTurnGapWaits = 8;

    /// <summary>
    /// The slot holder takes the lane's next item in a turn, keeping a small distance from a producer that is queueing
    /// right now. <paramref name="unwatched"/> is the turn's count of items it may still take without looking.
    /// </summary>
    /// <remarks>
    /// <para>A turn that runs short items catches up with a producer that feeds the lane from another thread: it then
    /// takes each item just after it was published. Each take reads the slot's cache line and frees the slot, and the
    /// producer's next write into the same line has to fetch it back, so the two threads pass one line back and forth
    /// for every item or two. So when the next
    /// item is there but the item <see cref="LaneTurnGap"/> positions further is not yet, the turn waits a moment (at
    /// most <see cref="LaneTurnGapWaits"/> short spins, about 2.5 µs here) for the producer to get that far ahead, and
    /// then takes the next <see cref="LaneTurnGap"/> items without looking again, whether the gap came or not: lines
    /// the producer has finished with (as it does, without waiting, when the gap is already there). It stops waiting after the first spin in which no new item was published (a
    /// burst of a few items, not a producer at work). The looks read slots near the head (never the queue's tail), and
    /// spinning touches nothing shared.</para>
    /// <para>The cost: an item that waits behind fewer than <see cref="LaneTurnGap"/> others in a running turn may start
    /// up to one spin (about 0.3 µs here) later when nothing more is being queued, and up to about 2.5 µs later while a
    /// producer is, at most once per <see cref="LaneTurnGap"/> items. An empty queue is not waited on here (the turn's
    /// <c>Worker.WaitBrieflyInTurn</c> polls for a next item as before), so a lane fed item by item with pauses between
    /// them takes each as soon as it is seen, and the turn-ending checks still run after every item.</para>
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryTakeNextInTurn(ref int unwatched, out WorkItemEntry item)
    {
        if (unwatched > 0)
        {
            unwatched--;
        }
        else if (IsPublishedAhead(0))
        {
            // With the gap already there (a backlog), the next items are lines the producer has finished with too:
            // one look per LaneTurnGap items, not one per item.
            if (!IsPublishedAhead(LaneTurnGap))
            {
                WaitForGap(LaneTurnGap, LaneTurnGapWaits);
            }
            unwatched = LaneTurnGap - 1;
        }
        return TryTakeNextInTurn(out item);
    }
}
