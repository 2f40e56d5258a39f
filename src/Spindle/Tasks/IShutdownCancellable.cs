namespace Spindle.Tasks;

/// <summary>
/// A queued item with a task or value task of its own: when the pool cancels it at shutdown it must report that
/// through its task, or the awaiting code would wait forever.
/// </summary>
internal interface IShutdownCancellable
{
    /// <summary>
    /// The pool drops the item's queued entry without running it (shutdown, or an enqueue refused by a pool that is
    /// shutting down): cancels the item if it has not started and was not cancelled already. Returns whether this call
    /// cancelled it.
    /// </summary>
    bool CancelByShutdown();
}

/// <summary>The result type of the Run methods that produce no value.</summary>
internal readonly struct VoidResult
{
}
