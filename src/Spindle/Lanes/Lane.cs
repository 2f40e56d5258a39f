using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Primitives;
using Spindle.Queues;

namespace Spindle.Lanes;

/// <summary>The outcome of offering an item to a lane.</summary>
internal enum EnqueueStatus
{
    Accepted,
    Full,
    ShutDown,

    /// <summary>The caller's token was cancelled while it waited for room: nothing was queued.</summary>
    Cancelled,
}

/// <summary>
/// The scheduling state of one <see cref="WorkerPoolLane"/>: its queue, its counters, its cap and its lifetime. The
/// lane set decides which lane a worker takes from; this class owns what happens inside one lane.
/// </summary>
/// <remarks>
/// <para>Items of a lane live only in the lane's own queue (a closable MPMC <see cref="GlobalQueue"/>), never in a
/// worker's local ring, so every worker sees them at its next dispatch: a worker cannot sit on local work of a lower
/// class while a higher class has work.</para>
/// <para>State and who writes it: <see cref="_ready"/> (1 while the lane may have queued items: set by CAS by an
/// enqueuer that reads it clear after publishing its item, cleared by exchange by a taker that found the queue empty,
/// which then looks at the queue once more and sets it again if an item arrived; each 0/1 transition is made by one
/// CAS or exchange and reported to the lane set by the thread that made it, so the lane set's per-class count of ready
/// lanes is exact whenever nobody is between a transition and its report). Producers write it only when it reads clear,
/// so a steady stream costs them one read. <see cref="_running"/> (slots held: a worker takes one with a CAS below the
/// cap before it dequeues, and gives it back after its turn), <see cref="_completed"/> and <see cref="_cancelled"/>
/// (atomics; the completed count is added once per turn).</para>
/// <para>Flag protocol (no lost work): the enqueuer's publication is a CAS on the queue's tail (a full fence) followed
/// by its read of <see cref="_ready"/>; the taker's exchange of <see cref="_ready"/> (a full fence) is followed by its
/// read of the queue. At least one sees the other.</para>
/// <para>Cap protocol (no lost work): an enqueuer publishes (a full fence) and then reads <see cref="_running"/>; a slot
/// holder decrements <see cref="_running"/> (a full fence) and then reads the queue. At least one of them sees the other:
/// either the enqueuer finds a free slot and wakes a worker, or the holder, which is about to dispatch again anyway,
/// finds the item (and asks the stall monitor to watch in case its next item blocks).</para>
/// <para>Turns: a worker that took an item of the lane may keep the slot and run the lane's next items in a row (a turn)
/// while nothing else competes for it: no fired timer, no runnable work in a higher class or elsewhere in the lane's
/// class, and, once it has lasted a millisecond, no work waiting in a lower class (whose minimum share it would delay).
/// A serial lane then costs one dequeue per item, as a strand's drain loop does, instead of a dispatch; an empty queue
/// keeps the slot for a few microseconds before the turn ends, since a producer feeding the lane is usually about to
/// queue the next item.</para>
/// <para>Lifetime, under <see cref="_lock"/>: <see cref="_state"/> (running, draining, cancelling; written under the
/// lock, read lock-free), <see cref="_stopped"/> and <see cref="_holds"/> (async Run delegates of the lane still
/// running). The lane stops when shutdown has begun, its queue is empty, no item runs and no hold is out. A
/// continuation that arrives while the lane drains is queued under the lock unless the lane has stopped, and goes to the
/// pool's own queue after that, so it can never be stranded in a lane nobody serves. The pool's stop stops every lane at
/// once, maybe with leftovers that no worker ran; <see cref="Stopped"/> completes when a stopped lane is first seen with
/// nothing queued, running or held, so a lane's shutdown returns only once everything it accepted has run or was
/// cancelled (see <see cref="TryStop"/>).</para>
/// </remarks>
[System.Diagnostics.CodeAnalysis.SuppressMessage("Design", "CA1001", Justification =
    "The bound's SemaphoreSlim never creates its wait handle (only Wait and WaitAsync are used), so it holds nothing to dispose; disposing it at the stop could fail a caller still waiting for room.")]
internal sealed partial class Lane
{
    private const int StateRunning = 0;
    private const int StateDraining = 1;
    private const int StateCancelling = 2;

