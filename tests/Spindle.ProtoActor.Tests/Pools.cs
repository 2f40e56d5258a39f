using System.Threading;

namespace Spindle.ProtoActor.Tests;

/// <summary>Pools of a fixed size, so that tests reason about how many workers can run at once.</summary>
internal static class Pools
{
    public static WorkerPool Fixed(int threads, string name) => new(new WorkerPoolOptions
    {
        Name = name,
        MinThreads = threads,
        MaxThreads = threads,
    });

    /// <summary>
    /// Occupies the only worker of a one-thread <paramref name="pool"/> until the returned event is set, so that the
    /// test can queue work behind it and let it all go at once, in queue order.
    /// </summary>
    public static ManualResetEventSlim Block(WorkerPool pool)
    {
        var started = new ManualResetEventSlim();
        var release = new ManualResetEventSlim();
        pool.UnsafeQueueUserWorkItem(static s =>
        {
            s.started.Set();
            s.release.Wait();
        }, (started, release), preferLocal: false);
        Waits.For(started, "the blocking item started");
        return release;
    }
}
