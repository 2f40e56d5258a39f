using System;
using System.Threading;
using Akka.Dispatch;

namespace Spindle.Akka;

/// <summary>
/// A dispatcher's executor: queues each scheduled mailbox on the dispatcher's pool or lane as a continuation (never
/// refused or dropped), without allocating and without flowing <see cref="ExecutionContext"/>, as Akka.NET's own
/// executors; on the built-in pool when the dispatcher has no target.
/// </summary>
/// <remarks>
/// Locality (<c>spindle.prefer-local</c>, on by default): a mailbox scheduled while another mailbox of this pool runs
/// on the calling worker (a message one actor sends another) goes to that worker's local queue, where the message is
/// still in the core's cache; any other schedule (from outside the pool, or a mailbox rescheduling itself after its
/// throughput) goes to the pool's global queue, behind the waiting work, because the local queue is newest first and
/// would run the same mailbox again at once. <see cref="t_running"/> tells the two apart: the mailbox whose run this
/// thread is in, set and restored around each run (thread-static, so no other thread writes it).
/// </remarks>
internal sealed class SpindleExecutorService(string id, SpindleExecutorTarget target) : ExecutorService(id)
{
    [ThreadStatic]
    private static IRunnable? t_running;

    private static readonly Action<IRunnable> s_run = static runnable =>
    {
        IRunnable? outer = t_running;
        t_running = runnable;
        try
        {
            runnable.Run();
        }
        finally
        {
            t_running = outer;
        }
    };

    public override void Execute(IRunnable run)
    {
        WorkTarget? spindle = target.Target;
        if (spindle is null)
        {
            ThreadPool.UnsafeQueueUserWorkItem(run, preferLocal: false);
            return;
        }
        IRunnable? running = t_running;
        bool local = target.PreferLocal && running is not null && !ReferenceEquals(running, run);
        spindle.UnsafeQueueContinuation(s_run, run, local);
        target.CheckStillOpen();
    }

    /// <summary>Shuts nothing down: the target outlives the dispatcher's idle periods (see the configurator).</summary>
    public override void Shutdown()
    {
    }
}
