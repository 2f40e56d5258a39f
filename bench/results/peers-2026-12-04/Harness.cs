// The harness behind this folder's README: one shape, one pool, one fresh process per run. Not part of the solution:
// it needs SmartThreadPool's and PowerThreadPool's sources, built locally (see the README), which this repository
// does not carry.
//
//   Harness <pool> burst [cold]     200 items of Thread.Sleep(100) queued at once; complete, 200th item's start
//   Harness <pool> clifton [cold]   10 items spinning until a 1 s timer fires; time until all have started
//   Harness <pool> backlog N MS     N items of MS ms of CPU (a calibrated loop) queued at once; completion times
//
// Pools: spindle (WorkerPool, MaxThreads 256), spindle-pre (the same, SetThreadLimits(256, 256) before the run: 256
// threads started), ptp (PowerPool, MaxThreads 256: it starts all 256 at construction), ptp-dyn (PowerPool with a
// DestroyThreadOption: a thread per queued item while none is idle, up to 256), stp (SmartThreadPool,
// MaxWorkerThreads 256), builtin (ThreadPool, max 256), raw (a new thread per item, started by the producer).
// JITLOG=1 lists the methods compiled during the measured burst.
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Diagnostics.Tracing;
using Amib.Threading;
using PowerThreadPool;
using PowerThreadPool.Options;
using Spindle;

string poolName = args[0], shape = args[1];
var jitLog = new ConcurrentQueue<(long At, string Method)>();
using var jitListener = Environment.GetEnvironmentVariable("JITLOG") == "1" ? new JitListener(jitLog) : null;
Action<Action> queue = poolName switch
{
    "spindle" => SpindleQueue(new WorkerPool(new WorkerPoolOptions { MaxThreads = 256 })),
    "spindle-pre" => SpindleQueue(Prestarted(new WorkerPool(new WorkerPoolOptions { MaxThreads = 256 }))),
    "ptp" => new PowerPool(new PowerPoolOption { MaxThreads = 256 }) is var ptp ? a => ptp.QueueWorkItem(a) : null!,
    "ptp-dyn" => new PowerPool(new PowerPoolOption
    {
        MaxThreads = 256,
        DestroyThreadOption = new DestroyThreadOption { MinThreads = Environment.ProcessorCount, KeepAliveTime = 10_000 },
    }) is var dyn ? a => dyn.QueueWorkItem(a) : null!,
    "stp" => new SmartThreadPool(new STPStartInfo { MaxWorkerThreads = 256 }) is var stp ? a => stp.QueueWorkItem(a) : null!,
    "builtin" => ThreadPool.SetMaxThreads(256, 256)
        ? a => ThreadPool.UnsafeQueueUserWorkItem(static s => ((Action)s!)(), a, preferLocal: false)
        : throw new InvalidOperationException("SetMaxThreads refused"),
    "raw" => a => new Thread(() => a()) { IsBackground = true }.UnsafeStart(),
    _ => throw new ArgumentException($"Unknown pool '{poolName}'."),
};

switch (shape)
{
    case "burst":
        Burst(args.Length > 2 && args[2] == "cold");
        break;
    case "clifton":
        Clifton(args.Length > 2 && args[2] == "cold");
        break;
    case "backlog":
        Backlog(int.Parse(args[2]), int.Parse(args[3]));
        break;
    default:
        throw new ArgumentException($"Unknown shape '{shape}'.");
}
Environment.Exit(0);

static Action<Action> SpindleQueue(WorkerPool pool) =>
    a => pool.UnsafeQueueUserWorkItem(static s => ((Action)s!)(), a, preferLocal: false);

static WorkerPool Prestarted(WorkerPool pool)
{
    pool.SetThreadLimits(256, 256);
    return pool;
}

static int ProcessThreads() => Process.GetCurrentProcess().Threads.Count;

// Warm-up: rounds of 10 short items at once for the clifton and backlog shapes (so pools that start a thread per
// queued item keep about 10), then a pause.
void ShortRounds()
{
    ShortItems(perRound: 10);
}

// Warm-up of "cold" forms: one short item at a time for 300 ms (no pool needs a second thread), then a pause.
void OneAtATime()
{
    var warm = Stopwatch.StartNew();
    using var one = new ManualResetEventSlim();
    while (warm.ElapsedMilliseconds < 300)
    {
        one.Reset();
        queue(one.Set);
        one.Wait();
    }
    Thread.Sleep(200);
}

void ShortItems(int perRound)
{
    for (int round = 0; round < 20; round++)
    {
        using var done = new CountdownEvent(perRound);
        for (int i = 0; i < perRound; i++)
        {
            queue(() =>
            {
                Thread.SpinWait(1000);
                done.Signal();
            });
        }
        done.Wait();
    }
    Thread.Sleep(200);
}