    /// <summary>
    /// Retired segments a lane's queue keeps through a trim after a full collection (4,096 slots, 128 KiB); up to
    /// <see cref="GlobalQueue.DefaultMaxRetiredSegments"/> while backlogs keep coming (see GlobalQueue.TrimRetired).
    /// A lane fed faster than it runs, as a strand often is, would otherwise allocate a 32 KiB segment for every 1,024
    /// items of its backlog, and keep each alive through collections while the backlog lasts: as much garbage again as
    /// the items themselves, for a strand of 32-byte messages.
    /// </summary>
    internal const int SegmentsKeptByTrim = 4;

    private readonly GlobalQueue _queue = new();
    private readonly LaneSet _set;
    private readonly ILaneHost _host;
    private readonly Instrument _waitInstrument; // the pool's queue-wait histogram: Enabled is read on every enqueue
    private readonly SemaphoreSlim? _room;
    private readonly object _lock = new();
    private readonly TaskCompletionSource _stoppedSource = new(TaskCreationOptions.RunContinuationsAsynchronously);

    private PaddedInt32 _ready;
    private PaddedInt32 _running;
    private long _completed;
    private long _cancelled;
    // Continuations admitted past the bound that have not been dequeued: their dequeues release no room.
    private int _overBound;
    private volatile int _state;
    private volatile bool _stopped;
    private volatile bool _takesLongRunningItems; // set once, before the first long-running item is queued
    private int _holds;
    // Continuations that arrive while a serial lane's cancel sweep runs (under _lock; null otherwise), and the lock that
    // keeps two sweeps of a serial lane from interleaving (see CancelQueuedNow).
    private List<WorkItemEntry>? _heldBySweep;
    private readonly object _sweepLock = new();
    // A serial lane's handshake between a cancel sweep that runs without the slot and the slot holder's dequeues (see
    // Lane.Shutdown.cs): _sweepIntent is written by sweeps under _sweepLock, _holderTaking by the slot holder only.
    // _holderTaking has a cache line of its own: the holder writes it twice per item, and a line shared with what
    // producers read would bounce between their cores at that rate.
    private int _sweepIntent;
    private PaddedInt32 _holderTaking;

    public Lane(LaneSet set, ILaneHost host, LaneOptions options)
    {
        _set = set;
        _host = host;
        _waitInstrument = host.WaitInstrument;
        Options = options;
        ClassIndex = options.Priority switch
        {
            LanePriority.High => LaneSet.HighClass,
            LanePriority.Low => LaneSet.LowClass,
            _ => LaneSet.NormalClass,
        };
        Share = options.Share;
        Cap = options.MaxConcurrency ?? int.MaxValue;
        if (options.QueueLimit is int limit)
        {
            _room = new SemaphoreSlim(limit, int.MaxValue);
        }
    }

    public LaneOptions Options { get; }

    /// <summary>Index of the lane's class in the lane set (dispatch order: High, Normal, Low).</summary>
    public int ClassIndex { get; }

    public int Share { get; }

    /// <summary>The concurrency cap; <see cref="int.MaxValue"/> when the lane has none.</summary>
    public int Cap { get; }

    /// <summary>The public object of this lane (set once, right after construction).</summary>
    public ILaneHandle Handle { get; private set; } = null!;

    /// <summary>The façade, once, before the lane is published: the public handle that words this lane's refusals.</summary>
    public void Attach(ILaneHandle handle)
    {
        Debug.Assert(Handle is null, "A lane has one handle.");
        Handle = handle;
    }

    public long QueuedCount => Math.Max(0, _queue.Count);

    /// <summary>For diagnostics: the lane's queue and slots as the dispatch reads them (a snapshot).</summary>
    public string DescribeState() =>
        $"{Options.Name}: queued {_queue.Count}, empty {_queue.IsEmpty}, running {Volatile.Read(ref _running.Value)}/{Cap}, ready {Volatile.Read(ref _ready.Value)}, state {_state}, stopped {_stopped}";

    public int RunningCount => Math.Max(0, Volatile.Read(ref _running.Value));

    public long CompletedCount => Interlocked.Read(ref _completed);

