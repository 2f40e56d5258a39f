using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Lanes;
using Spindle.Parking;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Threading;

/// <summary>
/// The relief thread: bounds in time how long work queued from outside the pool (to its queue or to a lane) usually
/// waits while every worker is inside a long item. A busy worker looks at the global queue about every 100 µs of work,
/// and at the lanes at each dispatch, but only between items, so behind items of 1 ms an outside item waits for the
/// first of them to end (on two workers, about 0.3 ms at the median and 0.9 ms at the 99th percentile; behind 10 ms
/// items, ten times that). No worker can be interrupted, so the bound needs a thread that is not inside an item: this
/// one, which runs queued items itself once nobody has taken any for
/// <see cref="WorkerPoolOptions.OutsideWorkReliefDelay"/>, and goes back to sleep as soon as a worker takes queued work
/// again, no worker is in long items any more, or nothing is left that it may take.
/// </summary>
/// <remarks>
/// <para>The cost is one thread above the cores while it runs (the items it relieves share the cores with the long
/// items), so it acts only under the condition above and counts against <see cref="WorkerPoolOptions.MaxThreads"/>: it
/// is armed, and takes each item, only while the pool has fewer workers than its maximum, so a pool at its maximum (a
/// pool of one thread used as a serial executor, say) never runs an item on it, nor does a pool with relief turned off.
/// (A worker the controller adds while the relief thread is inside an item can exceed the maximum by that one item.)
/// It takes a High lane's item first, then the oldest of the pool's queue, then a Normal or Low lane's (the workers'
/// order of classes, simplified: within the Normal class the workers rotate the pool's queue among the lanes by share,
/// and lower classes get a minimum share; neither matters for the few items the relief runs), and a lane's item only
/// with one of the lane's slots, so caps hold: a serial lane's items still run one at a time, in order. It leaves
/// alone the lanes that take long-running items, which would hold it for their whole length (a worker runs one inside
/// a blocking region, and the pool adds a thread for it; nothing replaces the relief thread). A lane's first
/// long-running item can still be taken by a relief that was already past the lane's flag.</para>
/// <para>What the bound does not cover: an outside item that itself runs long holds the thread; the thread is armed
/// only by an enqueue that found nobody to wake (or a lane's slot given back with items waiting and nobody parked), so
/// items that were queued while a worker searched (or while the pool added a worker), items moved to the global queue
/// by a full local ring, an item queued to a lane in the instant a taker had cleared its ready flag, and items that were
/// waiting before the workers' items turned long wait for the next such enqueue or for a worker's look; any take of
/// queued work counts as the workers keeping up, so an item of the pool's queue can wait behind a High lane's turn of
/// short items (the turn ends within a millisecond once lower work waits); the Monitor and WaitOnAddress
/// blockers (other platforms than Linux) round its sleep up to whole milliseconds. The thread is created at the first
/// relief the pool needs and lives until the pool stops.</para>
/// <para>Arming, a filter on the enqueue path. A global enqueue, or a lane's with a slot free, that found no worker to
/// wake (none parked, none searching) calls <see cref="OnOutsideWorkUnattended"/>. That does nothing unless some worker
/// counts as being in long items (<see cref="NoteLongItems"/>, from the timing of the workers' looks, which a lane's
/// items count down too: workers in short items look within about 100 µs anyway) and the thread is not armed already;
/// otherwise it claims <see cref="_armed"/> 0 -> 1 (so a burst arms it once), stores the takers' progress
/// (<see cref="Progress"/>) and the time, and signals the thread. So a burst of short items, the common shape, costs
/// two plain loads per enqueue and never wakes this thread.</para>
/// <para>Watching (this thread only). It waits until one delay after the arming, then compares the takers' progress
/// (the global queue's head mark, <see cref="GlobalQueue.HeadMark"/>, and a sum of hashes of the lanes' head marks:
/// both change with every take) with the progress at the arming: if a worker took queued work meanwhile, or a worker is
/// parked or searching, it watches one more delay from now; if nothing is left that it may take (the pool's queue
/// empty, no lane with an item and a free slot), the pool is at its maximum or no worker is in long items any more, it
/// disarms. Otherwise nobody took queued work for a whole delay: it takes the next item and runs it, then, if no worker
/// took queued work while it ran, the next one at once (it has waited at least as long); if there is none it may take,
/// it disarms without a look again (the workers take what waits, and the next unattended enqueue arms it).</para>
/// <para>Disarming with nothing to take: the thread stores <see cref="_armed"/> = 0, fences, then looks at the queues
/// once more. An enqueue publishes its item (a full fence) before it reads <see cref="_armed"/> (a lane's enqueue marks
/// the lane ready before that read unless it finds the lane ready already), so either that read sees 0 (and arms
/// again) or this look sees the item (and the thread arms itself again), but for the instant of a taker's clearing of a
/// lane's ready flag listed above. Nothing is lost either way: an item the relief does not take is taken by a worker at
/// its next look or dispatch, as it would be without relief.</para>
/// <para>Items run here as on a dedicated thread (<see cref="ItemRunner.RunOnPoolThread"/>, the thread state reset
/// after each, the worker hooks at start and exit), each under a drain hold taken before the admission state is read,
/// so a shutdown either is seen before the take (and the workers drain the queues) or waits for the item. An item taken
/// just as shutdown with <see cref="ShutdownMode.CancelPending"/> began is cancelled and counted, as a worker does; a
/// lane's item likewise when the lane's own shutdown cancels, and its slot is given back after it either way (which
/// lets a lane that is shutting down stop). While a lane's item runs here, <see cref="RunningLane"/> names the lane, so
/// the item is its lane's own (<see cref="WorkerPoolLane.Current"/>; an item of a capped lane does not wait for room in
/// it, as on a worker).</para>
/// <para>The stuck-item detector watches this thread as it watches a worker (see <see cref="Worker"/>): it keeps the
/// same <see cref="RunningItemRecord"/>: before each item this thread publishes the item's callback, then counts it as
/// started; the library's items with a shared callback publish themselves (<see cref="EnterOwnedItem"/>); after the
/// item this thread clears both and counts the completion. The detector reads the completed count, then the started count,
/// then the callback and owner, and keeps them only if the completed count has not moved meanwhile. Its report names
/// this thread with worker number 0 (workers are numbered from 1).</para>
/// <para>State: <see cref="_armed"/> (atomics: enqueuers claim it, this thread clears it), <see cref="_armedAt"/> and
/// <see cref="_armedMark"/> (the claimer, before its signal), <see cref="_longItemWorkers"/> (atomics, by workers at
/// their transitions), <see cref="_thread"/>, <see cref="_released"/> and <see cref="_creationFailed"/> (under
/// <see cref="_lock"/>), the started and completed counts, the running callback, owner and lane (this thread, read by
/// anyone), and the stuck-item watch fields (the detector, on the timer thread).</para>
/// </remarks>
internal sealed partial class OutsideRelief : IOutsideRelief
{
    private readonly Lock _lock = new();
    private readonly IPoolHost _pool;
    private readonly WorkerPoolOptions _options;
    private readonly Scheduler _scheduler;
    private readonly IdleCoordinator _idle;
    private readonly ThreadController _threads;
    private readonly ItemRunner _runner;
    private readonly ThreadBlocker _blocker;
    private readonly long _delayTicks;   // 0: relief is off
    private PaddedInt32 _armed;          // 0: asleep or about to be; 1: armed (see the remarks)
    private PaddedInt32 _longItemWorkers;
    private long _armedAt;
    private Progress _armedMark;         // the takers' progress at the arming (written with _armedAt, before the signal)
    private Thread? _thread;
    private bool _released;
    private bool _creationFailed;
    private readonly RunningItemRecord _record = new();   // this thread writes it (see the remarks)
    private SamplePacer _timing = SamplePacer.EveryItem(); // this thread's: its items are few and long, each is timed
    private Lane? _runningLane;          // this thread, while it runs an item of a lane (read by anyone)
    private readonly WorkItemEntry[] _one = new WorkItemEntry[1]; // this thread's take buffer

