namespace Spindle.Queues;

/// <summary>
/// A library object that runs a caller's delegate or work item (the <c>Action&lt;TState&gt;</c> carrier of a value-typed
/// state, a <c>Run</c> item, a posted or sent callback, a timer, a registered wait): the describer names what it wraps
/// rather than the wrapper.
/// </summary>
internal interface ICallbackWrapper
{
    /// <summary>The caller's delegate or work item; null once the wrapper has let go of it (read racily).</summary>
    object? WrappedCallback { get; }
}

/// <summary>
/// A library work item that runs a whole queued entry (callback, state and context) of its own: a lane's long-running
/// item, a queue-wait sample. Always queued as an <see cref="IWorkItem"/>.
/// </summary>
internal interface IEntryWrapper
{
    /// <summary>The entry it runs (set at construction, never changed).</summary>
    WorkItemEntry WrappedEntry { get; }
}