void Burst(bool cold)
{
    long lastBegan = 0;
    double Once(int sleepMs)
    {
        int remaining = 200, began = 0;
        long done = 0;
        using var allDone = new ManualResetEventSlim();
        long start = Stopwatch.GetTimestamp();
        for (int i = 0; i < 200; i++)
        {
            queue(() =>
            {
                if (Interlocked.Increment(ref began) == 200)
                {
                    lastBegan = Stopwatch.GetTimestamp();
                }
                if (sleepMs > 0)
                {
                    Thread.Sleep(sleepMs);
                }
                if (Interlocked.Decrement(ref remaining) == 0)
                {
                    done = Stopwatch.GetTimestamp();
                    allDone.Set();
                }
            });
        }
        allDone.Wait();
        lastBegan = lastBegan - start;
        return Stopwatch.GetElapsedTime(start, done).TotalMilliseconds;
    }

    // Warm-up: "cold" queues one item at a time, otherwise rounds of the burst with a zero sleep for 300 ms (as the
    // comparison program's blocking-burst does); then a pause.
    if (cold)
    {
        OneAtATime();
    }
    else
    {
        var warm = Stopwatch.StartNew();
        while (warm.ElapsedMilliseconds < 300)
        {
            Once(0);
        }
        Thread.Sleep(200);
    }
    int before = ProcessThreads();
    TimeSpan jitBefore = System.Runtime.JitInfo.GetCompilationTime();
    long compiledBefore = System.Runtime.JitInfo.GetCompiledMethodCount();
    long from = Stopwatch.GetTimestamp();
    double complete = Once(100);
    long to = Stopwatch.GetTimestamp();
    double jitMs = (System.Runtime.JitInfo.GetCompilationTime() - jitBefore).TotalMilliseconds;
    long compiled = System.Runtime.JitInfo.GetCompiledMethodCount() - compiledBefore;
    foreach ((long at, string method) in jitLog)
    {
        if (at >= from && at <= to)
        {
            Console.WriteLine($"  {Stopwatch.GetElapsedTime(from, at).TotalMilliseconds,8:F2} ms  {method}");
        }
    }
    Console.WriteLine($"{poolName} burst complete={complete:F1} ms lastBegan={lastBegan * 1000.0 / Stopwatch.Frequency:F1} ms "
        + $"jit={jitMs:F1} ms/{compiled} methods threadsBefore={before} threadsAfter={ProcessThreads()}");
}

void Clifton(bool cold)
{
    if (cold)
    {
        OneAtATime();
    }
    else
    {
        ShortRounds();
    }
    int before = ProcessThreads();
    int started = 0;
    long allStarted = 0;
    using var stop = new ManualResetEventSlim();
    using var finished = new CountdownEvent(10);
    long from = Stopwatch.GetTimestamp();
    using var timer = new Timer(_ => stop.Set(), null, 1000, Timeout.Infinite);
    for (int i = 0; i < 10; i++)
    {
        queue(() =>
        {
            if (Interlocked.Increment(ref started) == 10)
            {
                allStarted = Stopwatch.GetTimestamp();
            }
            while (!stop.IsSet)
            {
            }
            finished.Signal();
        });
    }
    finished.Wait();
    Console.WriteLine($"{poolName} clifton allStarted={Stopwatch.GetElapsedTime(from, allStarted).TotalMilliseconds:F1} ms threadsBefore={before}");
}

void Backlog(int items, int workMs)
{
    ShortRounds();
    static long Spin(long iterations)
    {
        long x = 1;
        for (long i = 0; i < iterations; i++)
        {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }
    Spin(2_000_000);
    var calibration = Stopwatch.StartNew();
    Spin(10_000_000);
    long perMs = (long)(10_000_000 / calibration.Elapsed.TotalMilliseconds);
    long sink = 0;
    var ends = new double[items];
    int ended = 0, peak = 0;
    using var all = new CountdownEvent(items);
    long from = Stopwatch.GetTimestamp();
    for (int i = 0; i < items; i++)
    {
        queue(() =>
        {
            Interlocked.Add(ref sink, Spin(perMs * workMs));
            ends[Interlocked.Increment(ref ended) - 1] = Stopwatch.GetElapsedTime(from).TotalMilliseconds;
            all.Signal();
        });
    }
    while (!all.Wait(5))
    {
        peak = Math.Max(peak, ProcessThreads());
    }
    Array.Sort(ends);
    Console.WriteLine($"{poolName} backlog {items}x{workMs}ms first={ends[0]:F0} p50={ends[items / 2]:F0} last={ends[^1]:F0} "
        + $"mean={ends.Average():F0} ms peakProcessThreads={peak}");
}

/// <summary>Records the methods the runtime compiles (the JIT keyword's verbose method-load events).</summary>
internal sealed class JitListener : EventListener
{
    private readonly ConcurrentQueue<(long, string)>? _log;

    public JitListener(ConcurrentQueue<(long, string)> log)
    {
        _log = log;
        foreach (EventSource source in EventSource.GetSources())
        {
            OnEventSourceCreated(source);
        }
    }

    protected override void OnEventSourceCreated(EventSource source)
    {
        if (source.Name == "Microsoft-Windows-DotNETRuntime")
        {
            EnableEvents(source, EventLevel.Verbose, (EventKeywords)0x10);
        }
    }

    protected override void OnEventWritten(EventWrittenEventArgs e)
    {
        if (_log is null || e.EventName is null || !e.EventName.StartsWith("MethodLoadVerbose", StringComparison.Ordinal))
        {
            return;
        }
        string ns = "", name = "";
        for (int i = 0; i < e.PayloadNames!.Count; i++)
        {
            if (e.PayloadNames[i] == "MethodNamespace")
            {
                ns = (string)e.Payload![i]!;
            }
            else if (e.PayloadNames[i] == "MethodName")
            {
                name = (string)e.Payload![i]!;
            }
        }
        _log.Enqueue((Stopwatch.GetTimestamp(), $"{ns}::{name}"));
    }
}
