using System.Threading;

namespace Spindle.Tests;

/// <summary>Pools with exactly one worker, and a way to hold that worker so that queued work stays queued.</summary>
internal static class SingleWorker
{
    /// <summary>A pool with one worker thread and the Report exception policy.</summary>
    public static WorkerPool NewPool(string name) => new(new WorkerPoolOptions
    {
        Name = name,
        MinThreads = 1,
        MaxThreads = 1,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    /// <summary>Blocks the pool's only worker in an item until the returned gate is set.</summary>
    public static ManualResetEventSlim Occupy(WorkerPool pool)
    {
        var gate = new ManualResetEventSlim();
        using var started = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            started.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(started, "the blocking item");
        return gate;
    }
}
