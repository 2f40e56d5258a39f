using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Queues;

namespace Spindle.Lanes;

// Shutdown of a lane: its own (BeginShutdown, the cancel sweep) and the pool's (the close, the leftover sweep, the stop),
// and the stop itself. The protocol is in the class remarks (Lane.cs, "Lifetime"); what runs after the stop is in
// Lane.AfterStop.cs.
internal sealed partial class Lane
{
    /// <summary>
    /// Begins the lane's own shutdown (the pool keeps running): closes the intake and, for
    /// <see cref="ShutdownMode.CancelPending"/>, cancels what is queued at once. Returns false when the lane was already
    /// at or past that state.
    /// </summary>
    public bool BeginShutdown(ShutdownMode mode)
    {
        int state = mode == ShutdownMode.CancelPending ? StateCancelling : StateDraining;
        lock (_lock)
        {
            if (_state >= state)
            {
                return false;
            }
            _queue.Close();
            _state = state;
        }
        // Wake whoever waits for room: each finds the lane closed and passes the wake on.
        WakeRoomWaiters();
        if (state == StateCancelling)
        {
            CancelQueuedNow();
        }
        TryStop();
        return true;
    }

    /// <summary>
    /// Cancels every queued item this thread can take now (workers decide on the items they took themselves). Items
    /// whose owner says they must run anyway (continuations) are queued again, past the closed intake.
    /// </summary>
    public void CancelQueuedNow()
    {
        // A serial lane's order must survive the sweep, which takes the entries that must run out of the queue and puts
        // them back at its end. So for a serial lane: sweeps of one lane never interleave (_sweepLock); continuations
        // that arrive during a sweep wait in _heldBySweep and are queued behind what it keeps; and no slot holder takes
        // an entry while a sweep holds earlier ones. The sweep holds the lane's slot if it is free. If an item of the
        // lane holds it, the sweep goes on without it (queued Run items are cancelled at once, not when the item ends),
        // and keeps the holder out of the queue by a handshake instead (SweepWithoutSlot).
        if (_stopped)
        {
            // A stopped lane takes nothing more: what its queue still holds belongs to the after-stop drive (a capped
            // lane's continuations, the pool's leftovers), which decides on each entry as it takes it (see
            // Lane.AfterStop.cs); a sweep would only take the drive's slot. A later shutdown call of a stopped pool
            // comes here.
            return;
        }
        // The tasks of the Run items it cancels complete once it has let go of the slot, the hold and the locks: their
        // continuations are the caller's code, which may wait for this lane's stop (see CancelCompletions).
        using CancelCompletions.Scope completions = CancelCompletions.Defer();
        bool serial = Cap == 1;
        bool holdsSlot = serial && TryAcquireSlot();
        // The entries that must run are out of the queue between their dequeue and their new enqueue below: a hold keeps
        // the lane from stopping meanwhile (a stop then would send them to the pool's queue, outside the lane, after
        // the lane reported itself stopped). Releasing the hold stops the lane if this emptied a shut-down lane.
        AcquireHold();
        try
        {
            if (serial)
            {
                lock (_sweepLock)
                {
                    if (holdsSlot)
                    {
                        CancelQueuedNowHeld(serial: true);
                    }
                    else
                    {
                        SweepWithoutSlot();
                    }
                }
            }
            else
            {
                CancelQueuedNowHeld(serial: false);
            }
        }
        finally
        {
            if (holdsSlot)
            {
                // As a slot holder ending its turn (see the cap protocol): the decrement, then a look at the queue.
                Interlocked.Decrement(ref _running.Value);
                if (_stopped)
                {
                    // The pool stopped during the sweep (its stop does not wait for a lane's hold): an entry that arrived
                    // since may have found this slot taken, and whoever gives a slot back after the stop drives.
                    DriveAfterStop();
                }
                else if (!_queue.IsEmpty)
                {
                    _set.WakeForLane();
                }
            }
            ReleaseHold();
        }
    }

