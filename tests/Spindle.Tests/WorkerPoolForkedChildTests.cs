using System;
using System.Diagnostics;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A child queued to the forking worker's own queue by an item that then keeps its core busy until the child starts
/// (a spin-wait: nothing tells the pool that the parent waits), while every other worker computes too. Nobody is free
/// to take the child, so only a thread added by the stall monitor runs it; the bounds are generous, nothing here
/// measures speed.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)] // computes on every core: alone, so other pools' judgements stay their own
public sealed class WorkerPoolForkedChildTests
{
    /// <summary>How long one parent spins for its child before the test counts the child as stranded.</summary>
    private static readonly TimeSpan s_childMustStartWithin = TimeSpan.FromSeconds(5);

    [Fact]
    public void ChildrenForkedBySpinningParents_BesideComputingWorkers_StartRoundAfterRound()
    {
        // Each round's stall used to lengthen the gap between completions that the next round's allowance was computed
        // from (four gaps while the cores are busy), so that the children waited 20, 80, 140, 245, 430, 750 ms ... and
        // a round near the tenth waited longer than the bound below. A lone item stranded behind its owner is not
        // judged by that gap.
        const int rounds = 16;
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolForkedChildTests),
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        using var stop = new CancellationTokenSource();
        int hogs = Environment.ProcessorCount - 1;
        using var hogsStarted = new CountdownEvent(Math.Max(hogs, 1));
        if (hogs == 0)
        {
            hogsStarted.Signal();
        }
        for (int i = 0; i < hogs; i++)
        {
            // Workers that compute for the whole test: the cores stay busy, so every stall is judged saturated.
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                hogsStarted.Signal();
                while (!stop.IsCancellationRequested)
                {
                    Thread.SpinWait(50);
                }
            }, null);
        }
        try
        {
            Waits.For(hogsStarted, "the computing items to start");
            for (int round = 0; round < rounds; round++)
            {
                // Each round starts without a spare: the thread added for the previous child has retired, so only the
                // stall monitor can bring a thread to this round's child.
                Waits.Until(() => pool.ThreadCount <= Environment.ProcessorCount,
                    $"the threads added before round {round} to retire (threads: {pool.ThreadCount})");
                using var sample = new ForkSample();
                pool.UnsafeQueueUserWorkItem(static s => ((ForkSample)s!).RunParent(), sample, preferLocal: false);
                Waits.For(sample.Done, $"round {round}'s parent and child to run");
                Assert.True(sample.ChildStarted,
                    $"Round {round}: the child did not start within {s_childMustStartWithin.TotalSeconds} s while its parent spun for it.");
            }
        }
        finally
        {
            stop.Cancel();
        }
    }

    private sealed class ForkSample : IDisposable
    {
        private volatile bool _childStarted;

        public ManualResetEventSlim Done { get; } = new();

        public bool ChildStarted => _childStarted;

        public void RunParent()
        {
            // From a pool thread, preferLocal queues the child to this worker's own queue: a lone local item.
            WorkerPool.Current!.UnsafeQueueUserWorkItem(static s => ((ForkSample)s!)._childStarted = true, this, preferLocal: true);
            long deadline = Stopwatch.GetTimestamp() + (long)(s_childMustStartWithin.TotalSeconds * Stopwatch.Frequency);
            while (!_childStarted && Stopwatch.GetTimestamp() < deadline)
            {
                Thread.SpinWait(20); // the parent's own computation
            }
            Done.Set();
        }

        public void Dispose() => Done.Dispose();
    }
}
