using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Tasks;

/// <summary>
/// A <c>Run(Action)</c> call whose token cannot be cancelled, the common case: the completion source of the task it
/// returns and the queued item in one object, without the token's state (<see cref="RunWorkItem{TResult}"/> handles
/// the rest). Together with its task it allocates about three quarters of what a general Run item does.
/// </summary>
/// <remarks>
/// Protocol: nothing but the queue can decide this item's fate, and a queued entry is taken exactly once: by a worker,
/// which runs it (<see cref="Execute"/>), or by shutdown with <see cref="ShutdownMode.CancelPending"/>, which cancels
/// it (<see cref="IShutdownAware.OnCancelPending"/>). So it needs no state word: it either runs or is reported
/// cancelled, never both. The action runs with the pool's (or the lane's) SynchronizationContext installed, exactly as
/// in a general Run item, and the same outcomes apply: an exception faults the task, an
/// <see cref="OperationCanceledException"/> for no token in particular cancels it.
/// </remarks>
internal sealed class ActionRunItem : TaskCompletionSource, IShutdownAware, ICallbackWrapper, ICancelCompletion
{
    public static readonly Action<object?> RunCallback = static item => ((ActionRunItem)item!).Execute();

    private readonly TaskBridge _bridge;
    private Action? _action;

    public ActionRunItem(TaskBridge bridge, Action action)
    {
        _bridge = bridge;
        _action = action;
    }

    /// <inheritdoc/>
    object? IShutdownAware.QueuedCallback => RunCallback;

    /// <summary>The caller's delegate, kept while it runs so that a stuck-item report can name it.</summary>
    object? ICallbackWrapper.WrappedCallback => _action;

    /// <summary>Shutdown took the entry before a worker did: the task completes as cancelled.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending()
    {
        Cancel();
        return ShutdownOutcome.Cancelled;
    }

    /// <summary>
    /// The entry was dropped without running (shutdown, a refused enqueue): the task completes as cancelled, after the
    /// sweep if a cancelling sweep is under way on this thread (see <see cref="CancelCompletions"/>).
    /// </summary>
    public void Cancel()
    {
        _action = null;
        CancelCompletions.CompleteOrDefer(this);
    }

    void ICancelCompletion.CompleteCancelled() => TrySetCanceled();

    private void Execute()
    {
        Action? action = _action; // dropped once it has returned (kept meanwhile for ICallbackWrapper)
        Debug.Assert(action is not null, "A queued entry is taken once: by a worker or by shutdown, never both.");
        Worker? worker = OwnedItems.Enter(this); // for the stuck-item detector: every Run shares its callback
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(_bridge.SynchronizationContext);
        try
        {
            action();
            TrySetResult();
        }
        catch (OperationCanceledException exception) when (exception.CancellationToken == CancellationToken.None)
        {
            TrySetCanceled(); // the delegate gave up on its own: as a general Run item without a token treats it
        }
        catch (Exception exception)
        {
            TrySetException(exception); // surfaces through the task, never through the pool's exception policy
        }
        finally
        {
            _action = null;
            OwnedItems.Exit(worker);
            SynchronizationContext.SetSynchronizationContext(previous);
        }
    }
}