    /// <summary>
    /// A serial lane's cancel sweep while an item of the lane holds its slot. Caller holds <see cref="_sweepLock"/>.
    /// </summary>
    /// <remarks>
    /// The handshake with the slot holder, an asymmetric Dekker: the holder writes <see cref="_holderTaking"/>, reads
    /// <see cref="_sweepIntent"/>, and dequeues only if it read zero (<see cref="TryDequeueAsHolder"/>); the sweep writes
    /// the intent, issues a process-wide barrier (which orders every other thread's earlier stores before its later
    /// loads, so the holder pays no fence), and waits while the holder is between its two writes. Either the holder
    /// reads the intent and takes nothing, or the sweep sees it taking and waits for that dequeue, which takes the head:
    /// an entry ahead of all the sweep will hold. From then on until the intent is withdrawn the holder, and any worker
    /// that takes the slot meanwhile (<see cref="TryTake"/>), takes nothing; the entries stay queued. Nested sweeps (an
    /// owner's cancellation shutting the lane down again, on this thread) count the intent up and down. When the
    /// outermost withdraws it, it looks at the queue as a publisher does: a taker that found the intent may have marked
    /// the lane idle or ended its turn with entries still queued.
    /// </remarks>
    private void SweepWithoutSlot()
    {
        Debug.Assert(Monitor.IsEntered(_sweepLock));
        Volatile.Write(ref _sweepIntent, _sweepIntent + 1);
        Interlocked.MemoryBarrierProcessWide();
        var spinner = new SpinWait();
        while (Volatile.Read(ref _holderTaking.Value) != 0)
        {
            spinner.SpinOnce(sleep1Threshold: -1); // a dequeue in progress: no user code runs there, it ends soon
        }
        try
        {
            CancelQueuedNowHeld(serial: true);
        }
        finally
        {
            int left = _sweepIntent - 1;
            Volatile.Write(ref _sweepIntent, left);
            // The withdrawal is a plain store: the look below needs it ordered before the queue's read.
            Interlocked.MemoryBarrier();
            if (left == 0 && !_queue.IsEmpty)
            {
                OnPublished();
            }
        }
    }

    private void CancelQueuedNowHeld(bool serial)
    {
        // A sweep that finds a list in place runs inside another on this thread (an owner's cancellation ran code that
        // shut the lane down again): that outer sweep queues the list.
        bool outermost = false;
        if (serial)
        {
            lock (_lock)
            {
                if (_heldBySweep is null)
                {
                    _heldBySweep = [];
                    outermost = true;
                }
            }
        }
        List<WorkItemEntry>? mustRun = null;
        try
        {
            WorkItemEntry entry = default;
            var spinner = new SpinWait();
            while (true)
            {
                if (_queue.TryDequeueBatch(MemoryMarshal.CreateSpan(ref entry, 1)) != 0)
                {
                    OnDequeued();
                    if (!_host.CancelsInstead(entry, this))
                    {
                        (mustRun ??= []).Add(entry);
                    }
                    entry = default;
                    continue;
                }
                // The dequeue stops at a position that a producer has claimed and not yet published. A serial lane's
                // sweep must not end there: it queues what it keeps again at the end, so an entry published at that
                // position afterwards would run ahead of older entries the sweep kept. It waits for the publish
                // instead. That ends: the queue is closed and _heldBySweep is set, so the positions still in flight are
                // claims made before the close (accepted) or after it (refused, published empty), each a few
                // instructions from its publish, and every later continuation goes to _heldBySweep.
                if (!serial || _queue.IsEmpty)
                {
                    break;
                }
                Debug.Assert(_queue.IsClosed, "A lane's cancel sweep runs after its queue has closed.");
                spinner.SpinOnce();
            }
        }
        finally
        {
            List<WorkItemEntry>? handOn = null;
            lock (_lock)
            {
                // The caller's hold keeps the lane's own shutdown from stopping it here, but not the pool's stop (a drain
                // that ends while this lane's owner cancels it). A stopped lane takes nothing from its queue, so what the
                // sweep keeps then goes where a continuation for a stopped lane goes, after the lock.
                if (serial && !outermost)
                {
                    // Queued before anything the outer sweep holds arrived (the queue is closed): ahead of it.
                    _heldBySweep!.InsertRange(0, (List<WorkItemEntry>?)mustRun ?? []);
                    for (int i = 0; i < (mustRun?.Count ?? 0); i++)
                    {
                        AdmitPastBound();
                    }
                }
                else if (_stopped)
                {
                    for (int i = 0; i < (mustRun?.Count ?? 0); i++)
                    {
                        AdmitPastBound(); // as below: the room this entry gave back at its dequeue is not given twice
                    }
                    handOn = [.. (List<WorkItemEntry>?)mustRun ?? [], .. (List<WorkItemEntry>?)_heldBySweep ?? []];
                    _heldBySweep = null;
                }
                else
                {
                    List<WorkItemEntry>? held = _heldBySweep;
                    _heldBySweep = null;
                    foreach (WorkItemEntry keep in (List<WorkItemEntry>?)mustRun ?? [])
                    {
                        AdmitPastBound();
                        _queue.EnqueueAlways(keep);
                        OnPublished();
                    }
                    foreach (WorkItemEntry late in (List<WorkItemEntry>?)held ?? [])
                    {
                        _queue.EnqueueAlways(late); // admitted past the bound when it arrived (or by an inner sweep)
                        OnPublished();
                    }
                }
            }
            foreach (WorkItemEntry keep in (List<WorkItemEntry>?)handOn ?? [])
            {
                HandOnStopped(keep); // in the order the lane had them: a capped lane keeps it through its queue
            }
        }
    }

