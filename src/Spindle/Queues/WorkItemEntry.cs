using System;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Spindle.Queues;

/// <summary>
/// One queued work item as the queues store it: three references, no allocation per item for the
/// <see cref="WaitCallback"/>, reference-typed <c>Action&lt;TState&gt;</c> and <see cref="IWorkItem"/> paths.
/// </summary>
/// <remarks>
/// Encoding (chosen so dispatch needs one reference comparison, not a type test):
/// <list type="bullet">
/// <item><see cref="IWorkItem"/>: <see cref="Callback"/> is the item, <see cref="State"/> is <see cref="WorkItemMarker"/>.</item>
/// <item>Anything else: <see cref="Callback"/> is a delegate whose signature is <c>void (object?)</c> at the ABI level
/// (<see cref="WaitCallback"/>, or <c>Action&lt;TState&gt;</c> with a reference-typed <c>TState</c>), invoked as
/// <c>Action&lt;object?&gt;</c>. Value-typed states are wrapped in a <c>StateWorkItem&lt;TState&gt;</c> so they are never boxed.</item>
/// </list>
/// <see cref="Context"/> is null when no ExecutionContext flows; the runtime's default context is also run without
/// <see cref="ExecutionContext.Run"/> because a worker thread already runs in it between items.
/// </remarks>
internal struct WorkItemEntry
{
    /// <summary>Marks an entry whose <see cref="Callback"/> is an <see cref="IWorkItem"/>.</summary>
    internal static readonly object WorkItemMarker = new();

    public object Callback;
    public object? State;
    public ExecutionContext? Context;

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public WorkItemEntry(object callback, object? state, ExecutionContext? context)
    {
        Callback = callback;
        State = state;
        Context = context;
    }

    public readonly bool IsEmpty => Callback is null;

    /// <summary>
    /// Copies <paramref name="source"/> into <paramref name="destination"/> (a slot of a queue's array, or an
    /// <see langword="out"/> parameter) field by field: a null context is stored as the constant null, which needs no
    /// write barrier, where a plain struct assignment copies each of the three references through the runtime's
    /// barrier helper (<c>CORINFO_HELP_ASSIGN_BYREF</c>). Most entries carry no context. (The global queue's
    /// <c>Fill</c> writes into a slot its consumer cleared, so it skips the null fields altogether.)
    /// </summary>
    /// <remarks>
    /// On one thread, queueing 32 entries with fresh states, taking them as a worker's batch into its ring and popping
    /// them: 21.2-24.1 ns an item against 23.7-26.6 with the struct copies (2 cores, three alternating processes of six
    /// rounds of 9.6M items). The thieves' copy (<c>WorkStealingRing.TrySteal</c>) is left as it was: the same change
    /// there read no faster (17.8-19.1 against 17.1-19.7 ns an item pushed and stolen).
    /// </remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static void Store(ref WorkItemEntry destination, in WorkItemEntry source)
    {
        destination.Callback = source.Callback;
        destination.State = source.State;
        if (source.Context is { } context)
        {
            destination.Context = context;
        }
        else
        {
            destination.Context = null;
        }
    }

    /// <summary>
    /// The library object that decides what shutdown does with this entry, or null for a plain work item (see
    /// <see cref="Queues.IShutdownAware"/> for the order of the tests). Cold path: only shutdown with
    /// <see cref="ShutdownMode.CancelPending"/> asks.
    /// </summary>
    public readonly Queues.IShutdownAware? FindShutdownOwner()
    {
        if (ReferenceEquals(State, WorkItemMarker))
        {
            return Callback as Queues.IShutdownAware;
        }
        if (State is Queues.IShutdownAware owner && ReferenceEquals(owner.QueuedCallback, Callback))
        {
            return owner;
        }
        return Unsafe.As<Delegate>(Callback).Target is Queues.IShutdownAware target && ReferenceEquals(target.QueuedCallback, Callback)
            ? target
            : null;
    }

    /// <summary>
    /// Debugger walks: visits this entry's state when its callback is <paramref name="callback"/>, looking through the
    /// library's wrappers of a whole entry (a queue-wait sample, a lane's long-running item), which a listener or a lane
    /// may have put around it. Cold path.
    /// </summary>
    public readonly void VisitStateIf(object callback, Action<object?> visit)
    {
        WorkItemEntry entry = this;
        while (ReferenceEquals(entry.State, WorkItemMarker) && entry.Callback is Queues.IEntryWrapper wrapper)
        {
            entry = wrapper.WrappedEntry;
        }
        if (entry.Callback is not null && ReferenceEquals(entry.Callback, callback))
        {
            visit(entry.State);
        }
    }

    /// <summary>
    /// Whether this entry is (<paramref name="callback"/>, <paramref name="state"/>), looking through the library's
    /// wrappers of a whole entry (a queue-wait sample, a lane's long-running item), as <see cref="VisitStateIf"/> does.
    /// </summary>
    public readonly bool Holds(object callback, object? state)
    {
        WorkItemEntry entry = this;
        while (ReferenceEquals(entry.State, WorkItemMarker) && entry.Callback is Queues.IEntryWrapper wrapper)
        {
            entry = wrapper.WrappedEntry;
        }
        return ReferenceEquals(entry.Callback, callback) && ReferenceEquals(entry.State, state);
    }

    /// <summary>Runs the entry on the current thread, in whatever ExecutionContext the thread is in.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public readonly void Invoke()
    {
        object? state = State;
        if (ReferenceEquals(state, WorkItemMarker))
        {
            Unsafe.As<IWorkItem>(Callback).Execute();
        }
        else
        {
            Unsafe.As<Action<object?>>(Callback)(state);
        }
    }
}

/// <summary>Carries a value-typed state without boxing it (the wrapper is the only allocation).</summary>
internal sealed class StateWorkItem<TState> : IWorkItem, Queues.ICallbackWrapper
{
    private readonly Action<TState> _callback;
    private TState _state;

    public StateWorkItem(Action<TState> callback, TState state)
    {
        _callback = callback;
        _state = state;
    }

    object? Queues.ICallbackWrapper.WrappedCallback => _callback;

    public void Execute()
    {
        TState state = _state;
        _state = default!; // release what the state references as soon as the item has started
        _callback(state);
    }
}
