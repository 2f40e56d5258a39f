using System;
using System.Diagnostics;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// A worker that stalls inside an item while its ring holds queued items does not keep them from running: a peer that
/// is busy with outside work (and so never searches) watches it, finds it has started nothing, and takes half of its ring
/// at a time. The feeder and the busy worker keep both cores busy, so the class runs alone.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolPeerWatchTests
{
    private const int LocalItems = 31;

    private sealed class Scenario
    {
        public int Backlog;
        public int LocalRan;
        public bool Stop;
    }

    [Fact]
    public void ItemsQueuedByAStalledWorker_RunWhileItStalls_TakenByABusyPeerWatchingIt_WhileOutsideWorkKeepsComing()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolPeerWatchTests),
            MinThreads = 2,
            MaxThreads = 2, // no thread is added for the stalled item: its peer is the only other worker
            OutsideWorkReliefDelay = Timeout.InfiniteTimeSpan,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        var scenario = new Scenario();
        // From outside, a steady backlog of short items: the peer always finds outside work first, so it never searches
        // (a searcher would steal the stalled worker's items anyway), and only its watch can take them early.
        var feeder = new Thread(() =>
        {
            while (!Volatile.Read(ref scenario.Stop))
            {
                if (Volatile.Read(ref scenario.Backlog) < 32)
                {
                    Interlocked.Increment(ref scenario.Backlog);
                    pool.UnsafeQueueUserWorkItem(static s =>
                    {
                        Spin(TimeSpan.FromMicroseconds(2));
                        Interlocked.Decrement(ref s.Backlog);
                    }, scenario, preferLocal: false);
                }
                else
                {
                    Thread.SpinWait(20);
                }
            }
        })
        { IsBackground = true, Name = "outside feeder" };
        feeder.Start();
        var releases = new System.Collections.Generic.List<ManualResetEventSlim>();
        try
        {
            // Each attempt stalls one worker with LocalItems queued to itself, and waits for them all to run (the last
            // one sits in the LIFO slot, which the stall monitor's rescue takes after milliseconds). In a rare attempt
            // the peer may run dry and steal them as a searcher, so attempts repeat until the watch has taken some.
            // Whether the watch takes them, rather than the peer as a searcher or the stall monitor's rescue, needs the
            // peer never to run dry, which a loaded machine cannot promise (the feeder may not be scheduled). So the
            // per-commit form asserts what always holds: every item a stalled worker queued to itself runs while it
            // stays stalled. The stress form (SPINDLE_STRESS=1, run on a quiet machine) also asserts that the watch
            // took some, over more attempts.
            int attempts = Stress.Scale(1, 20);
            for (int attempt = 0; attempt < attempts && pool.PeerWatchStealCount == 0; attempt++)
            {
                Volatile.Write(ref scenario.LocalRan, 0);
                var release = new ManualResetEventSlim(); // one per attempt: a Set then Reset could be missed by the waiter
                releases.Add(release);
                using var queued = new ManualResetEventSlim();
                pool.UnsafeQueueUserWorkItem(_ =>
                {
                    for (int i = 0; i < LocalItems; i++)
                    {
                        pool.UnsafeQueueUserWorkItem(static s => Interlocked.Increment(ref s.LocalRan), scenario, preferLocal: true);
                    }
                    queued.Set();
                    release.Wait(Waits.MustHappen); // the stall: this worker starts nothing more until released
                }, (object?)null, preferLocal: false);
                Assert.True(queued.Wait(Waits.MustHappen), "The stalling item never ran.");
                Waits.Until(() => Volatile.Read(ref scenario.LocalRan) == LocalItems, "the stalled worker's queued items");
                release.Set();
            }
            if (Stress.Enabled)
            {
                Assert.True(pool.PeerWatchStealCount > 0, "The busy peer never took the stalled worker's items by its watch.");
            }
        }
        finally
        {
            foreach (ManualResetEventSlim release in releases)
            {
                release.Set();
            }
            Volatile.Write(ref scenario.Stop, true);
            feeder.Join();
        }
    }

    private static void Spin(TimeSpan length)
    {
        long until = Stopwatch.GetTimestamp() + (long)(length.TotalSeconds * Stopwatch.Frequency);
        while (Stopwatch.GetTimestamp() < until)
        {
            Thread.SpinWait(4);
        }
    }
}
