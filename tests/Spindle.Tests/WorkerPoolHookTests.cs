using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>Worker start hooks that queue work: the work runs like any other.</summary>
public sealed class WorkerPoolHookTests
{
    [Fact]
    public void ItemsQueuedByTheStartHook_AllRun()
    {
        int hooks = 0;
        int refused = 0;
        int ran = 0;
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            MinThreads = 2,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            // Queued from the new worker itself, so the item goes to that worker's own queue before it dispatches.
            // A worker that starts only once Dispose has begun (a slow start on a loaded machine) has its item refused,
            // as any new work is then: what must hold is that every accepted one runs.
            OnWorkerStarted = () =>
            {
                Interlocked.Increment(ref hooks);
                try
                {
                    WorkerPool.Current!.QueueUserWorkItem(_ => Interlocked.Increment(ref ran));
                }
                catch (ObjectDisposedException)
                {
                    Interlocked.Increment(ref refused);
                }
            },
        });
        using var outside = new CountdownEvent(2);
        pool.QueueUserWorkItem(_ => outside.Signal());
        pool.QueueUserWorkItem(_ => outside.Signal());
        Assert.True(outside.Wait(Waits.MustHappen));
        Waits.Until(() => Volatile.Read(ref ran) >= 1, "an item queued by a start hook to run");

        pool.Dispose(); // drains: every hook-queued item must have run by now

        Assert.InRange(hooks, 1, 2);
        Assert.Equal(hooks - refused, ran);
    }
}
