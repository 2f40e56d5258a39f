using System;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

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
/// A <c>Run</c> call with a cancellable token: the task it returns and the queued item in one object.
/// </summary>
/// <remarks>
/// Protocol: <c>_state</c> goes from Queued to exactly one of Started (a worker, in <see cref="Execute"/>) or Cancelled
/// (the token's callback), by CAS. The winner owns the outcome: a cancelled item drops its delegate at once (so what it
/// captured is collectable although the queue still holds this small shell until a worker pops and skips it) and
/// completes the task as cancelled; a started item unregisters from the token (without waiting for a callback that
/// lost the race) and runs with the token passed along. So an item either runs or is reported cancelled, never both.
/// </remarks>
internal sealed class RunWorkItem<TResult> : TaskCompletionSource<TResult>, IShutdownCancellable
{
    private const int Queued = 0;
    private const int Started = 1;
    private const int Cancelled = 2;

    public static readonly Action<object?> RunCallback = static item => ((RunWorkItem<TResult>)item!).Execute();

    private readonly WorkerPool _pool;
    private readonly RunKind _kind;
    private readonly CancellationToken _token;
    private Delegate? _work;
    private CancellationTokenRegistration _registration;
    private int _state;

    public RunWorkItem(WorkerPool pool, Delegate work, RunKind kind, CancellationToken token)
    {
        _pool = pool;
        _work = work;
        _kind = kind;
        _token = token;
    }

    /// <summary>Called once the item is queued: from now on the token may cancel it.</summary>
    public void RegisterCancellation() =>
        _registration = _token.UnsafeRegister(static item => ((RunWorkItem<TResult>)item!).Cancel(), this);

    /// <summary>The pool cancelled the item at shutdown (<see cref="ShutdownMode.CancelPending"/>).</summary>
    public void CancelByShutdown()
    {
        if (Interlocked.CompareExchange(ref _state, Cancelled, Queued) == Queued)
        {
            _registration.Unregister();
            _work = null;
            TrySetCanceled();
        }
    }

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
        Delegate work = _work!;
        _work = null;
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(_pool.SynchronizationContext);
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
            SynchronizationContext.SetSynchronizationContext(previous);
        }
    }

    private void Forward(Task? inner)
    {
        if (inner is null)
        {
            TrySetException(WorkerPool.NullTaskException());
            return;
        }
        if (inner.IsCompleted)
        {
            CopyFrom(inner);
            return;
        }
        inner.ContinueWith(static (task, item) => ((RunWorkItem<TResult>)item!).CopyFrom(task), this,
            CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
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
