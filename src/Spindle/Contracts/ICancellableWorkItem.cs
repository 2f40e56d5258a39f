namespace Spindle;

/// <summary>
/// An <see cref="IWorkItem"/> that is told when its pool or lane drops it without running it: a shutdown with
/// <see cref="ShutdownMode.CancelPending"/>, of the pool or of the lane, met it before it started. Each successful
/// queueing of the item then ends in exactly one call: <see cref="IWorkItem.Execute"/> or <see cref="OnCancelled"/>.
/// </summary>
/// <remarks>
/// <para>A plain <see cref="IWorkItem"/> that a cancelling shutdown drops is only counted (the figure
/// <see cref="WorkerPool.Shutdown(ShutdownMode)"/> returns); an item that completes something its caller waits for (a
/// request, a reply) implements this interface so that the caller is answered either way.</para>
/// <para><see cref="OnCancelled"/> runs on the thread that cancelled the item: the thread that called the shutdown, once
/// its sweep of the queues has let go of the pool (so it may dispose the pool or wait for its stop), or a worker that
/// took the item after the shutdown began. It should be short. What it throws is handled as an exception of a work
/// item: the pool's <see cref="WorkerPool.UnhandledException"/> event and
/// <see cref="WorkerPoolOptions.ExceptionPolicy"/>.</para>
/// </remarks>
public interface ICancellableWorkItem : IWorkItem
{
    /// <summary>The pool or lane dropped this queueing of the item without running it (a cancelling shutdown).</summary>
    void OnCancelled();
}
