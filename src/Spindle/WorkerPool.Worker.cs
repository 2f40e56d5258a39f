using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Runtime.ExceptionServices;
using System.Threading;
using Spindle.Parking;
using Spindle.Queues;
using Spindle.Threading;

namespace Spindle;

public sealed partial class WorkerPool
{
    /// <summary>How many local items a worker runs between looks at the global queue (and at its own oldest item).</summary>
    internal const int FairnessInterval = 61;

    /// <summary>How long the oldest item of a worker's local ring may wait, untouched, before its owner takes it.</summary>
    internal const int OldestLocalAgeMs = 20;

    /// <summary>Most items a worker takes from the global queue at once.</summary>
    internal const int GlobalBatchSize = 32;

    [ThreadStatic]
    private static Worker? t_currentWorker;

    // The runtime's default ExecutionContext, as captured on a fresh worker thread: items carrying it need no
    // ExecutionContext.Run because a worker runs in it between items.
    private static ExecutionContext? s_defaultContext;

    /// <summary>Whether <paramref name="context"/> is the runtime's default ExecutionContext (no AsyncLocal values).</summary>
    internal static bool IsDefaultContext(ExecutionContext context) =>
        ReferenceEquals(context, Volatile.Read(ref s_defaultContext) ?? ProbeDefaultContext());

    /// <summary>
    /// Learns the default context before any worker has started (a worker learns it as it starts): a thread started
    /// without flowing its creator's context runs in it. Once per process, and only if a pool creates a timer before
    /// any of its workers exists.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static ExecutionContext ProbeDefaultContext()
    {
        ExecutionContext? captured = null;
        var probe = new Thread(() => captured = ExecutionContext.Capture(), 64 * 1024) { IsBackground = true, Name = "Spindle context probe" };
        probe.UnsafeStart(); // UnsafeStart: the probe does not run in this thread's context
        probe.Join();
        Interlocked.CompareExchange(ref s_defaultContext, captured, null);
        return s_defaultContext!;
    }

    /// <summary>One worker thread: its ring, its blocker, its counters and its dispatch loop.</summary>
    internal sealed class Worker
    {
        public readonly WorkerPool Pool;
        public readonly WorkStealingRing Ring = new();
        public readonly ThreadBlocker Blocker;
        public readonly int Id;
        public Thread? Thread;

        // Set by a waker (before it signals the blocker) when it counted this worker in _searching on its behalf.
        public volatile bool WokenAsSearcher;

        // The LIFO slot (Go's runnext): the newest IWorkItem this worker queued to itself without an ExecutionContext,
        // the item it will most likely run next. Protocol: only the owner stores a non-null value (a release store
        // when the slot is empty, an exchange when it displaces an older item into the ring); the owner and thieves
        // take the value with a CAS to null, so exactly one of them gets it. The value is a whole item (an IWorkItem
        // has no separate state), so a thief whose CAS succeeds after the owner took the object and queued the same
        // object again has simply taken that newer queueing: no ABA hazard. Taking it costs one CAS and no copy,
        // against a fence, index arithmetic and a three-reference copy for the ring.
        public PaddedReference LifoSlot;

        // Stall monitor protocol (WorkerPool.Monitor.cs): the owner stores its completed count here when it queued a lone
        // local item without waking anyone; the monitor clears it (CAS) once the count has moved on, or wakes a helper if
        // it has not within a tick. -1: nothing deferred.
        public long DeferredAt = -1;

        // Monitor-only: the DeferredAt value the monitor saw on its previous tick.
        public long MonitorSeen = -1;

        // Owner only: nesting depth of blocking regions (WorkerPool.EnterBlockingRegion).
        public int RegionDepth;

        // Why this worker was added; it passes the reason on if it starts the next thread of a ramp.
        public ThreadInjectionReason InjectedFor;

        // Written once by the creating thread after Thread.Start returns or throws; shutdown waits for it before joining.
        public int StartState;
        public const int StartPending = 0;
        public const int StartSucceeded = 1;
        public const int StartFailed = 2;

