using System;
using System.Threading;
using Akka.Dispatch;

namespace Spindle.Akka;

/// <summary>
/// A dispatcher's executor: queues each scheduled mailbox on the dispatcher's pool or lane as a continuation (never
/// refused or dropped), without allocating and without flowing <see cref="ExecutionContext"/>, as Akka.NET's own
/// executors; on the built-in pool when the dispatcher has no target.
/// </summary>
internal sealed class SpindleExecutorService(string id, SpindleExecutorTarget target) : ExecutorService(id)
{
    private static readonly Action<IRunnable> s_run = static runnable => runnable.Run();

    public override void Execute(IRunnable run)
    {
        WorkTarget? spindle = target.Target;
        if (spindle is null)
        {
            ThreadPool.UnsafeQueueUserWorkItem(run, preferLocal: false);
            return;
        }
        spindle.UnsafeQueueContinuation(s_run, run, target.PreferLocal);
        target.CheckStillOpen();
    }

    /// <summary>Shuts nothing down: the target outlives the dispatcher's idle periods (see the configurator).</summary>
    public override void Shutdown()
    {
    }
}
