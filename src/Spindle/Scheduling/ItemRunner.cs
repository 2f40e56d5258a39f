using System;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Runtime.ExceptionServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Telemetry;

namespace Spindle.Scheduling;

/// <summary>
/// The one place that runs an item: on any pool thread through one wrapper (<see cref="Run"/>), and (at shutdown) on a
/// foreign thread or on the built-in pool. It owns the ExecutionContext switch, the exception policy, the shutdown-cancellation decision and
/// the counters those produce.
/// </summary>
/// <remarks>
/// <para>State (all written here, with atomics): <see cref="_cancelledCount"/> (items shutdown cancelled),
/// <see cref="_redirectedCount"/> (callbacks that ran on the built-in pool after the stop) and
/// <see cref="_leftoversCompleted"/> (leftovers run by a thread that is not a worker). Workers and dedicated threads
/// count their own completions.</para>
/// <para>Pool threads run between items in the runtime's default ExecutionContext (<see cref="DefaultContext"/>), so an
/// item that carries it, or none, is invoked directly; any other context is restored around the item. What an item may
/// change on the thread is put back by <see cref="PoolThreadState"/>.</para>
/// </remarks>
internal sealed class ItemRunner
{
    private readonly IPoolHost _pool;
    private long _cancelledCount;
    private long _redirectedCount;
    private long _leftoversCompleted;

    public ItemRunner(IPoolHost pool) => _pool = pool;

    /// <summary>Items cancelled by shutdown, over the pool's life.</summary>
    public long CancelledCount => Interlocked.Read(ref _cancelledCount);

    /// <summary>Callbacks that ran on the built-in pool because they arrived after the stop.</summary>
    public long RedirectedCount => Interlocked.Read(ref _redirectedCount);

    /// <summary>Leftovers run to completion by a thread that is not one of the pool's.</summary>
    public long LeftoversCompleted => Interlocked.Read(ref _leftoversCompleted);

    /// <summary>
    /// Runs <paramref name="item"/> on a pool thread (a worker or a dedicated thread, in the default context between
    /// items), applying the exception policy. Clears the entry. The caller counts the completion and resets the thread.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void RunOnPoolThread(ref WorkItemEntry item)
    {
        try
        {
            ExecutionContext? context = item.Context;
            if (context is null || ReferenceEquals(context, DefaultContext.Value))
            {
                item.Invoke();
            }
            else
            {
                // The thread is in the default context between items, so switching to the item's context and back is
                // all ExecutionContext.Run would do, minus its save and restore of the SynchronizationContext (the
                // thread-state reset clears that). Restore also raises AsyncLocal change notifications.
                ExecutionContext.Restore(context);
                try
                {
                    item.Invoke();
                }
                finally
                {
                    ExecutionContext.Restore(DefaultContext.Value!);
                }
            }
        }
        catch (Exception exception)
        {
            HandleException(exception);
        }
        finally
        {
            item = default; // drop the state now, not when the stack slot is next overwritten
        }
    }

    /// <summary>
    /// The per-item wrapper of every pool thread (a worker, the relief thread, a dedicated thread): publishes the item in
    /// the thread's <paramref name="record"/> (its callback, then the started count), runs it (<see cref="RunOnPoolThread"/>),
    /// timed for the run-time histogram as <paramref name="lane"/>'s when <paramref name="pacer"/> picks it, counts it
    /// completed and puts back what it changed on the thread. A worker's pacer samples its stream of short items
    /// (<see cref="SamplePacer"/>); the other threads' items are few and usually long (the very items an operator looks
    /// for in the histogram), and their pacers pick every item (<see cref="SamplePacer.EveryItem"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void Run(RunningItemRecord record, ref SamplePacer pacer, ref WorkItemEntry item, ref PoolThreadState threadState, Lanes.Lane? lane)
    {
        record.Begin(item.Callback);
        if (--pacer.Countdown <= 0)
        {
            RunSampled(ref pacer, ref item, lane);
        }
        else
        {
            RunOnPoolThread(ref item);
        }
        record.End();
        threadState.Reset();
    }

