using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using System.Threading.Tasks.Sources;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Tasks;

/// <summary>
/// The queued item and completion source behind <see cref="WorkTarget.RunAsValueTask(Action, CancellationToken)"/> and
/// its generic form. Instances are pooled, so a steady stream of runs allocates only the delegates. The token protocol
/// is the one of <see cref="RunWorkItem{TResult}"/>.
/// </summary>
/// <remarks>
/// <para>Reuse protocol: an item may go back to the cache only when nothing can reach it any more. Up to three parties
/// hold a share, counted in <see cref="_shares"/> (set by <see cref="Rent"/> before anyone else sees the item):</para>
/// <list type="bullet">
/// <item>the queue: its entry is reachable by a worker (or shutdown) until <see cref="Execute"/> has returned or the
/// pool dropped it (<see cref="CancelByShutdown"/>), whether the item ran or had been cancelled;</item>
/// <item>the caller: until it has read the result (<see cref="GetResult"/>);</item>
/// <item>the token's callback, when the token can be cancelled: until the callback has run, or until an
/// <see cref="CancellationTokenRegistration.Unregister"/> that returned true guarantees it never will. Without this share
/// a callback delayed on the cancelling thread could cancel the item's next rental.</item>
/// </list>
/// <para>Each party releases its share exactly once, with an atomic decrement, and touches no field afterwards; the
/// party whose release reaches zero resets the item and returns it to the cache. A cancelled item read by its caller
/// therefore stays out of the cache until its stale queue entry has been popped and skipped: it can never run on, or be
/// cancelled by, a pool that its next rental was not queued to.</para>
/// </remarks>
internal sealed class ValueTaskRunItem<TResult> : IValueTaskSource<TResult>, IValueTaskSource, IShutdownAware, ICallbackWrapper, ICancelCompletion
{
    private const int Queued = 0;
    private const int Started = 1;
    private const int Cancelled = 2;

    public static readonly Action<object?> RunCallback = static item => ((ValueTaskRunItem<TResult>)item!).Execute();

    // A few cached items per type: rented and returned with Interlocked.Exchange on the slots (no allocation, no lock).
    private static readonly ValueTaskRunItem<TResult>?[] s_cache = new ValueTaskRunItem<TResult>?[Math.Min(64, Environment.ProcessorCount * 4)];

    private ManualResetValueTaskSourceCore<TResult> _core;
    private TaskBridge? _bridge;
    private Delegate? _work;
    private bool _isFunc;
    private CancellationToken _token;
    private CancellationTokenRegistration _registration;
    private int _state;
    private int _shares;

    public short Version => _core.Version;

    public static ValueTaskRunItem<TResult> Rent(TaskBridge bridge, Delegate work, bool isFunc, CancellationToken token)
    {
        ValueTaskRunItem<TResult>? item = null;
        ValueTaskRunItem<TResult>?[] cache = s_cache;
        int start = Environment.CurrentManagedThreadId % cache.Length;
        // Look at a few slots only: allocating is cheaper than scanning them all.
        for (int i = 0; i < 4 && i < cache.Length && item is null; i++)
        {
            ref ValueTaskRunItem<TResult>? slot = ref cache[(start + i) % cache.Length];
            if (Volatile.Read(ref slot) is not null)
            {
                item = Interlocked.Exchange(ref slot, null);
            }
        }
        item ??= new ValueTaskRunItem<TResult>();
        Debug.Assert(item._shares == 0, "A cached item has no share out.");
        item._bridge = bridge;
        item._work = work;
        item._isFunc = isFunc;
        item._token = token;
        item._state = Queued;
        item._shares = token.CanBeCanceled ? 3 : 2; // published to other threads by the enqueue that follows
        return item;
    }

    /// <summary>Called before the item is queued, for a token that can be cancelled.</summary>
    public void RegisterCancellation()
    {
        Debug.Assert(_token.CanBeCanceled);
        _registration = _token.UnsafeRegister(static item => ((ValueTaskRunItem<TResult>)item!).Cancel(), this);
    }

    /// <inheritdoc/>
    object? IShutdownAware.QueuedCallback => RunCallback;

    /// <summary>The caller's delegate, kept while it runs so that a stuck-item report can name it.</summary>
    object? ICallbackWrapper.WrappedCallback => _work;

    /// <summary>Shutdown cancels the item through its value task, unless it started or its token cancelled it already.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending() => CancelByShutdown() ? ShutdownOutcome.Cancelled : ShutdownOutcome.AlreadyEnded;

    /// <summary>
    /// The pool drops the item's entry without running it: cancels the item if it has not started and was not
    /// cancelled already, and releases the queue's share. Returns whether this call cancelled it.
    /// </summary>
    public bool CancelByShutdown() => CancelNotRun(token: null);

