using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// Samples a pool's thread count and pending items on a background thread every few milliseconds while a workload
/// runs, and keeps the peak thread count and when it was first reached.
/// </summary>
/// <remarks>
/// A scenario that records its timed run also runs a recorder through its warm-up and drops it: the sampling calls
/// the pool's counting paths (Spindle's walk of its queues for the pending count), which otherwise reached their
/// tiering thresholds in the timed run itself, about 60 methods compiled beside the workload on 2 cores
/// (<c>chain-throughput</c>'s <c>process jit</c>).
/// </remarks>
internal sealed class SeriesRecorder : IDisposable
{
    private const int IntervalMs = 5;

    private readonly IPoolUnderTest _pool;
    private readonly long _start;
    private readonly List<double[]> _samples = [];
    private readonly Thread _thread;
    private volatile bool _stop;

    private SeriesRecorder(IPoolUnderTest pool, long start)
    {
        _pool = pool;
        _start = start;
        _thread = new Thread(Sample) { IsBackground = true, Name = "series recorder", Priority = ThreadPriority.AboveNormal };
        _thread.Start();
    }

    /// <summary>Starts sampling; times are relative to <paramref name="start"/> (a <see cref="Stopwatch"/> timestamp).</summary>
    public static SeriesRecorder Start(IPoolUnderTest pool, long start) => new(pool, start);

    public int PeakThreads { get; private set; }

    /// <summary>Milliseconds from the start until the peak thread count was first seen.</summary>
    public double TimeToPeakMs { get; private set; }

    /// <summary>Stops sampling (taking one last sample) and returns the samples.</summary>
    public List<double[]> Finish()
    {
        _stop = true;
        _thread.Join();
        return _samples;
    }

    public void Dispose() => Finish();

    private void Sample()
    {
        while (true)
        {
            bool last = _stop;
            double ms = Stopwatch.GetElapsedTime(_start).TotalMilliseconds;
            int threads = _pool.ThreadCount;
            _samples.Add([ms, threads, _pool.PendingWorkItemCount]);
            if (threads > PeakThreads)
            {
                PeakThreads = threads;
                TimeToPeakMs = ms;
            }
            if (last)
            {
                return;
            }
            Thread.Sleep(IntervalMs);
        }
    }
}