    /// <summary>An item the pacer picked: timed for the run-time histogram if a listener wants it.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void RunSampled(ref SamplePacer pacer, ref WorkItemEntry item, Lanes.Lane? lane)
    {
        PoolMetrics metrics = _pool.Metrics;
        bool timed = metrics.DurationEnabled;
        long start = timed ? Stopwatch.GetTimestamp() : 0;
        RunOnPoolThread(ref item);
        if (timed)
        {
            long end = Stopwatch.GetTimestamp();
            metrics.RecordDuration(start, end, lane);
            pacer.Sampled(end);
        }
        else
        {
            pacer.Idle();
        }
    }

    /// <summary>Runs a worker hook (start, stop), applying the exception policy to what it throws.</summary>
    [MethodImpl(RarePath.Compile)]
    public void RunHook(Action? hook)
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
            HandleException(exception);
        }
    }

    /// <summary>
    /// Applies the exception policy. Under <see cref="UnhandledExceptionPolicy.FailProcess"/> an unhandled exception is
    /// rethrown from here, which is inside the pool thread's catch block: it escapes the thread and fails the process,
    /// as an exception on a built-in pool thread does.
    /// </summary>
    private void HandleException(Exception exception)
    {
        if (!_pool.ReportItemException(exception))
        {
            ExceptionDispatchInfo.Throw(exception);
        }
    }

    /// <summary>
    /// The one cancel-or-run decision, for an entry that has not started and that a thread has taken (a worker's
    /// dispatch, a lane turn, the relief thread, the drain, the cancel sweeps): true when a cancelling shutdown drops it
    /// instead of running it. An entry of <paramref name="lane"/> is cancelled while the lane cancels (its own shutdown
    /// or the pool's), any other entry while the pool does (<paramref name="poolCancelling"/>). Its owner
    /// (<see cref="IShutdownAware"/>) is asked first and may keep it (a continuation that must run, a firing); an entry
    /// without an owner is a plain work item: dropped. What is dropped is counted by the pool when the pool's shutdown
    /// drops it, and by its lane.
    /// </summary>
    /// <remarks>
    /// A lane cancels when it was told to or when its pool is cancelling, and it reads the pool's state itself. The
    /// caller's <paramref name="poolCancelling"/> was read before that, so it can be stale: the pool may have begun
    /// cancelling between the two reads. Whether the pool counts a lane's dropped item is therefore decided by the pool's
    /// state read after the lane's verdict (the state only moves on to cancelling), or the item would be counted by its
    /// lane alone and the pool's shutdown would report one item fewer than it cancelled.
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool CancelsInstead(in WorkItemEntry item, Lanes.Lane? lane, bool poolCancelling) =>
        lane is null
            ? poolCancelling && !MustRunDespiteCancel(item, lane: null, byPool: true)
            : lane.IsCancelling && !MustRunDespiteCancel(item, lane, poolCancelling || lane.PoolIsCancelling);

    [MethodImpl(MethodImplOptions.NoInlining)] // the cold path of the dispatch loop: kept out of it
    private bool MustRunDespiteCancel(in WorkItemEntry item, Lanes.Lane? lane, bool byPool)
    {
        ShutdownOutcome outcome = item.FindShutdownOwner()?.OnCancelPending() ?? ShutdownOutcome.Cancelled;
        if (outcome == ShutdownOutcome.Cancelled)
        {
            if (byPool)
            {
                Interlocked.Increment(ref _cancelledCount);
            }
            lane?.CountCancelled();
            NotifyIfCancellable(item);
        }
        return outcome == ShutdownOutcome.Run;
    }

    /// <summary>
    /// A dropped entry whose work item wants to know (<see cref="ICancellableWorkItem"/>), directly or inside the
    /// library's wrappers of a whole entry (a queue-wait sample, a lane's long-running or after-stop item, which decide
    /// "cancelled" for a plain item without asking it): its <see cref="ICancellableWorkItem.OnCancelled"/> runs once the
    /// sweep under way on this thread, if any, has let go (see <see cref="CancelCompletions"/>), with the exception policy.
    /// </summary>
    private void NotifyIfCancellable(in WorkItemEntry item)
    {
        WorkItemEntry inner = item;
        while (ReferenceEquals(inner.State, WorkItemEntry.WorkItemMarker) && inner.Callback is IEntryWrapper wrapper)
        {
            inner = wrapper.WrappedEntry;
        }
        if (ReferenceEquals(inner.State, WorkItemEntry.WorkItemMarker) && inner.Callback is ICancellableWorkItem cancellable)
        {
            CancelCompletions.CompleteOrDefer(new CancelledNotice(this, cancellable));
        }
    }

    /// <summary>Tells a dropped <see cref="ICancellableWorkItem"/>, applying the exception policy to what it throws.</summary>
    private sealed class CancelledNotice(ItemRunner runner, ICancellableWorkItem item) : ICancelCompletion
    {
        public void CompleteCancelled()
        {
            try
            {
                item.OnCancelled();
            }
            catch (Exception exception)
            {
                runner.HandleException(exception);
            }
        }
    }

    /// <summary>
    /// Runs a callback that arrived after the pool stopped on the built-in ThreadPool. It is counted, and reported to the
    /// pool's event source (a warning: work after the stop runs outside the pool's threads, limits and metrics), when it
    /// starts there, unless its work has ended meanwhile (<see cref="IShutdownAware.HasEnded"/>: a disposed timer's
    /// firing, which would do nothing): the count is what ran.
    /// </summary>
    public void RunElsewhere(in WorkItemEntry entry) =>
        ThreadPool.UnsafeQueueUserWorkItem(new RedirectedCallback(this, entry), preferLocal: false);

    /// <summary>A redirected callback is about to run: false when its work has ended and running it would do nothing.</summary>
    private bool OnRedirectedStarting(in WorkItemEntry entry)
    {
        if (entry.FindShutdownOwner() is { HasEnded: true })
        {
            return false;
        }
        Interlocked.Increment(ref _redirectedCount);
        if (SpindleEventSource.Log.IsOn(EventLevel.Warning, SpindleEventSource.Keywords.Lifetime))
        {
            SpindleEventSource.Log.CallbackRedirected(_pool.Name, ItemDescriber.DescribeItem(entry.Callback, entry.State));
        }
        return true;
    }

    /// <summary>
    /// Runs one leftover item on a thread that is not the pool's, in the item's ExecutionContext (or the caller's, for
    /// an item queued without one), and puts the caller's thread state back afterwards. Returns false with the
    /// exception when the item threw and the policy says the exception is unhandled.
    /// </summary>
    public bool RunOnForeignThread(in WorkItemEntry item, out Exception? unhandled, bool countCompleted)
    {
        unhandled = null;
        ExecutionContext? callerContext = ExecutionContext.Capture();
        SynchronizationContext? callerSync = SynchronizationContext.Current;
        CultureInfo culture = CultureInfo.CurrentCulture;
        CultureInfo uiCulture = CultureInfo.CurrentUICulture;
        try
        {
            if (item.Context is null)
            {
                item.Invoke();
            }
            else
            {
                ExecutionContext.Run(item.Context, static state => ((StrongBox<WorkItemEntry>)state!).Value.Invoke(), new StrongBox<WorkItemEntry>(item));
            }
        }
        catch (Exception exception)
        {
            if (!_pool.ReportItemException(exception))
            {
                unhandled = exception;
            }
        }
        finally
        {
            if (callerContext is not null)
            {
                ExecutionContext.Restore(callerContext);
            }
            SynchronizationContext.SetSynchronizationContext(callerSync);
            CultureInfo.CurrentCulture = culture;
            CultureInfo.CurrentUICulture = uiCulture;
            if (countCompleted)
            {
                Interlocked.Increment(ref _leftoversCompleted);
            }
        }
        return unhandled is null;
    }

    /// <summary>A callback run on the built-in ThreadPool after its pool stopped: in its own context, under the pool's exception policy.</summary>
    private sealed class RedirectedCallback(ItemRunner runner, WorkItemEntry entry) : IThreadPoolWorkItem
    {
        public void Execute()
        {
            if (!runner.OnRedirectedStarting(entry))
            {
                return;
            }
            if (!runner.RunOnForeignThread(entry, out Exception? unhandled, countCompleted: false))
            {
                // The policy says the process fails: rethrown on a built-in pool thread, as there.
                ExceptionDispatchInfo.Throw(unhandled!);
            }
        }
    }
}