    public OutsideRelief(IPoolHost pool, WorkerPoolOptions options, Scheduler scheduler, IdleCoordinator idle, ThreadController threads, ItemRunner runner)
    {
        _pool = pool;
        _options = options;
        _scheduler = scheduler;
        _idle = idle;
        _threads = threads;
        _runner = runner;
        _blocker = options.BlockerKind is BlockerKind kind ? ThreadBlocker.Create(kind) : ThreadBlocker.Create();
        TimeSpan delay = options.OutsideWorkReliefDelay;
        _delayTicks = delay == Timeout.InfiniteTimeSpan ? 0 : Math.Max(1, (long)(delay.TotalSeconds * Stopwatch.Frequency));
    }

    /// <summary>The pool this relief thread serves.</summary>
    public IPoolHost Pool => _pool;

    /// <summary>The lane of the item the thread runs, if it is a lane's (for the stuck-item report).</summary>
    public Lane? RunningLane => Volatile.Read(ref _runningLane);

    /// <summary>
    /// What the relief compares to tell whether anyone took queued work during a delay: the pool queue's head mark and
    /// the lanes' <see cref="LaneSet.TakenMark"/>. Both change with every take.
    /// </summary>
    private readonly record struct Progress(GlobalQueue.Mark Global, long Lanes);

