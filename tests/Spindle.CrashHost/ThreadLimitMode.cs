using System;
using System.Diagnostics;
using System.Threading;
using Spindle;

/// <summary>
/// The <c>thread-limit</c> mode: a burst of items queued from outside the pool, each blocking in
/// <see cref="Thread.Sleep(int)"/>, run inside whatever limit the parent placed the process in (a cgroup's pids.max).
/// </summary>
/// <remarks>
/// Usage: <c>thread-limit spindle|builtin &lt;items&gt; &lt;sleep-ms&gt; [max-threads]</c>. The pool has default options, or
/// the given <see cref="WorkerPoolOptions.MaxThreads"/>. Prints one line
/// <c>completed=N elapsed-ms=T max-threads=M peak-threads=P creation-failures=F</c> and exits 0 when every item ran once and
/// a later item still runs; 5 when the burst did not complete within 120 s, 6 when the pool was unusable afterwards.
/// </remarks>
internal static class ThreadLimitMode
{
    public static int Run(string[] args)
    {
        int maxThreads = 0;
        if (args.Length is not (4 or 5) || args[1] is not ("spindle" or "builtin")
            || !int.TryParse(args[2], out int items) || !int.TryParse(args[3], out int sleepMs)
            || (args.Length == 5 && !int.TryParse(args[4], out maxThreads)))
        {
            Console.Error.WriteLine("usage: thread-limit spindle|builtin <items> <sleep-ms> [max-threads]");
            return 2;
        }
        bool builtin = args[1] == "builtin";
        var options = new WorkerPoolOptions { Name = "ThreadLimit" };
        if (maxThreads > 0)
        {
            options.MaxThreads = maxThreads;
        }
        using WorkerPool? pool = builtin ? null : new WorkerPool(options);
        int completed = 0;
        int peak = 0;
        using var done = new ManualResetEventSlim();
        var clock = Stopwatch.StartNew();
        WaitCallback item = _ =>
        {
            Thread.Sleep(sleepMs);
            if (Interlocked.Increment(ref completed) == items)
            {
                done.Set();
            }
        };
        for (int i = 0; i < items; i++)
        {
            if (pool is null)
            {
                ThreadPool.UnsafeQueueUserWorkItem(item, null);
            }
            else
            {
                pool.UnsafeQueueUserWorkItem(item, null);
            }
        }
        while (!done.Wait(10))
        {
            peak = Math.Max(peak, pool?.ThreadCount ?? ThreadPool.ThreadCount);
            if (clock.Elapsed > TimeSpan.FromSeconds(120))
            {
                Console.Out.WriteLine($"timed out: completed={Volatile.Read(ref completed)} of {items}");
                return 5;
            }
        }
        long elapsed = clock.ElapsedMilliseconds;

        using var later = new ManualResetEventSlim();
        if (pool is null)
        {
            ThreadPool.QueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), later);
        }
        else
        {
            pool.QueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), later);
        }
        if (!later.Wait(TimeSpan.FromSeconds(30)))
        {
            Console.Out.WriteLine("the pool did not run an item after the burst");
            return 6;
        }
        maxThreads = pool?.MaxThreads ?? GetBuiltinMax();
        long failures = pool?.GetThreadInjectionCount(ThreadInjectionReason.CreationFailed) ?? 0;
        Console.Out.WriteLine(
            $"completed={Volatile.Read(ref completed)} elapsed-ms={elapsed} max-threads={maxThreads} peak-threads={peak} creation-failures={failures}");
        return Volatile.Read(ref completed) == items ? 0 : 7;
    }

    private static int GetBuiltinMax()
    {
        ThreadPool.GetMaxThreads(out int workers, out _);
        return workers;
    }
}
