using System;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using System.Threading.Tasks.Sources;

namespace Spindle.Tasks;

/// <summary>
/// The queued item and completion source behind <see cref="WorkerPool.RunAsValueTask(Action, CancellationToken)"/> and
/// its generic form. Instances are pooled: once the caller has read the result (<see cref="GetResult"/>) the item goes
/// back to a small per-type cache, so a steady stream of runs allocates nothing. The token protocol is the one of
/// <see cref="RunWorkItem{TResult}"/>.
/// </summary>
internal sealed class ValueTaskRunItem<TResult> : IValueTaskSource<TResult>, IValueTaskSource, IShutdownCancellable
{
    private const int Queued = 0;
    private const int Started = 1;
    private const int Cancelled = 2;

    public static readonly Action<object?> RunCallback = static item => ((ValueTaskRunItem<TResult>)item!).Execute();

    // A few cached items per type: rented and returned with Interlocked.Exchange on the slots (no allocation, no lock).
    private static readonly ValueTaskRunItem<TResult>?[] s_cache = new ValueTaskRunItem<TResult>?[Math.Min(64, Environment.ProcessorCount * 4)];

    private ManualResetValueTaskSourceCore<TResult> _core;
    private WorkerPool? _pool;
    private Delegate? _work;
    private bool _isFunc;
    private CancellationToken _token;
    private CancellationTokenRegistration _registration;
    private int _state;

    public short Version => _core.Version;

    public static ValueTaskRunItem<TResult> Rent(WorkerPool pool, Delegate work, bool isFunc, CancellationToken token)
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
        item._pool = pool;
        item._work = work;
        item._isFunc = isFunc;
        item._token = token;
        item._state = Queued;
        return item;
    }

    public void RegisterCancellation() =>
        _registration = _token.UnsafeRegister(static item => ((ValueTaskRunItem<TResult>)item!).Cancel(), this);

    /// <summary>The pool cancelled the item at shutdown (<see cref="ShutdownMode.CancelPending"/>).</summary>
    public void CancelByShutdown()
    {
        if (Interlocked.CompareExchange(ref _state, Cancelled, Queued) == Queued)
        {
            _registration.Unregister();
            _work = null;
            _core.SetException(new OperationCanceledException("The worker pool shut down before the item started."));
        }
    }

    private void Cancel()
    {
        if (Interlocked.CompareExchange(ref _state, Cancelled, Queued) == Queued)
        {
            _work = null;
            _core.SetException(new OperationCanceledException(_token));
        }
    }

    private void Execute()
    {
        if (Interlocked.CompareExchange(ref _state, Started, Queued) != Queued)
        {
            return;
        }
        _registration.Unregister();
        Delegate work = _work!;
        _work = null;
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(_pool!.SynchronizationContext);
        TResult result;
        try
        {
            if (_isFunc)
            {
                result = Unsafe.As<Func<TResult>>(work)();
            }
            else
            {
                Unsafe.As<Action>(work)();
                result = default!;
            }
        }
        catch (Exception exception)
        {
            SynchronizationContext.SetSynchronizationContext(previous);
            _core.SetException(exception);
            return;
        }
        SynchronizationContext.SetSynchronizationContext(previous);
        _core.SetResult(result);
    }

    public TResult GetResult(short token)
    {
        try
        {
            return _core.GetResult(token);
        }
        finally
        {
            Return();
        }
    }

    void IValueTaskSource.GetResult(short token) => GetResult(token);

    public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

    public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _core.OnCompleted(continuation, state, token, flags);

    private void Return()
    {
        _core.Reset();
        _pool = null;
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