    private Progress ReadProgress() => new(_scheduler.GlobalHeadMark, _scheduler.Lanes.TakenMark);

    /// <summary>Whether the pool's queue is empty and no lane has an item a slot is free for (a snapshot).</summary>
    private bool NothingToRelieve => _scheduler.GlobalQueueIsEmpty && !_scheduler.Lanes.AnyRunnable();

    /// <summary>Items the relief thread has run to completion.</summary>
    public long CompletedCount => _record.CompletedCount;

    /// <summary>Items the relief thread has started; one ahead of <see cref="CompletedCount"/> while it runs one.</summary>
    public long StartedCount => _record.StartedCount;

    /// <summary>The callback of the item the thread runs (null between items).</summary>
    public object? RunningCallback => _record.Callback;

    /// <summary>The library object that runs the caller's delegate under a shared callback (see <see cref="EnterOwnedItem"/>).</summary>
    public object? RunningOwner => _record.Owner;

    /// <summary>The relief thread, once started.</summary>
    public Thread? Thread => Volatile.Read(ref _thread);

    /// <summary>The stuck-item detector's watch of this thread (timer thread only).</summary>
    public readonly Telemetry.StuckWatch StuckWatch = new();

    /// <summary>
    /// Called on this relief thread: publishes <paramref name="owner"/> as the object running its current item (cleared
    /// by <see cref="ExitOwnedItem"/>, and again by the relief thread after the item).
    /// </summary>
    public void EnterOwnedItem(object owner) => _record.EnterOwner(owner);

    /// <summary>The owner published by <see cref="EnterOwnedItem"/> has returned: forgets it.</summary>
    public void ExitOwnedItem() => _record.ExitOwner();

    /// <summary>
    /// A worker's looks found items of 200 µs or more at two looks running, or no longer do (<paramref name="longItems"/>
    /// false); called at each transition only, and with false when a worker that was counted parks or exits.
    /// </summary>
    public void NoteLongItems(bool longItems)
    {
        int count = longItems ? Interlocked.Increment(ref _longItemWorkers.Value) : Interlocked.Decrement(ref _longItemWorkers.Value);
        Debug.Assert(count >= 0, "A worker leaves the count only after entering it.");
    }

    /// <summary>A global enqueue found no worker to wake: arms the relief if some worker is in long items.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void OnOutsideWorkUnattended()
    {
        if (Volatile.Read(ref _longItemWorkers.Value) != 0 && Volatile.Read(ref _armed.Value) == 0)
        {
            Arm();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void Arm()
    {
        if (_delayTicks == 0 || _threads.ThreadCount >= _threads.MaxThreads)
        {
            return; // off, or the pool may not have a thread more
        }
        if (Interlocked.CompareExchange(ref _armed.Value, 1, 0) != 0)
        {
            return;
        }
        // Read by the thread after the signal (whose exchange orders these writes before its wake): the delay and the
        // progress it measures both start here, not when the thread gets a core, which on busy cores is often later.
        _armedMark = ReadProgress();
        Volatile.Write(ref _armedAt, Stopwatch.GetTimestamp());
        if (Volatile.Read(ref _thread) is null && !TryStartThread())
        {
            Volatile.Write(ref _armed.Value, 0);
            return;
        }
        _blocker.Signal();
    }

    private bool TryStartThread()
    {
        lock (_lock)
        {
            if (_thread is not null)
            {
                return true;
            }
            if (_released || _creationFailed)
            {
                return false;
            }
            // Relief is an improvement, never a requirement: if the OS refuses the thread, the workers still take the
            // queue's items at their looks. Not retried: a pool refused a thread is short of them, and this one is extra.
            _creationFailed = true;
            Thread thread;
            try
            {
                // The options' thread factory (a test seam) runs under this lock, on the enqueuing thread: an enqueue it
                // makes finds the thread armed already and does not come back here.
                thread = PoolThread.Create(_options, Main, $"{_options.ThreadNamePrefixOrName} relief");
            }
            catch (Exception)
            {
                _threads.Starts.RecordFailure(PoolThreadKind.Relief);
                return false;
            }
            try
            {
                _threads.Starts.Start(thread, PoolThreadKind.Relief); // counts a refusal
            }
            catch (Exception)
            {
                return false;
            }
            _creationFailed = false;
            Volatile.Write(ref _thread, thread);
            return true;
        }
    }

    /// <summary>The pool has stopped: wakes the thread so that it exits, and returns it (null if none was started).</summary>
    public Thread? Release()
    {
        Thread? thread;
        lock (_lock)
        {
            _released = true;
            thread = _thread;
        }
        _blocker.Signal();
        return thread;
    }

    private void Main()
    {
        OutsideReliefThread.SetCurrent(this);
        DefaultContext.OnPoolThreadStarted();
        NarrowTimerSlack();
        var threadState = new PoolThreadState(_options.UseBackgroundThreads);
        try
        {
            _runner.RunHook(_options.OnWorkerStarted);
            // The release is checked before every sleep: a release that came while watching may have had its signal
            // taken by the watch's own timed sleep.
            while (!Volatile.Read(ref _released))
            {
                _blocker.Wait();
                if (!Volatile.Read(ref _released) && Volatile.Read(ref _armed.Value) != 0)
                {
                    Watch(ref threadState);
                }
            }
        }
        finally
        {
            try
            {
                _runner.RunHook(_options.OnWorkerStopping);
            }
            finally
            {
                OutsideReliefThread.SetCurrent(null);
            }
        }
    }

    /// <summary>
    /// Linux lets a timed sleep end up to the thread's timer slack late (50 µs by default, more than twice the default
    /// delay): this thread's sleeps are its measure of the delay, so it asks for 1 µs. Elsewhere the blockers' own
    /// resolution applies.
    /// </summary>
    private static void NarrowTimerSlack()
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }
        try
        {
            _ = LinuxIo.Prctl(LinuxIo.PrSetTimerSlack, 1_000, 0, 0, 0);
        }
        catch (Exception exception) when (exception is DllNotFoundException or EntryPointNotFoundException)
        {
            // No libc prctl: the default slack only makes the relief later.
        }
    }