/// <summary>
/// What an item may change on a pool thread and the thread's own values for it, captured when the thread starts: the
/// SynchronizationContext (none), the ExecutionContext (the default), the cultures, the name, the priority and the
/// background flag. The built-in pool puts back the same things between items.
/// </summary>
internal struct PoolThreadState
{
    private readonly Thread _thread;
    private readonly string? _name;
    private readonly CultureInfo _culture;
    private readonly CultureInfo _uiCulture;
    private readonly bool _background;

    /// <summary>Captures the calling pool thread's values (call on the thread, at its start).</summary>
    public PoolThreadState(bool background)
    {
        _thread = Thread.CurrentThread;
        _name = _thread.Name;
        _culture = CultureInfo.CurrentCulture;
        _uiCulture = CultureInfo.CurrentUICulture;
        _background = background;
    }

    /// <summary>Puts back whatever the last item changed; a few reference comparisons when it changed nothing.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public readonly void Reset()
    {
        Thread thread = _thread;
        if (ThreadFields.Available)
        {
            // The thread's own fields (see ThreadFields): a pool thread starts with both contexts null, a culture set
            // by an item lives in its ExecutionContext, and the runtime raises the flag whenever the name, priority or
            // background state is set.
            if (ThreadFields.ExecutionContextOf(thread) is not null
                || ThreadFields.SynchronizationContextOf(thread) is not null)
            {
                // Restoring the default context restores the cultures: setting them again would give the thread a
                // context of its own, and the next item the slow path.
                ResetContextsSlow(cultures: false);
            }
            if (ThreadFields.MayNeedResetOf(thread))
            {
                ResetIdentitySlow(); // raises the flag again when it sets the name or a foreground thread's state
                ThreadFields.MayNeedResetOf(thread) = false;
            }
            return;
        }
        if (SynchronizationContext.Current is not null
            || !ReferenceEquals(ExecutionContext.Capture(), DefaultContext.Value)
            || !ReferenceEquals(CultureInfo.CurrentCulture, _culture)
            || !ReferenceEquals(CultureInfo.CurrentUICulture, _uiCulture))
        {
            ResetContextsSlow(cultures: true);
        }
        if (!ReferenceEquals(thread.Name, _name) || thread.Priority != ThreadPriority.Normal || thread.IsBackground != _background)
        {
            ResetIdentitySlow();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private readonly void ResetContextsSlow(bool cultures)
    {
        SynchronizationContext.SetSynchronizationContext(null);
        ExecutionContext? defaultContext = DefaultContext.Value;
        Debug.Assert(defaultContext is not null, "A pool thread learns the default context as it starts.");
        if (defaultContext is not null && !ReferenceEquals(ExecutionContext.Capture(), defaultContext))
        {
            // Also ends a flow suppression the item left behind.
            ExecutionContext.Restore(defaultContext);
        }
        if (cultures)
        {
            CultureInfo.CurrentCulture = _culture;
            CultureInfo.CurrentUICulture = _uiCulture;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private readonly void ResetIdentitySlow()
    {
        Thread thread = _thread;
        if (!ReferenceEquals(thread.Name, _name))
        {
            thread.Name = _name;
        }
        if (thread.Priority != ThreadPriority.Normal)
        {
            thread.Priority = ThreadPriority.Normal;
        }
        thread.IsBackground = _background;
    }
}