    public long CancelledCount => Interlocked.Read(ref _cancelled);

    /// <summary>Whether the lane's own shutdown has begun, or the pool's.</summary>
    public bool IsShutdownStarted => _state != StateRunning || _host.IsShutdownStarted;

    /// <summary>Whether queued items of this lane are to be cancelled rather than run.</summary>
    public bool IsCancelling => _state == StateCancelling || _host.IsCancelling;

    /// <summary>Whether the pool (not only this lane) is cancelling what is queued, read now.</summary>
    public bool PoolIsCancelling => _host.IsCancelling;

    public bool HasStopped => _stopped;

    public Task Stopped => _stoppedSource.Task;

    /// <summary>The dispatch path's hint: the lane may have queued items and has a free slot.</summary>
    public bool IsRunnable => Volatile.Read(ref _ready.Value) != 0 && Volatile.Read(ref _running.Value) < Cap;

    /// <summary>Whether a worker could start an item of this lane now: something is queued and a slot is free (a snapshot).</summary>
    public bool HasRunnableWork => !_queue.IsEmpty && Volatile.Read(ref _running.Value) < Cap;

    /// <summary>
    /// A hash of the queue's head mark (its head segment and position): it changes with every take, and comes back to an
    /// earlier value only by a hash collision (see <see cref="LaneSet.TakenMark"/>).
    /// </summary>
    public int HeadToken => _queue.HeadMark.GetHashCode();

    /// <summary>
    /// Whether the lane has ever been given a long-running item (<see cref="LongRunningLaneItem"/>): the relief thread
    /// leaves such a lane to the workers (see <see cref="LaneSet.TryTakeForRelief"/>).
    /// </summary>
    public bool TakesLongRunningItems => _takesLongRunningItems;

    /// <summary>
    /// The entry that queues <paramref name="entry"/> as a long-running item of this lane (<see cref="LongRunningLaneItem"/>);
    /// from now on the relief thread leaves the lane alone (the flag is set before the entry can be queued).
    /// </summary>
    public WorkItemEntry LongRunningEntry(in WorkItemEntry entry)
    {
        if (!_takesLongRunningItems)
        {
            _takesLongRunningItems = true;
        }
        return new WorkItemEntry(new LongRunningLaneItem(entry), WorkItemEntry.WorkItemMarker, null);
    }

    /// <summary>Whether the queue holds anything, counting items still being published (the leftover sweep's test).</summary>
    public bool HasQueued => !_queue.IsEmpty;

    /// <summary>Tests only: the lane's queue, to leave an enqueue half done in it (<see cref="GlobalQueue.ClaimForTests"/>).</summary>
    internal GlobalQueue QueueForTests => _queue;