    /// <summary>
    /// The pool's shutdown has begun: the lane takes no new work (its queued items drain with the pool's), and producers
    /// waiting for room end now, in every shutdown mode (a drain may never make room: the running item may be waiting
    /// for one of them).
    /// </summary>
    public void CloseForPool()
    {
        _queue.Close();
        WakeRoomWaiters();
    }

    /// <summary>
    /// Shutdown has closed the queue: lets the producers blocked for room find it closed. One token suffices, since each
    /// waiter that gets it finds the queue closed and gives it back (TryEnqueueBounded, EnqueueWhenRoomAsync), so the
    /// token passes from waiter to waiter, and a producer that arrives later finds it too. It is added only when the
    /// semaphore reads empty: at a bound of <see cref="int.MaxValue"/> a token more than the bound would overflow it, and
    /// a non-empty semaphore already has a token that the waiters pass on.
    /// </summary>
    private void WakeRoomWaiters()
    {
        if (_room is not null && _room.CurrentCount == 0)
        {
            _room.Release();
        }
    }

    /// <summary>
    /// Takes one queued item that is to run, for the leftover sweep (before the pool's stop, when the pool has no worker
    /// to run it, or after the stop), with a slot: a capped lane's cap and order hold wherever its items run (see
    /// Lane.AfterStop.cs), so false while the after-stop drive holds every slot (the sweep looks again); and the slot
    /// counts the item as running in every lane, so that the lane's stop waits until it has run. Items a cancelling
    /// shutdown drops are decided and counted here. The caller ends with <see cref="RunLeftoverHere"/> or
    /// <see cref="RunLeftoverElsewhere"/>, which give the slot back once the item has run.
    /// </summary>
    public bool TryTakeLeftover(out WorkItemEntry item)
    {
        while (true)
        {
            item = default;
            if (!TryAcquireSlot())
            {
                return false;
            }
            if (_queue.TryDequeueBatch(MemoryMarshal.CreateSpan(ref item, 1)) == 0)
            {
                // The decrement is a full fence before the stop check reads the state (see StopIfDue).
                Interlocked.Decrement(ref _running.Value);
                StopIfDue();
                return false;
            }
            OnDequeued();
            // A dropped item's completion (a Run task cancelled, a work item told of it) runs the caller's code, which
            // may wait for this lane's stop: it waits in the scope until the item's slot is given back.
            using (CancelCompletions.Defer())
            {
                if (!IsDroppedByCancel(item))
                {
                    return true;
                }
                // The stop check now, not at the loop's next turn: the item's completion (at the scope's end) may wait
                // for this lane's stop, on the thread that would make that turn. The decrement is a full fence before
                // the check reads the state (see StopIfDue).
                Interlocked.Decrement(ref _running.Value);
                StopIfDue();
            }
        }
    }

    /// <summary>An entry taken outside a worker's dispatch (leftovers, the after-stop drive): whether a cancelling shutdown drops it (see <see cref="ILaneHost.CancelsInstead"/>).</summary>
    private bool IsDroppedByCancel(in WorkItemEntry entry) => _host.CancelsInstead(entry, this);

    /// <summary>
    /// A leftover taken with <see cref="TryTakeLeftover"/> is about to run on the calling thread (the leftover sweep),
    /// holding its slot. Until the returned scope ends, the thread counts as running an entry of this lane off the
    /// workers (<see cref="AfterStopLaneOfCurrentThread"/>), so that the entry's own calls that wait for the lane (its
    /// shutdown, which waits for this very entry; a Send to its context; a wait on a task of its scheduler) do not wait
    /// for itself. The scope's end counts the leftover and gives its slot back (<see cref="OnLeftoverDone"/>).
    /// </summary>
    public LeftoverRun RunLeftoverHere() => new(this);

