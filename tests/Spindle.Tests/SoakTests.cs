using System;
using System.Diagnostics;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A stretch of mixed work (short, self-requeueing, long-running, blocking with and without a region, throwing) from
/// several producers. Zero lost items; after warm-up the thread count and the managed heap stay bounded. The per-commit run lasts about a second; <c>SPINDLE_STRESS=1</c> runs it for a minute.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class SoakTests
{
    [Fact]
    public void MixedWork_LosesNothing_AndThreadsAndMemoryStayFlat()
    {
        TimeSpan duration = TimeSpan.FromMilliseconds(Stress.Scale(1_200, 60_000));
        int reported = 0;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(SoakTests),
            MinThreads = 2,
            IdleTimeout = TimeSpan.FromMilliseconds(200),
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        pool.UnhandledException += (_, e) =>
        {
            Assert.IsType<InvalidOperationException>(e.Exception);
            Interlocked.Increment(ref reported);
        };

        long queued = 0, ran = 0, threw = 0;
        // Closed loop: at most this many producer items in flight, so the backlog measures the pool, not the producers.
        using var inFlight = new SemaphoreSlim(2_000);
        int peakThreadsLate = 0;
        long heapAfterWarmup = 0, heapLate = 0;
        var clock = Stopwatch.StartNew();
        TimeSpan warmup = duration / 4;

        void Run(int kind)
        {
            switch (kind)
            {
                case 0: // short
                    break;
                case 1: // a short chain through the local queue
                    for (int i = 0; i < 3; i++)
                    {
                        Interlocked.Increment(ref queued);
                        pool.UnsafeQueueUserWorkItem(static s => ((Action)s!)(), (Action)(() => Interlocked.Increment(ref ran)));
                    }
                    break;
                case 2: // blocking, unannounced
                    Thread.Sleep(2);
                    break;
                case 3: // blocking inside a region
                    using (WorkerPool.EnterBlockingRegion())
                    {
                        Thread.Sleep(2);
                    }
                    break;
                case 4: // throwing
                    Interlocked.Increment(ref threw);
                    throw new InvalidOperationException("soak");
                default: // CPU for a little while
                    Thread.SpinWait(2_000);
                    break;
            }
        }

        var producers = new Thread[3];
        for (int p = 0; p < producers.Length; p++)
        {
            int seed = p;
            producers[p] = new Thread(() =>
            {
                var random = new Random(seed);
                while (clock.Elapsed < duration)
                {
                    int kind = random.Next(7);
                    Assert.True(inFlight.Wait(Waits.MustHappen), "the pool stopped making progress");
                    Interlocked.Increment(ref queued);
                    if (random.Next(50) == 0)
                    {
                        pool.QueueUserWorkItem(k =>
                        {
                            Interlocked.Increment(ref ran);
                            Thread.Sleep(5);
                            inFlight.Release();
                        }, kind, WorkItemOptions.LongRunning);
                    }
                    else
                    {
                        pool.QueueUserWorkItem(k =>
                        {
                            Interlocked.Increment(ref ran);
                            try
                            {
                                Run(k);
                            }
                            finally
                            {
                                inFlight.Release();
                            }
                        }, kind, preferLocal: false);
                    }
                    if (random.Next(20) == 0)
                    {
                        Thread.Sleep(1);
                    }
                }
            })
            { IsBackground = true };
            producers[p].Start();
        }

        // The heap is measured live (after a full collection), every eighth of the run after the warm-up: without the
        // collection the figure includes the garbage of the youngest generation, whose budget alone can exceed the
        // allowed growth on a machine with a large cache.
        TimeSpan heapInterval = duration / 8;
        TimeSpan nextHeapSample = warmup;
        while (clock.Elapsed < duration)
        {
            Thread.Sleep(20);
            if (clock.Elapsed > warmup)
            {
                if (heapAfterWarmup == 0)
                {
                    heapAfterWarmup = GC.GetTotalMemory(true);
                    nextHeapSample = clock.Elapsed + heapInterval;
                }
                else if (clock.Elapsed >= nextHeapSample)
                {
                    heapLate = Math.Max(heapLate, GC.GetTotalMemory(true));
                    nextHeapSample = clock.Elapsed + heapInterval;
                }
                peakThreadsLate = Math.Max(peakThreadsLate, pool.ThreadCount + pool.DedicatedThreadCount);
            }
        }
        if (heapLate == 0)
        {
            heapLate = GC.GetTotalMemory(true); // the loop was descheduled past every sample: one now, as the work ends
        }
        foreach (Thread producer in producers)
        {
            producer.Join();
        }

        Waits.Until(() => Interlocked.Read(ref ran) == Interlocked.Read(ref queued),
            $"every queued item to run ({Interlocked.Read(ref ran)} of {Interlocked.Read(ref queued)})");
        Waits.Until(() => Volatile.Read(ref reported) == Interlocked.Read(ref threw), "every exception to be reported");
        Assert.Equal(0, pool.PendingWorkItemCount);

        // Bounded, not merely finite: items block for 2 ms at most, so the pool never needs hundreds of threads, and
        // nothing it holds grows with the number of items it has run.
        Assert.True(peakThreadsLate < 200, $"thread count kept growing: {peakThreadsLate}");
        Assert.True(heapLate < heapAfterWarmup + 64L * 1024 * 1024, $"heap grew from {heapAfterWarmup:N0} to {heapLate:N0} bytes");

        // Once the work stops, injected and dedicated threads retire.
        Waits.Until(() => pool.ThreadCount <= Math.Max(2, Environment.ProcessorCount) && pool.DedicatedThreadCount == 0,
            $"surplus threads to retire (threads {pool.ThreadCount}, dedicated {pool.DedicatedThreadCount})");
    }
}
