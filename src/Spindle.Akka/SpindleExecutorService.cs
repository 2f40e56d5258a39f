using System;
using System.Threading;
using Akka.Dispatch;

namespace Spindle.Akka;

/// <summary>
/// A dispatcher's executor: queues each scheduled mailbox on the dispatcher's pool or lane, without allocating and
/// without flowing <see cref="ExecutionContext"/> (as Akka.NET's own executors).
/// </summary>
internal sealed class SpindleExecutorService(string id, SpindleExecutorTarget target) : ExecutorService(id)
{
    private static readonly Action<IRunnable> s_run = static runnable => runnable.Run();

    /// <summary>The pool or lane this executor queues to.</summary>
    public WorkTarget Target => target.Target;

    public override void Execute(IRunnable run)
    {
        try
        {
            target.Target.UnsafeQueueUserWorkItem(s_run, run, target.PreferLocal);
        }
        catch (ObjectDisposedException)
        {
            // The pool or lane has shut down under a live actor system: the mailbox still runs (see the configurator).
            target.OnRedirected();
            ThreadPool.UnsafeQueueUserWorkItem(s_run, run, preferLocal: false);
        }
    }

    /// <summary>Shuts nothing down: the target outlives the dispatcher's idle periods (see the configurator).</summary>
    public override void Shutdown()
    {
    }
}