    /// <summary>
    /// The caller's token was cancelled while the enqueue waited for room in a full lane, so the item was never queued:
    /// completes it as cancelled by the token (unless the token's callback did already) and releases the queue's share,
    /// as <see cref="CancelByShutdown"/> does; the caller's share reads the cancellation.
    /// </summary>
    public void CancelUnqueued() => CancelNotRun(_token);

    /// <summary>
    /// Drops the item without running it: cancels it if it has not started and was not cancelled already (with
    /// <paramref name="token"/>, or as cancelled by the pool's shutdown when null), then releases the token callback's
    /// share if the callback can no longer run, and the queue's share. Returns whether this call cancelled it.
    /// </summary>
    private bool CancelNotRun(CancellationToken? token)
    {
        bool cancelled = Interlocked.CompareExchange(ref _state, Cancelled, Queued) == Queued;
        if (cancelled)
        {
            _work = null;
        }
        ReleaseTokenShare();
        if (cancelled && token is CancellationToken cancelledBy)
        {
            _core.SetException(new OperationCanceledException(cancelledBy));
        }
        else if (cancelled)
        {
            // After the sweep if one is under way on this thread; the queue's share stays out until then, so the item
            // is not reused before its caller has been told.
            CancelCompletions.CompleteOrDefer(this);
            return true;
        }
        ReleaseShare(); // the queue's
        return cancelled;
    }

    void ICancelCompletion.CompleteCancelled()
    {
        _core.SetException(new OperationCanceledException("The worker pool shut down before the item started."));
        ReleaseShare(); // the queue's, last: the caller may already have read the result
    }

    private void Cancel()
    {
        if (Interlocked.CompareExchange(ref _state, Cancelled, Queued) == Queued)
        {
            _work = null;
            _core.SetException(new OperationCanceledException(_token));
        }
        ReleaseShare(); // the token callback's: it has run
    }

    private void Execute()
    {
        if (Interlocked.CompareExchange(ref _state, Started, Queued) != Queued)
        {
            ReleaseTokenShare();
            ReleaseShare(); // cancelled before it started: the stale entry is gone, it never runs
            return;
        }
        ReleaseTokenShare();
        Delegate work = _work!; // dropped once it has returned (kept meanwhile for ICallbackWrapper)
        Worker? worker = OwnedItems.Enter(this); // for the stuck-item detector: its callback is shared by every run
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(_bridge!.SynchronizationContext);
        TResult result = default!;
        Exception? failure = null;
        try
        {
            if (_isFunc)
            {
                result = Unsafe.As<Func<TResult>>(work)();
            }
            else
            {
                Unsafe.As<Action>(work)();
            }
        }
        catch (Exception exception)
        {
            failure = exception;
        }
        _work = null;
        OwnedItems.Exit(worker);
        SynchronizationContext.SetSynchronizationContext(previous);
        if (failure is null)
        {
            _core.SetResult(result);
        }
        else
        {
            _core.SetException(failure);
        }
        ReleaseShare(); // the queue's, last: the caller may already have read the result
    }

    /// <summary>
    /// Releases the token callback's share on its behalf if the callback can no longer run (Unregister returned true);
    /// otherwise the callback is running or has run and releases it itself.
    /// </summary>
    private void ReleaseTokenShare()
    {
        if (_token.CanBeCanceled && _registration.Unregister())
        {
            ReleaseShare();
        }
    }

    public TResult GetResult(short token)
    {
        // A read with a stale token or before completion is a misuse that the core reports; it must not release the
        // caller's share, which belongs to the read of the completed result.
        bool reads = token == _core.Version && _core.GetStatus(token) != ValueTaskSourceStatus.Pending;
        try
        {
            return _core.GetResult(token);
        }
        finally
        {
            if (reads)
            {
                ReleaseShare(); // the caller's
            }
        }
    }

    void IValueTaskSource.GetResult(short token) => GetResult(token);

    public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

    public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _core.OnCompleted(continuation, state, token, flags);

    private void ReleaseShare()
    {
        int left = Interlocked.Decrement(ref _shares);
        Debug.Assert(left >= 0, "Each party releases its share once.");
        if (left == 0)
        {
            Return();
        }
    }

    /// <summary>Nobody can reach the item any more: reset it and offer it to the cache.</summary>
    private void Return()
    {
        _core.Reset();
        _bridge = null;
        _work = null;
        _token = default;
        _registration = default;
        ValueTaskRunItem<TResult>?[] cache = s_cache;
        int start = Environment.CurrentManagedThreadId % cache.Length;
        for (int i = 0; i < 4 && i < cache.Length; i++)
        {
            if (Interlocked.CompareExchange(ref cache[(start + i) % cache.Length], this, null) is null)
            {
                return;
            }
        }
    }
}