    /// <summary>A leftover running on the sweeping thread; see <see cref="RunLeftoverHere"/>.</summary>
    public readonly ref struct LeftoverRun
    {
        private readonly Lane _lane;
        // The lane of an outer leftover on this thread, if any: its code shut the pool down, and that call swept this one.
        private readonly Lane? _outer;

        internal LeftoverRun(Lane lane)
        {
            _lane = lane;
            _outer = t_afterStopLane;
            t_afterStopLane = lane;
        }

        public void Dispose()
        {
            t_afterStopLane = _outer;
            _lane.OnLeftoverDone();
        }
    }

    /// <summary>A leftover has run on the sweeping thread: counts it, gives back its slot, and stops the lane if that was its last work.</summary>
    private void OnLeftoverDone()
    {
        Interlocked.Increment(ref _completed);
        // No drive here: the sweep that ran this looks at the queue again before it returns. The decrement is a full
        // fence before the stop check reads the state (see StopIfDue).
        int running = Interlocked.Decrement(ref _running.Value);
        Debug.Assert(running >= 0, "A leftover gives back the slot it took.");
        StopIfDue();
    }

    /// <summary>
    /// Whoever gives a slot or a hold back, or finds the queue empty, outside a worker's turn (the leftover sweep, the
    /// after-stop drive, a cancel sweep's hold) and after a decrement or a dequeue (a full fence): stops the lane if its
    /// shutdown has begun, or reports the stop of a lane the pool has stopped, if this was its last work (see
    /// <see cref="TryStop"/>). The lock is taken only until the stop has been reported.
    /// </summary>
    /// <remarks>
    /// Against the pool's stop, which writes <see cref="_stopped"/> and then, after a full fence, reads the counts under
    /// the lock (<see cref="OnPoolStopped"/>): a caller here has made its decrement (a full fence) before it reads
    /// <see cref="_stopped"/>, so at least one of the two sees the other, and a stop is never left unreported.
    /// </remarks>
    private void StopIfDue()
    {
        if ((_state != StateRunning || _stopped) && !_stoppedSource.Task.IsCompleted)
        {
            TryStop();
        }
    }

    /// <summary>
    /// The lane's one stop decision, under the lock: when nothing is queued, running or held, stops the lane if its own
    /// shutdown has begun (it takes no more work of its own, see <see cref="_stopped"/>), and reports the stop of a
    /// stopped lane (<see cref="Stopped"/>: what waits for the lane's shutdown returns).
    /// </summary>
    /// <remarks>
    /// The lane's own stop and its report come together. The pool's stop marks every lane stopped at once
    /// (<see cref="OnPoolStopped"/>): continuations then go the after-stop way, but what the lane accepted may still be
    /// queued or running (leftovers no worker ran, which the pool's leftover sweep runs, or hands to the built-in pool,
    /// with the lane's slots), and the report waits for them: whoever gives back the last slot or hold, or finds the
    /// queue empty, after the stop calls this again (<see cref="StopIfDue"/>). The report is made once: its task
    /// completes once, whoever sees the lane idle first.
    /// </remarks>
    private void TryStop()
    {
        bool stoppedNow = false;
        bool report = false;
        lock (_lock)
        {
            int running = Volatile.Read(ref _running.Value);
            Debug.Assert(running >= 0 && Volatile.Read(ref _holds) >= 0, "Slots and holds are given back once each.");
            if (_queue.IsEmpty && running == 0 && Volatile.Read(ref _holds) == 0)
            {
                if (!_stopped && _state != StateRunning)
                {
                    _stopped = true;
                    stoppedNow = true;
                }
                report = _stopped;
            }
        }
        if (stoppedNow)
        {
            _set.Remove(this);
            ClearReadyAfterStop();
        }
        if (report)
        {
            _stoppedSource.TrySetResult();
        }
    }

    /// <summary>
    /// A stopped lane gets no more items (continuations go to the pool's queue), so a ready flag left set by its last
    /// item must be cleared here, or the lane set would count it ready for ever and every dispatch of the pool would take
    /// the lane path.
    /// </summary>
    private void ClearReadyAfterStop()
    {
        if (Interlocked.Exchange(ref _ready.Value, 0) != 0)
        {
            _set.OnLaneIdle(this);
        }
    }

    /// <summary>
    /// The pool has stopped: so has the lane (it takes nothing more as its own; continuations go the after-stop way). Its
    /// stop is reported once every item it accepted has run or was cancelled: now if nothing is left, else when the
    /// pool's leftover sweep has run what no worker ran (see <see cref="TryStop"/>).
    /// </summary>
    public void OnPoolStopped()
    {
        lock (_lock)
        {
            _stopped = true;
        }
        ClearReadyAfterStop(); // an exchange: a full fence between the write above and TryStop's reads (see StopIfDue)
        WakeRoomWaiters();
        TryStop();
    }
}
