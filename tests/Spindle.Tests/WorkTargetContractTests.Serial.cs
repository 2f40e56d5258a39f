using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// A serial target: its items, runs, tasks and posts run one at a time, in the order one thread queued them, and the
// continuations of its async work never overlap its other items.
public abstract partial class WorkTargetContractTests
{
    /// <summary>Records the order of runs and fails on any overlap.</summary>
    private sealed class SerialProbe
    {
        private readonly List<int> _order = [];
        private int _running;
        private int _overlaps;

        public int Overlaps => Volatile.Read(ref _overlaps);

        public void Run(int number)
        {
            if (Interlocked.Increment(ref _running) != 1)
            {
                Interlocked.Increment(ref _overlaps);
            }
            lock (_order)
            {
                _order.Add(number);
            }
            Thread.SpinWait(50); // long enough for an overlap to be seen if one happens
            Interlocked.Decrement(ref _running);
        }

        public int[] Order()
        {
            lock (_order)
            {
                return [.. _order];
            }
        }
    }

    /// <summary>Queues a probe run through the form <paramref name="way"/> picks: items, runs, tasks of the scheduler, posts.</summary>
    private void QueueProbe(SerialProbe probe, int number, int way, ExactlyOnceLedger ledger)
    {
        Action run = () =>
        {
            probe.Run(number);
            ledger.Hit(number);
        };
        switch (way % 9)
        {
            case 0:
                Target.QueueUserWorkItem(_ => run());
                break;
            case 1:
                Target.UnsafeQueueUserWorkItem(new ActionItem(run), preferLocal: true);
                break;
            case 2:
                Target.QueueUserWorkItem(static r => r(), run, WorkItemOptions.PreferLocal);
                break;
            case 3:
                Assert.True(Target.TryQueueUserWorkItem(static r => r(), run, preferLocal: false));
                break;
            case 4:
                _ = Target.Run(run);
                break;
            case 5:
                _ = Target.RunAsValueTask(run).AsTask();
                break;
            case 6:
                _ = Task.Factory.StartNew(run, CancellationToken.None, TaskCreationOptions.None, Target.TaskScheduler);
                break;
            case 7:
                Target.SynchronizationContext.Post(static r => ((Action)r!)(), run);
                break;
            default:
                Target.UnsafeQueueUserWorkItem(static r => r(), run, way % 2 == 0 ? WorkItemOptions.LongRunning : WorkItemOptions.None);
                break;
        }
    }

    [Fact]
    public void ASerialTarget_RunsWhatOneThreadQueued_InOrder_OneAtATime()
    {
        if (!IsSerial)
        {
            return;
        }
        const int items = 1_800;
        using var ledger = new ExactlyOnceLedger(items);
        var probe = new SerialProbe();
        for (int i = 0; i < items; i++)
        {
            QueueProbe(probe, i, i, ledger);
        }
        ledger.WaitForAll("the serial target's items");
        Assert.Equal(0, probe.Overlaps);
        int[] order = probe.Order();
        for (int i = 0; i < order.Length; i++)
        {
            Assert.True(order[i] == i, $"Run {i} was item {order[i]}: the serial target left queueing order.");
        }
    }

    [Fact]
    public void ASerialTarget_KeepsEachProducersOrder_AndNeverOverlaps_UnderSeveralProducers()
    {
        if (!IsSerial)
        {
            return;
        }
        const int producers = 3;
        const int perProducer = 900;
        using var ledger = new ExactlyOnceLedger(producers * perProducer);
        var probe = new SerialProbe();
        using var go = new ManualResetEventSlim();
        var threads = new TestThread[producers];
        for (int p = 0; p < producers; p++)
        {
            int first = p * perProducer;
            threads[p] = Waits.Start(() =>
            {
                go.Wait();
                for (int i = 0; i < perProducer; i++)
                {
                    QueueProbe(probe, first + i, first + i, ledger);
                }
            }, $"producer {p}");
        }
        go.Set();
        foreach (TestThread thread in threads)
        {
            thread.Join();
        }
        ledger.WaitForAll("the items of several producers");
        Assert.Equal(0, probe.Overlaps);
        var last = new int[producers];
        Array.Fill(last, -1);
        foreach (int number in probe.Order())
        {
            int producer = number / perProducer;
            Assert.True(number > last[producer], $"Item {number} ran after item {last[producer]} of the same producer.");
            last[producer] = number;
        }
    }

    [Fact]
    public async Task ASerialTarget_NeverOverlapsTheContinuationsOfItsAsyncRuns_WithItsOtherItems()
    {
        if (!IsSerial)
        {
            return;
        }
        const int runs = 20;
        const int steps = 10;
        const int items = 400;
        int running = 0;
        int overlaps = 0;
        void Step()
        {
            if (Interlocked.Increment(ref running) != 1)
            {
                Interlocked.Increment(ref overlaps);
            }
            Thread.SpinWait(50);
            Interlocked.Decrement(ref running);
        }
        var tasks = new Task[runs];
        for (int r = 0; r < runs; r++)
        {
            tasks[r] = Target.Run(async () =>
            {
                for (int s = 0; s < steps; s++)
                {
                    Step();
                    if (s % 2 == 0)
                    {
                        await Task.Yield();
                    }
                    else
                    {
                        await Task.Delay(1); // resumes from the timer's thread, posted back to the target
                    }
                }
            });
        }
        using var done = new CountdownEvent(items);
        for (int i = 0; i < items; i++)
        {
            Target.QueueUserWorkItem(_ =>
            {
                Step();
                done.Signal();
            });
        }
        await Task.WhenAll(tasks).WaitAsync(Waits.MustHappen);
        Waits.For(done, "the plain items");
        Assert.Equal(0, Volatile.Read(ref overlaps));
    }

    [Fact]
    public void ASerialTarget_KeepsPostsAndTasksInOrder_AndNeverOverlaps_AfterItsPoolStopped()
    {
        if (!IsSerial)
        {
            return;
        }
        // Continuations of work the target accepted still arrive after the pool has stopped: wherever they run then,
        // a serial target's stay one at a time and in order.
        WorkTarget target = Target;
        Waits.RunBounded(Pool.Dispose, "stopping the pool");
        const int posts = 400;
        using var ledger = new ExactlyOnceLedger(posts);
        var probe = new SerialProbe();
        for (int i = 0; i < posts; i++)
        {
            int number = i;
            Action run = () =>
            {
                probe.Run(number);
                ledger.Hit(number);
            };
            if (i % 2 == 0)
            {
                target.SynchronizationContext.Post(static r => ((Action)r!)(), run);
            }
            else
            {
                _ = Task.Factory.StartNew(run, CancellationToken.None, TaskCreationOptions.None, target.TaskScheduler);
            }
        }
        ledger.WaitForAll("posts and tasks after the pool stopped");
        Assert.Equal(0, probe.Overlaps);
        int[] order = probe.Order();
        for (int i = 0; i < order.Length; i++)
        {
            Assert.True(order[i] == i, $"Run {i} was item {order[i]}: the serial target left queueing order after its pool stopped.");
        }
    }
}