    /// <summary>Armed: watches the global queue until it is empty, relieving it whenever nobody took from it for a delay.</summary>
    private void Watch(ref PoolThreadState threadState)
    {
        long deadline = Volatile.Read(ref _armedAt) + _delayTicks;
        Progress mark = _armedMark;
        while (true)
        {
            if (_blocker.WaitUntil(deadline) && Volatile.Read(ref _released))
            {
                return; // a signal while armed is a release (enqueuers signal only when they arm)
            }
            if (Stopwatch.GetTimestamp() < deadline)
            {
                continue; // a stale signal from an earlier arming
            }
            if (_scheduler.IsShutdownStarted || NothingToRelieve)
            {
                if (!TryDisarm())
                {
                    return;
                }
                // Work arrived while disarming and this thread armed itself again: watch it from now.
                mark = ReadProgress();
                deadline = Stopwatch.GetTimestamp() + _delayTicks;
                continue;
            }
            Progress now = ReadProgress();
            if (!now.Equals(mark) || _idle.SearchingCount != 0 || _idle.IdleCount != 0)
            {
                // A worker took outside work within the delay, or one is free to: the workers are keeping up.
                mark = now;
                deadline = Stopwatch.GetTimestamp() + _delayTicks;
                continue;
            }
            if (_threads.ThreadCount >= _threads.MaxThreads || Volatile.Read(ref _longItemWorkers.Value) == 0)
            {
                // The pool has reached its maximum since the arming (this thread may not add one more), or no worker is
                // in long items any more (short items are looked past often enough: a backlog of them is the workers'
                // to drain, and gaps of a delay between their batches are normal). Disarmed without the look again:
                // the workers take what waits, and an enqueue arms the thread again when both hold once more.
                Volatile.Write(ref _armed.Value, 0);
                return;
            }
            // Nobody took queued work for a whole delay: run the next item here, and the next ones while the workers
            // still take none.
            bool tookAny = false;
            while (RunNext(ref threadState, out mark))
            {
                tookAny = true;
                if (!ReadProgress().Equals(mark))
                {
                    break;
                }
            }
            if (!tookAny)
            {
                // Nothing this thread may take (a lane that takes long-running items, a lane at its cap since, or an item
                // a worker took first): disarmed, without the look again; the workers take what waits, and the next
                // enqueue that finds nobody free arms the thread again.
                Volatile.Write(ref _armed.Value, 0);
                return;
            }
            mark = ReadProgress();
            deadline = Stopwatch.GetTimestamp() + _delayTicks;
        }
    }

    /// <summary>
    /// Clears the armed flag, then looks at the queue once more (see the remarks). Returns true when work arrived
    /// meanwhile and this thread armed itself again (the caller keeps watching), false when it should sleep.
    /// </summary>
    private bool TryDisarm()
    {
        Volatile.Write(ref _armed.Value, 0);
        Interlocked.MemoryBarrier();
        if (_scheduler.IsShutdownStarted || NothingToRelieve)
        {
            return false;
        }
        // An enqueue that read the flag before the store skipped the arming: arm again for it, unless an enqueue after
        // the store did (then its signal wakes this thread at once).
        return Interlocked.CompareExchange(ref _armed.Value, 1, 0) == 0;
    }
}