    /// <summary>
    /// Offers a new item. <paramref name="mayWaitForRoom"/>: when the lane is full, block until there is room instead of
    /// answering <see cref="EnqueueStatus.Full"/>, unless the caller is an item of this capped lane (its wait could wait
    /// for its own slot). A cancellation of <paramref name="cancellationToken"/> ends that wait with
    /// <see cref="EnqueueStatus.Cancelled"/>, having queued nothing.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public EnqueueStatus TryEnqueue(in WorkItemEntry entry, bool mayWaitForRoom, CancellationToken cancellationToken = default)
    {
        if (_waitInstrument.Enabled)
        {
            return TryEnqueueCore(_host.SampleWaitIfDue(entry, this), mayWaitForRoom, cancellationToken);
        }
        return TryEnqueueCore(entry, mayWaitForRoom, cancellationToken);
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private EnqueueStatus TryEnqueueCore(in WorkItemEntry entry, bool mayWaitForRoom, CancellationToken cancellationToken)
    {
        if (_room is not null)
        {
            return TryEnqueueBounded(entry, mayWaitForRoom, cancellationToken);
        }
        // The queue is closed by the lane's shutdown and by the pool's: its answer is the admission decision.
        if (!_queue.TryEnqueue(entry))
        {
            OnRefusedByClosedQueue();
            return EnqueueStatus.ShutDown;
        }
        OnPublished();
        return EnqueueStatus.Accepted;
    }

    private EnqueueStatus TryEnqueueBounded(in WorkItemEntry entry, bool mayWaitForRoom, CancellationToken cancellationToken)
    {
        if (IsShutdownStarted)
        {
            return EnqueueStatus.ShutDown;
        }
        if (!_room!.Wait(0, CancellationToken.None))
        {
            if (!mayWaitForRoom || !CanWaitForRoom)
            {
                return EnqueueStatus.Full;
            }
            if (!WaitForRoom(cancellationToken))
            {
                return EnqueueStatus.Cancelled;
            }
        }
        if (!_queue.TryEnqueue(entry))
        {
            // Closed by the lane's shutdown or the pool's: hand the room on (a waiter behind us finds the lane closed too).
            _room.Release();
            OnRefusedByClosedQueue();
            return EnqueueStatus.ShutDown;
        }
        OnPublished();
        return EnqueueStatus.Accepted;
    }

    /// <summary>
    /// The queue refused an item because it is closed. A producer that lost the race with the close may have left an
    /// abandoned position behind (the queue publishes it as an empty entry, see GlobalQueue.Enqueue), and the queue
    /// reads as non-empty until a taker passes it, so the lane could not stop: a lane that nobody marks ready is never
    /// visited. So the refused producer marks the lane ready (under the lock, against the stop, which clears the flag
    /// after it) and wakes a worker; the worker's take finds nothing, and its failed take stops the lane (see
    /// <see cref="TryTake"/>). Once the lane has stopped, no worker visits it: the refused producer drives its queue
    /// instead, as after-stop entries are driven, until the stop has been reported. Refusals come only from a shutdown,
    /// so the lock costs nothing that matters.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void OnRefusedByClosedQueue()
    {
        WaitForClosePublished();
        bool stopped;
        lock (_lock)
        {
            stopped = _stopped;
            if (!stopped && Volatile.Read(ref _ready.Value) == 0)
            {
                MarkReady();
            }
        }
        if (!stopped)
        {
            _set.WakeForLeftover();
            return;
        }
        // Stopped: no worker takes from the lane any more. While the stop is not yet reported (the pool's leftovers still
        // queued or running), a position this producer left would keep the report waiting for a taker that may never
        // come (the pool's hand-off of its leftovers does not wait for positions in flight): the after-stop drive passes
        // it, and hands on any leftover it finds, as that hand-off does.
        if (!_stoppedSource.Task.IsCompleted)
        {
            DriveAfterStop();
        }
    }

    /// <summary>
    /// The queue was found closed: waits until the lane's or the pool's shutdown state, published right after the
    /// close by the thread that closed it, reads as started, so that a refused caller always sees
    /// <see cref="IsShutdownStarted"/> true (see Scheduler.WaitForClosePublished).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void WaitForClosePublished()
    {
        var spinner = new SpinWait();
        while (!IsShutdownStarted)
        {
            spinner.SpinOnce(sleep1Threshold: -1);
        }
    }

    /// <summary>An item of a capped lane must not block waiting for room in it: the room may need its own slot.</summary>
    public bool CanWaitForRoom => Cap == int.MaxValue || _host.LaneOfCurrentThread != this;


    /// <summary>
    /// Blocks until the bound has room (true, the room taken) or <paramref name="cancellationToken"/> is cancelled (false,
    /// nothing taken); on a pool worker inside a blocking region, so the pool compensates.
    /// </summary>
    private bool WaitForRoom(CancellationToken cancellationToken)
    {
        using (BlockingRegion.Enter())
        {
            try
            {
                _room!.Wait(cancellationToken);
                return true;
            }
            catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
            {
                return false;
            }
        }
    }

    /// <summary>Waits for room without blocking a thread, then queues; throws when the lane shuts down meanwhile.</summary>
    public async Task EnqueueWhenRoomAsync(WorkItemEntry entry, CancellationToken cancellationToken)
    {
        await _room!.WaitAsync(cancellationToken).ConfigureAwait(false);
        if (IsShutdownStarted || !_queue.TryEnqueue(entry))
        {
            _room.Release();
            OnRefusedByClosedQueue();
            Handle.ThrowShutDown();
        }
        OnPublished();
    }

    /// <summary>
    /// Queues a continuation of work the lane accepted: never refused, never delayed by the bound. Until the lane has
    /// stopped it goes to the lane's queue, so it keeps the lane's cap and order while the lane or the pool drains
    /// (decided under the lock, against the stop; the pool marks its lanes stopped before it sweeps what is left in
    /// them, so an entry queued before that is swept); once the lane has stopped, to the pool's own queue (or, after the
    /// pool has stopped, the built-in pool), through the lane's cap if it has one (see Lane.AfterStop.cs).
    /// </summary>
    public void EnqueueContinuation(in WorkItemEntry entry)
    {
        // Counted past the bound before it is published: a taker that dequeues it at once must find the count, or it
        // would give back room that this entry never took. (If the lane turns out to have stopped, the count no longer
        // matters: a stopped lane takes nothing.)
        AdmitPastBound();
        if (_queue.TryEnqueue(entry))
        {
            OnPublished();
            return;
        }
        lock (_lock)
        {
            if (_heldBySweep is List<WorkItemEntry> held)
            {
                held.Add(entry); // queued behind what the sweep keeps (see CancelQueuedNow)
                return;
            }
            if (!_stopped)
            {
                _queue.EnqueueAlways(entry);
                OnPublished();
                return;
            }
        }
        HandOnStopped(entry);
    }

    private void AdmitPastBound()
    {
        if (_room is not null)
        {
            Interlocked.Increment(ref _overBound);
        }
    }

    /// <summary>An item has been published in the queue (a full fence): mark the lane ready, and wake a worker if one could run it.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private void OnPublished()
    {
        if (Volatile.Read(ref _ready.Value) == 0)
        {
            MarkReady();
        }
        // See the cap protocol. At the cap the slot holders come back.
        if (Volatile.Read(ref _running.Value) < Cap)
        {
            _set.WakeForLane();
        }
    }

    private void MarkReady()
    {
        if (Interlocked.CompareExchange(ref _ready.Value, 1, 0) == 0)
        {
            _set.OnLaneReady(this);
            // A stopped lane's queue may hold entries its after-stop drive serves: the lane set must not count it ready.
            // The stop writes the flag and then clears the ready mark (a full fence between); this CAS is a full fence
            // before the read here: at least one of the two clears it.
            if (_stopped)
            {
                ClearReadyAfterStop();
            }
        }
    }

    /// <summary>After a full collection: gives back the retired segments beyond <see cref="SegmentsKeptByTrim"/> if no backlog has used them for <paramref name="idleMs"/>.</summary>
    public void TrimRetiredSegments(long idleMs) => _queue.TrimRetired(SegmentsKeptByTrim, idleMs);

    /// <summary>Retired segments in the lane's free list (tests and diagnostics).</summary>
    internal int RetiredSegmentCount => _queue.RetiredSegmentCount;

    /// <summary>A taker found the queue empty: clears the ready flag, then looks once more (see the flag protocol).</summary>
    private void MarkIdle()
    {
        if (Interlocked.Exchange(ref _ready.Value, 0) != 0)
        {
            _set.OnLaneIdle(this);
        }
        if (!_queue.IsEmpty)
        {
            MarkReady();
        }
    }

    public void CountCancelled() => Interlocked.Increment(ref _cancelled);

    /// <summary>An async Run delegate of this lane is still running: the lane's drain waits for it.</summary>
    public void AcquireHold() => Interlocked.Increment(ref _holds);

    public void ReleaseHold()
    {
        if (Interlocked.Decrement(ref _holds) == 0)
        {
            StopIfDue(); // the lane's shutdown may wait for this hold, and so may the report of the pool's stop
        }
    }

    /// <summary>Debugger support for the lane's task scheduler.</summary>
    public void VisitQueuedStates(Action<object?> visit, object callback) => _queue.VisitStates(callback, visit);

    /// <summary>
    /// Replaces the state of one of the lane's most recently queued entries, (<paramref name="callback"/>,
    /// <paramref name="state"/>), with <paramref name="replacement"/>, which its callback runs as nothing (see
    /// <see cref="GlobalQueue.TryReplaceRecentState"/>): a task this lane's scheduler queued and then ran inline.
    /// </summary>
    public bool TryReplaceRecentState(object callback, object state, object replacement) =>
        _queue.TryReplaceRecentState(callback, state, replacement, window: 16);
}