        private readonly WorkItemEntry[] _batch = new WorkItemEntry[GlobalBatchSize];
        // Written on every item by this worker only (read by CompletedWorkItemCount): padded so that a neighbouring
        // worker's or ring's fields never share its cache line.
        private PaddedInt64 _completed;
        private int _tick;
        private long _bottomTop = -1;   // owner only: the ring's top index at the last fairness look
        private long _bottomSince;      // owner only: when that top index was first seen
        private Backoff _backoff;
        // Timer assist (owner only): items left before the next look at the timer deadline, the look's interval in
        // items, when the last look read the clock, and the worker's buffer for timers it expires itself.
        private int _timerCountdown = TimerCheckIdleInterval;
        private int _timerInterval = 1;
        private long _lastTimerCheck;
        private bool _ranTimerCallback;
        private List<Timers.TimerNode>? _expiredTimers;
        private string? _threadName;
        private CultureInfo? _culture;
        private CultureInfo? _uiCulture;

        public Worker(WorkerPool pool, int id)
        {
            Pool = pool;
            Id = id;
            Blocker = pool._options.BlockerKind is BlockerKind kind ? ThreadBlocker.Create(kind) : ThreadBlocker.Create();
            _backoff = new Backoff((uint)HashCode.Combine(id, pool));
        }

        public long CompletedCount => Volatile.Read(ref _completed.Value);

        public bool IsCurrentThread => ReferenceEquals(t_currentWorker, this);

        /// <summary>Owner only: the completed count without a volatile read.</summary>
        public long CompletedCountByOwner => _completed.Value;

        public void Main()
        {
            t_currentWorker = this;
            Thread thread = Thread.CurrentThread;
            s_defaultContext ??= ExecutionContext.Capture();
            _threadName = thread.Name;
            _culture = CultureInfo.CurrentCulture;
            _uiCulture = CultureInfo.CurrentUICulture;
            try
            {
                Pool.ContinueRamp(this);
                Pool.RunHook(Pool._options.OnWorkerStarted);
                Dispatch();
            }
            finally
            {
                try
                {
                    Pool.RunHook(Pool._options.OnWorkerStopping);
                }
                finally
                {
                    t_currentWorker = null;
                    Pool.OnWorkerExited(this);
                }
            }
        }

        private void Dispatch()
        {
            WorkerPool pool = Pool;
            while (true)
            {
                // A worker woken by an enqueue was counted as a searcher by its waker: it must go through Search, which
                // ends that count. Its ring is empty (it parked that way), so skipping TryTakeWork loses nothing.
                if ((!WokenAsSearcher && TryTakeWork(out WorkItemEntry item)) || pool.Search(this, out item))
                {
                    Execute(ref item);
                    if (--_timerCountdown <= 0)
                    {
                        CheckTimers();
                    }
                    // Above the target (a blocking region ended, a starvation episode is over, the maximum was
                    // lowered): the surplus retires as soon as its local queues are empty. Two plain loads per item.
                    if (Volatile.Read(ref pool._threadCount) > pool._threadTarget
                        && pool.TryRetire(this, ThreadInjectionReason.RetiredSurplus))
                    {
                        return;
                    }
                    continue;
                }
                if (!pool.Park(this))
                {
                    return; // shutting down and nothing left to run
                }
            }
        }

        /// <summary>The worker is about to run a timer callback: look at the deadline again right after it.</summary>
        public void NoteTimerCallback()
        {
            _ranTimerCallback = true;
            _timerCountdown = 1;
        }

        /// <summary>Items between looks at the timer deadline while the pool has no timer scheduled.</summary>
        private const int TimerCheckIdleInterval = 64;

        /// <summary>How much work (in Stopwatch ticks) a worker aims to do between looks at the timer deadline: 100 µs.</summary>
        private static readonly long s_timerCheckTicks = Stopwatch.Frequency / 10_000;

