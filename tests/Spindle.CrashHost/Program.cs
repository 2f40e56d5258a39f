using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle;

// Usage: Spindle.CrashHost <mode>
//   unhandled          default policy, no handler: the throwing item must take the process down.
//   throwing-handler   default policy, the only handler throws: the process must still fail.
//   handled            default policy, a handler sets Handled: the process must survive and exit 0.
//   handled-after-throwing-handler
//                      a throwing handler followed by one that sets Handled: exit 0.
//   thread-limit ...   a burst of blocking items under an OS thread limit: see ThreadLimitMode.
// Exit codes: 0 survived as expected, 2 bad usage, 3 the pool did not fail the process within 30 s,
// 4 the pool stopped running work after a handled exception.
internal static class Program
{
    internal const string Message = "Spindle crash-host failure";

    private static int Main(string[] args)
    {
        if (args.Length > 0 && args[0] == "thread-limit")
        {
            return ThreadLimitMode.Run(args);
        }
        string mode = args.Length == 1 ? args[0] : "";
        bool handled = mode is "handled" or "handled-after-throwing-handler";
        bool throwingHandler = mode is "throwing-handler" or "handled-after-throwing-handler";
        if (!handled && !throwingHandler && mode != "unhandled")
        {
            Console.Error.WriteLine($"unknown mode '{mode}'");
            return 2;
        }

        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "CrashHost", MinThreads = 1, MaxThreads = 1 });
        using var reported = new ManualResetEventSlim();
        if (throwingHandler)
        {
            pool.UnhandledException += (_, _) => throw new InvalidOperationException("handler failure");
        }
        if (handled)
        {
            pool.UnhandledException += (_, e) =>
            {
                e.Handled = true;
                reported.Set();
            };
        }

        pool.QueueUserWorkItem(static _ => ThrowFromWorkItem(), null);
        if (!handled)
        {
            Thread.Sleep(TimeSpan.FromSeconds(30));
            Console.Error.WriteLine("the pool did not fail the process");
            return 3;
        }

        if (!reported.Wait(TimeSpan.FromSeconds(30)))
        {
            return 3;
        }
        using var ran = new ManualResetEventSlim();
        pool.QueueUserWorkItem(static state => ((ManualResetEventSlim)state!).Set(), ran);
        if (!ran.Wait(TimeSpan.FromSeconds(30)))
        {
            return 4;
        }
        Console.Out.WriteLine("survived");
        return 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowFromWorkItem() => throw new InvalidOperationException(Message);
}
