using System.Collections.Concurrent;
using BenchmarkDotNet.Attributes;
using Spindle.Queues;

namespace Spindle.Benchmarks;

/// <summary>
/// A worker's local ring on its own: owner push and pop, and push then steal from the other end; 100 items per
/// invocation, figures per item. The built-in pool's local queue is internal, so the baselines are the closest public
/// collections: <see cref="ConcurrentBag{T}"/> (per-thread lists with stealing) for push/pop, and
/// <see cref="ConcurrentQueue{T}"/> (FIFO, the order a thief takes in) for push/steal.
/// </summary>
public class LocalQueueBenchmarks
{
    private const int Batch = 100;
    private static readonly object s_item = new();
    private static readonly System.Action<object?> s_callback = static _ => { };

    private readonly WorkStealingRing _ring = new();
    private readonly ConcurrentBag<object> _bag = [];
    private readonly ConcurrentQueue<object> _queue = new();

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("local push + pop")]
    public int ConcurrentBag_AddTake()
    {
        int taken = 0;
        for (int i = 0; i < Batch; i++)
        {
            _bag.Add(s_item);
        }
        while (_bag.TryTake(out _))
        {
            taken++;
        }
        return taken;
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("local push + pop")]
    public int Ring_PushPop()
    {
        int taken = 0;
        var entry = new WorkItemEntry(s_callback, s_item, null);
        for (int i = 0; i < Batch; i++)
        {
            _ring.TryPush(entry);
        }
        while (_ring.TryPop(out _))
        {
            taken++;
        }
        return taken;
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("local push + steal")]
    public int ConcurrentQueue_EnqueueDequeue()
    {
        int taken = 0;
        for (int i = 0; i < Batch; i++)
        {
            _queue.Enqueue(s_item);
        }
        while (_queue.TryDequeue(out _))
        {
            taken++;
        }
        return taken;
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("local push + steal")]
    public int Ring_PushSteal()
    {
        int taken = 0;
        var entry = new WorkItemEntry(s_callback, s_item, null);
        for (int i = 0; i < Batch; i++)
        {
            _ring.TryPush(entry);
        }
        while (_ring.TrySteal(out _))
        {
            taken++;
        }
        return taken;
    }
}
