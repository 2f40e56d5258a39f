using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Queues;
using Spindle.Telemetry;

namespace Spindle.Scheduling;

/// <summary>
/// Wraps a callback that resumes work the pool (or its I/O driver) already accepted, such as an I/O operation's
/// completion, an awaiter coming back to the pool, or a pipe's reader or writer continuation, so that shutdown with
/// <see cref="ShutdownMode.CancelPending"/> runs its entries instead of dropping them: a dropped continuation would
/// leave its awaiter waiting for ever, and an async item holding the drain would keep the pool from stopping.
/// </summary>
/// <remarks>
/// The entry is queued with <see cref="Run"/> as its callback and the wrapped callback's state as its state, so
/// queueing allocates nothing; the wrapper is found as the delegate's target (see <see cref="IShutdownAware"/>). Make one
/// per callback and keep it: a static field for a library callback, or <see cref="For"/> for callbacks that others hand
/// in (they are mostly a few static delegates, handed in again and again).
/// </remarks>
internal sealed class ContinuationCallback : IShutdownAware, ICallbackWrapper
{
    /// <summary>The wrapped callback.</summary>
    public readonly Action<object?> Callback;

    /// <summary>The delegate to queue: runs <see cref="Callback"/> with the entry's state.</summary>
    public readonly Action<object?> Run;

    public ContinuationCallback(Action<object?> callback)
    {
        Callback = callback;
        Run = Invoke;
    }

    object? IShutdownAware.QueuedCallback => Run;

    object? ICallbackWrapper.WrappedCallback => Callback;

    ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

    private void Invoke(object? state) => Callback(state);

    // One wrapper per delegate handed in (UnsafeQueueContinuation, the pipe scheduler), for as long as the delegate lives.
    private static readonly ConditionalWeakTable<Action<object?>, ContinuationCallback> s_shared = new();

    /// <summary>
    /// The wrapper for <paramref name="callback"/>, for callbacks that callers may alternate (several dispatchers on one
    /// pool, a pipe's reader and writer callbacks): the one in <paramref name="cache"/> when it wraps that callback,
    /// else the one kept for the delegate (made once). The cache takes the first delegate only: replacing it on every
    /// miss would bounce its line between the cores of alternating callers, and a table lookup costs less than that.
    /// </summary>
    public static ContinuationCallback For(ref ContinuationCallback? cache, Action<object?> callback)
    {
        ContinuationCallback? cached = Volatile.Read(ref cache);
        if (cached is not null && ReferenceEquals(cached.Callback, callback))
        {
            return cached;
        }
        ContinuationCallback wrapper = s_shared.GetValue(callback, static c => new ContinuationCallback(c));
        if (cached is null)
        {
            Interlocked.CompareExchange(ref cache, wrapper, null);
        }
        return wrapper;
    }
}
