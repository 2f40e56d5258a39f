using System;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Tasks;

/// <summary>What a run item calls.</summary>
internal enum RunKind : byte
{
    Action,
    Func,
    AsyncAction,
    AsyncFunc,
}

/// <summary>
/// A <c>Run</c> call: the task it returns and the queued item in one object.
/// </summary>
/// <remarks>
/// Protocol: <c>_state</c> goes from Queued to exactly one of Started (a worker, in <see cref="Execute"/>) or Cancelled
/// (the token's callback, or the pool dropping the entry at shutdown), by CAS. The winner owns the outcome: a cancelled
/// item drops its delegate at once (so what it captured is collectable although the queue still holds this small shell
/// until a worker pops and skips it) and completes the task as cancelled; a started item unregisters from the token
/// (without waiting for a callback that lost the race) and runs with the pool's SynchronizationContext installed. So an
/// item either runs or is reported cancelled, never both. An async delegate whose task is still running when it returns
/// takes a drain hold of the pool until that task completes, so that a shutdown drains it.
/// </remarks>
internal sealed class RunWorkItem<TResult> : TaskCompletionSource<TResult>, IShutdownAware, ICallbackWrapper, ICancelCompletion
{
    private const int Queued = 0;
    private const int Started = 1;
    private const int Cancelled = 2;

    public static readonly Action<object?> RunCallback = static item => ((RunWorkItem<TResult>)item!).Execute();

    private readonly TaskBridge _bridge;
    private readonly RunKind _kind;
    private readonly CancellationToken _token;
    private Delegate? _work;
    private CancellationTokenRegistration _registration;
    private int _state;

    public RunWorkItem(TaskBridge bridge, Delegate work, RunKind kind, CancellationToken token)
    {
        _bridge = bridge;
        _work = work;
        _kind = kind;
        _token = token;
    }

    /// <summary>Called before the item is queued, for a token that can be cancelled: from now on the token may cancel it.</summary>
    public void RegisterCancellation() =>
        _registration = _token.UnsafeRegister(static item => ((RunWorkItem<TResult>)item!).Cancel(), this);

    /// <inheritdoc/>
    object? IShutdownAware.QueuedCallback => RunCallback;

    /// <summary>The caller's delegate, kept while it runs so that a stuck-item report can name it.</summary>
    object? ICallbackWrapper.WrappedCallback => _work;

    /// <summary>Shutdown cancels the item through its task, unless it started or its token cancelled it already.</summary>
    ShutdownOutcome IShutdownAware.OnCancelPending() => CancelByShutdown() ? ShutdownOutcome.Cancelled : ShutdownOutcome.AlreadyEnded;

    /// <summary>
    /// The pool drops the item's entry without running it (shutdown, or an enqueue refused by a pool that is shutting
    /// down): cancels the item if it has not started and was not cancelled already. Returns whether this call cancelled it.
    /// </summary>
    public bool CancelByShutdown() => CancelNotRun(byToken: false);

    /// <summary>
    /// The caller's token was cancelled while the enqueue waited for room in a full lane, so the item was never queued:
    /// cancels its task with the token, unless the token's callback did already.
    /// </summary>
    public void CancelUnqueued() => CancelNotRun(byToken: true);

    /// <summary>
    /// Drops the item without running it: cancels its task (with the token when <paramref name="byToken"/>) unless it
    /// started or was cancelled already. Returns whether this call cancelled it.
    /// </summary>
    private bool CancelNotRun(bool byToken)
    {
        if (Interlocked.CompareExchange(ref _state, Cancelled, Queued) != Queued)
        {
            return false;
        }
        _registration.Unregister();
        _work = null;
        if (byToken)
        {
            TrySetCanceled(_token);
        }
        else
        {
            CancelCompletions.CompleteOrDefer(this); // after the sweep if one is under way on this thread
        }
        return true;
    }

    void ICancelCompletion.CompleteCancelled() => TrySetCanceled();

    private void Cancel()
    {
        if (Interlocked.CompareExchange(ref _state, Cancelled, Queued) == Queued)
        {
            _work = null;
            TrySetCanceled(_token);
        }
    }

    private void Execute()
    {
        if (Interlocked.CompareExchange(ref _state, Started, Queued) != Queued)
        {
            return; // cancelled before it started: it never runs
        }
        _registration.Unregister();
        Delegate work = _work!; // dropped once it has returned (kept meanwhile for ICallbackWrapper)
        Worker? worker = OwnedItems.Enter(this); // for the stuck-item detector: its callback is shared by every Run
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(_bridge.SynchronizationContext);
        try
        {
            switch (_kind)
            {
                case RunKind.Action:
                    Unsafe.As<Action>(work)();
                    TrySetResult(default!);
                    break;
                case RunKind.Func:
                    TrySetResult(Unsafe.As<Func<TResult>>(work)());
                    break;
                case RunKind.AsyncAction:
                    Forward(Unsafe.As<Func<Task>>(work)());
                    break;
                default:
                    Forward(Unsafe.As<Func<Task<TResult>>>(work)());
                    break;
            }
        }
        catch (OperationCanceledException exception) when (exception.CancellationToken == _token)
        {
            TrySetCanceled(_token); // the delegate acknowledged the cancellation, as Task.Run treats it
        }
        catch (Exception exception)
        {
            TrySetException(exception); // surfaces through the task, never through the pool's exception policy
        }
        finally
        {
            _work = null;
            OwnedItems.Exit(worker);
            SynchronizationContext.SetSynchronizationContext(previous);
        }
    }

    private void Forward(Task? inner)
    {
        if (inner is null)
        {
            TrySetException(TaskBridge.NullTaskException());
            return;
        }
        if (inner.IsCompleted)
        {
            CopyFrom(inner);
            return;
        }
        // Still running: its continuations come back to the pool, so a shutdown must wait for it. The hold is released
        // before the result is copied: completing the task may run its awaiter's code inline, and that code may dispose
        // the pool and wait for the drain.
        _bridge.AcquireDrainHold();
        inner.ContinueWith(static (task, state) =>
        {
            var item = (RunWorkItem<TResult>)state!;
            item._bridge.ReleaseDrainHold();
            item.CopyFrom(task);
        }, this, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
    }

    private void CopyFrom(Task inner)
    {
        if (inner.IsFaulted)
        {
            TrySetException(inner.Exception!.InnerExceptions);
        }
        else if (inner.IsCanceled)
        {
            TrySetCanceled(TaskCanceledToken(inner));
        }
        else
        {
            TrySetResult(inner is Task<TResult> typed ? typed.Result : default!);
        }
    }

    private static CancellationToken TaskCanceledToken(Task task)
    {
        try
        {
            task.GetAwaiter().GetResult();
        }
        catch (OperationCanceledException exception)
        {
            return exception.CancellationToken;
        }
        return CancellationToken.None;
    }
}