        /// <summary>
        /// Looks at the timer deadline (WorkerPool.AssistTimers) and sets how many items to run before the next look:
        /// about <see cref="s_timerCheckTicks"/> worth, judged from the time the last interval took, so that short items
        /// pay a clock read per hundreds of items and 1 ms items a look after each.
        /// </summary>
        [MethodImpl(MethodImplOptions.NoInlining)]
        private void CheckTimers()
        {
            long now = Pool.AssistTimers(ref _expiredTimers);
            if (now == 0)
            {
                _lastTimerCheck = 0;
                _timerCountdown = TimerCheckIdleInterval; // no timer: no clock read
                return;
            }
            if (_ranTimerCallback)
            {
                // Timer callbacks are short and say nothing about the items around them: judging the interval from them
                // would stretch it across the next long items (a burst of callbacks followed by 1 ms items once left
                // the next look hundreds of milliseconds away). Look after every item until ordinary work is timed again.
                _ranTimerCallback = false;
                _timerInterval = 1;
            }
            else if (_lastTimerCheck != 0)
            {
                // Shrinks at once, grows at most fourfold per look, so items that turn long are noticed soon.
                long elapsed = now - _lastTimerCheck;
                long interval = elapsed <= 0 ? 4L * _timerInterval : _timerInterval * s_timerCheckTicks / elapsed;
                _timerInterval = (int)Math.Clamp(interval, 1, Math.Min(4L * _timerInterval, 1024));
            }
            _lastTimerCheck = now;
            _timerCountdown = _timerInterval;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private bool TryTakeWork(out WorkItemEntry item)
        {
            // Timer callbacks first (WorkerPool.Timers.cs): one load of a line written only when timers fire.
            if (Pool.UrgentWorkMayBeWaiting && Pool.TryTakeUrgent(out item))
            {
                NoteTimerCallback();
                return true;
            }
            if (++_tick >= FairnessInterval)
            {
                // Every few dozen items, outside work first, so the global queue cannot be starved by a worker that keeps
                // re-queueing to itself. Then the bottom of the LIFO ring, but only once it has aged: if nobody has taken
                // from it (the ring's top index has not moved) for OldestLocalAgeMs, the owner takes its oldest item, so
                // a self-requeue loop cannot starve it. Not on every look: taking the oldest item of a tree-shaped
                // workload (tasks spawning tasks) opens a whole new subtree, and done every 61 items it made skynet's
                // live frontier breadth-first, turning its gen0 collections into gen2 ones.
                _tick = 0;
                if (TryTakeGlobalBatch(out item))
                {
                    return true;
                }
                if (TakeAgedBottom(out item))
                {
                    return true;
                }
            }
            return TryTakeLifoSlot(out item) || Ring.TryPop(out item) || TryTakeGlobalBatch(out item);
        }

        /// <summary>Owner only: takes the ring's oldest item if it has waited at the bottom for <see cref="OldestLocalAgeMs"/>.</summary>
        private bool TakeAgedBottom(out WorkItemEntry item)
        {
            long top = Ring.Top;
            long now = Environment.TickCount64;
            if (top != _bottomTop || Ring.IsEmpty)
            {
                _bottomTop = top;
                _bottomSince = now;
            }
            else if (now - _bottomSince >= OldestLocalAgeMs && Ring.TrySteal(out item))
            {
                _bottomTop = Ring.Top;
                _bottomSince = now;
                return true;
            }
            item = default;
            return false;
        }

        /// <summary>Owner or thief: takes the LIFO slot's item.</summary>
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public bool TryTakeLifoSlot(out WorkItemEntry item)
        {
            object? next = Volatile.Read(ref LifoSlot.Value);
            if (next is not null && Interlocked.CompareExchange(ref LifoSlot.Value, null, next) == next)
            {
                item = new WorkItemEntry(next, WorkItemEntry.WorkItemMarker, null);
                return true;
            }
            item = default;
            return false;
        }

        /// <summary>Whether this worker holds no queued item (ring and LIFO slot; a snapshot).</summary>
        public bool HasNoLocalWork => Volatile.Read(ref LifoSlot.Value) is null && Ring.IsEmpty;

        /// <summary>
        /// Owner only: queues an <see cref="IWorkItem"/> without ExecutionContext into the LIFO slot, moving the item it
        /// displaces into the ring. Returns whether this worker now holds more than the new item (work to share).
        /// </summary>
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public bool PushToLifoSlot(object workItem)
        {
            if (LifoSlot.Value is null)
            {
                // Only the owner stores non-null, so the slot stays empty until the store below.
                Volatile.Write(ref LifoSlot.Value, workItem);
                return !Ring.IsEmpty;
            }
            object? displaced = Interlocked.Exchange(ref LifoSlot.Value, workItem);
            if (displaced is not null)
            {
                var entry = new WorkItemEntry(displaced, WorkItemEntry.WorkItemMarker, null);
                if (!Ring.TryPush(entry))
                {
                    OverflowToGlobal(entry);
                }
            }
            return true;
        }

        /// <summary>Takes a batch from the global queue: returns the first, keeps the rest in the ring (where they can be stolen).</summary>
        public bool TryTakeGlobalBatch(out WorkItemEntry item)
        {
            int room = Ring.Capacity - Ring.Count;
            int want = Math.Min(_batch.Length, room + 1);
            int taken = Pool._globalQueue.TryDequeueBatch(_batch.AsSpan(0, want));
            if (taken == 0)
            {
                item = default;
                return false;
            }
            item = _batch[0];
            _batch[0] = default;
            // Pushed newest first, so that the owner's LIFO pops run the batch in queue order.
            if (taken > 1)
            {
                Ring.PushRangeReversed(_batch.AsSpan(1, taken - 1));
            }
            if (taken == want && taken > 1)
            {
                // A full batch: the global queue may hold more, and others can steal the rest of this batch. A partial
                // batch emptied the queue, so this worker alone can run what it took.
                Pool.WakeWorkerIfNeeded();
            }
            return true;
        }

        /// <summary>Called by the owner when its ring is full: half of it moves to the global queue, then the item goes in.</summary>
        public void OverflowToGlobal(in WorkItemEntry entry)
        {
            for (int i = Ring.Capacity / 2; i > 0 && Ring.TrySteal(out WorkItemEntry oldest); i--)
            {
                Pool._globalQueue.EnqueueAlways(oldest);
            }
            if (!Ring.TryPush(entry))
            {
                Pool._globalQueue.EnqueueAlways(entry);
            }
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private void Execute(ref WorkItemEntry item)
        {
            if (Pool._state == StateCancelling && !Pool.CancelPendingItem(item))
            {
                item = default;
                return;
            }
            try
            {
                ExecutionContext? context = item.Context;
                if (context is null || ReferenceEquals(context, s_defaultContext))
                {
                    item.Invoke();
                }
                else
                {
                    // The worker is in the default context between items, so switching to the item's context and back
                    // is all ExecutionContext.Run would do, minus its save and restore of the SynchronizationContext
                    // (ResetThreadState clears that). Restore also raises AsyncLocal change notifications.
                    ExecutionContext.Restore(context);
                    try
                    {
                        item.Invoke();
                    }
                    finally
                    {
                        ExecutionContext.Restore(s_defaultContext!);
                    }
                }
            }
            catch (Exception exception)
            {
                Pool.HandleItemException(exception);
            }
            finally
            {
                item = default; // drop the state now, not when the stack slot is next overwritten
                Volatile.Write(ref _completed.Value, _completed.Value + 1);
                if (RegionDepth != 0)
                {
                    CloseAbandonedRegion();
                }
            }
            ResetThreadState();
        }

        /// <summary>The item returned inside a blocking region it never disposed: close it, so the target comes back down.</summary>
        [MethodImpl(MethodImplOptions.NoInlining)]
        private void CloseAbandonedRegion()
        {
            RegionDepth = 1;
            Pool.ExitBlockingRegion(this);
        }

        /// <summary>Undoes what an item may have changed on the thread (the built-in pool does the same).</summary>
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private void ResetThreadState()
        {
            if (System.Threading.SynchronizationContext.Current is not null
                || !ReferenceEquals(ExecutionContext.Capture(), s_defaultContext)
                || !ReferenceEquals(CultureInfo.CurrentCulture, _culture)
                || !ReferenceEquals(CultureInfo.CurrentUICulture, _uiCulture))
            {
                ResetThreadStateSlow();
            }
            Thread thread = Thread!;
            if (!ReferenceEquals(thread.Name, _threadName) || thread.Priority != ThreadPriority.Normal
                || thread.IsBackground != Pool._options.UseBackgroundThreads)
            {
                ResetThreadIdentitySlow(thread);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        private void ResetThreadStateSlow() => RestoreThreadState(_culture!, _uiCulture!);

        [MethodImpl(MethodImplOptions.NoInlining)]
        private void ResetThreadIdentitySlow(Thread thread) =>
            RestoreThreadIdentity(thread, _threadName, Pool._options.UseBackgroundThreads);

        public ref Backoff Backoff => ref _backoff;
    }

    /// <summary>
    /// Puts back what an item may have changed on a pool thread (a worker or a dedicated thread): no
    /// SynchronizationContext, the default ExecutionContext (which also ends a flow suppression the item left behind),
    /// and the thread's cultures.
    /// </summary>
    private static void RestoreThreadState(CultureInfo culture, CultureInfo uiCulture)
    {
        System.Threading.SynchronizationContext.SetSynchronizationContext(null);
        if (s_defaultContext is not null && !ReferenceEquals(ExecutionContext.Capture(), s_defaultContext))
        {
            ExecutionContext.Restore(s_defaultContext);
        }
        CultureInfo.CurrentCulture = culture;
        CultureInfo.CurrentUICulture = uiCulture;
    }

    /// <summary>Puts back a pool thread's name, priority and background flag.</summary>
    private static void RestoreThreadIdentity(Thread thread, string? name, bool background)
    {
        if (!ReferenceEquals(thread.Name, name))
        {
            thread.Name = name;
        }
        if (thread.Priority != ThreadPriority.Normal)
        {
            thread.Priority = ThreadPriority.Normal;
        }
        thread.IsBackground = background;
    }

    private void RunHook(Action? hook)
    {
        if (hook is null)
        {
            return;
        }
        try
        {
            hook();
        }
        catch (Exception exception)
        {
            HandleItemException(exception);
        }
    }

    /// <summary>
    /// Applies the exception policy. Under <see cref="UnhandledExceptionPolicy.FailProcess"/> an unhandled exception is
    /// rethrown from here, which is inside the worker's catch block: it escapes the thread and fails the process, as an
    /// exception on a built-in pool thread does.
    /// </summary>
    private void HandleItemException(Exception exception)
    {
        if (!ReportItemException(exception))
        {
            ExceptionDispatchInfo.Throw(exception);
        }
    }

    /// <summary>
    /// Offers the exception to the <see cref="UnhandledException"/> handlers. Returns true when the pool may go on (the
    /// policy is <see cref="UnhandledExceptionPolicy.Report"/>, or a handler marked it handled).
    /// </summary>
    private bool ReportItemException(Exception exception)
    {
        var args = new WorkItemExceptionEventArgs(this, exception);
        EventHandler<WorkItemExceptionEventArgs>? handlers = UnhandledException;
        if (handlers is not null)
        {
            foreach (EventHandler<WorkItemExceptionEventArgs> handler in handlers.GetInvocationList())
            {
                try
                {
                    handler(this, args);
                }
                catch (Exception handlerException)
                {
                    // A failing handler must not take the worker down with it. Whatever it set on args.Handled before
                    // throwing stands; the other handlers still run.
                    Trace.TraceError($"Spindle: an UnhandledException handler of pool '{Name}' threw: {handlerException}");
                }
            }
        }
        return _options.ExceptionPolicy == UnhandledExceptionPolicy.Report || args.Handled;
    }
}
