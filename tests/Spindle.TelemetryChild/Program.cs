using System;
using System.Threading;
using Spindle;

// Usage: Spindle.TelemetryChild <pool name>
// Creates a pool, prints "ready <pid>" and waits for a line on standard input (sent once a diagnostics session is
// attached; end of input also goes on), then: a thread added on demand (the first item), an item that throws under
// the Report policy, a drain. Prints "done" and waits for another line (or the end of input) before it exits 0, so that
// the session can be stopped while the process still runs.
// Exit codes: 0 done, 2 bad usage, 3 the item's exception was not reported within 30 s.
internal static class Program
{
    internal const string Message = "Spindle telemetry-child failure";

    private static int Main(string[] args)
    {
        if (args.Length != 1 || args[0].Length == 0)
        {
            Console.Error.WriteLine("usage: Spindle.TelemetryChild <pool name>");
            return 2;
        }

        // No thread yet: the first item adds one (Demand).
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = args[0],
            MinThreads = 0,
            MaxThreads = 1,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        using var reported = new ManualResetEventSlim();
        pool.UnhandledException += (_, _) => reported.Set();

        Console.Out.WriteLine($"ready {Environment.ProcessId}");
        Console.Out.Flush();
        Console.In.ReadLine();

        pool.QueueUserWorkItem(static _ => throw new InvalidOperationException(Message), null);
        if (!reported.Wait(TimeSpan.FromSeconds(30)))
        {
            Console.Error.WriteLine("the item's exception was not reported");
            return 3;
        }
        pool.QueueUserWorkItem(static _ => { }, null);
        pool.Shutdown(ShutdownMode.Drain);
        pool.Dispose();
        Console.Out.WriteLine("done");
        Console.Out.Flush();
        Console.In.ReadLine();
        return 0;
    }
}
