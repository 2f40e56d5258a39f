namespace Spindle.Tasks;

/// <summary>
/// A queued item with a task or value task of its own: when the pool cancels it at shutdown it must report that
/// through its task, or the awaiting code would wait forever.
/// </summary>
internal interface IShutdownCancellable
{
    void CancelByShutdown();
}

/// <summary>The result type of the Run methods that produce no value.</summary>
internal readonly struct VoidResult
{
}
