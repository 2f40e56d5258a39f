using System;
using System.Threading;
using System.Threading.Tasks;
using BenchmarkDotNet.Attributes;

namespace Spindle.Benchmarks;

/// <summary>
/// One enqueue plus its dispatch on each API path: a batch of 1,000 items queued from outside the pool, then waited
/// for; figures are per item. Baseline: the built-in pool's same call.
/// </summary>
public class QueueingBenchmarks
{
    private const int Batch = 1_000;

    private WorkerPool _pool = null!;
    private readonly Countdown _countdown = new();
    private CountingItem _item = null!;
    private BuiltInCountingItem _builtInItem = null!;

    [GlobalSetup]
    public void Setup()
    {
        _pool = new WorkerPool(new WorkerPoolOptions { Name = "benchmarks" });
        _item = new CountingItem(_countdown);
        _builtInItem = new BuiltInCountingItem(_countdown);
    }

    [GlobalCleanup]
    public void Cleanup() => _pool.Dispose();

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("WaitCallback + state")]
    public void BuiltIn_QueueUserWorkItem()
    {
        _countdown.Reset(Batch);
        for (int i = 0; i < Batch; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(s_waitCallback, _countdown);
        }
        _countdown.Wait();
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("WaitCallback + state")]
    public void Spindle_QueueUserWorkItem()
    {
        _countdown.Reset(Batch);
        for (int i = 0; i < Batch; i++)
        {
            _pool.UnsafeQueueUserWorkItem(s_waitCallback, _countdown);
        }
        _countdown.Wait();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("Action<TState>, struct state")]
    public void BuiltIn_GenericState()
    {
        _countdown.Reset(Batch);
        for (int i = 0; i < Batch; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(s_generic, new State(_countdown), preferLocal: false);
        }
        _countdown.Wait();
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("Action<TState>, struct state")]
    public void Spindle_GenericState()
    {
        _countdown.Reset(Batch);
        for (int i = 0; i < Batch; i++)
        {
            _pool.UnsafeQueueUserWorkItem(s_generic, new State(_countdown), preferLocal: false);
        }
        _countdown.Wait();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("work-item interface")]
    public void BuiltIn_WorkItem()
    {
        _countdown.Reset(Batch);
        for (int i = 0; i < Batch; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(_builtInItem, preferLocal: false);
        }
        _countdown.Wait();
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("work-item interface")]
    public void Spindle_WorkItem()
    {
        _countdown.Reset(Batch);
        for (int i = 0; i < Batch; i++)
        {
            _pool.UnsafeQueueUserWorkItem(_item, preferLocal: false);
        }
        _countdown.Wait();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("Run(Action) -> Task")]
    public void BuiltIn_TaskRun()
    {
        var tasks = new Task[Batch];
        for (int i = 0; i < Batch; i++)
        {
            tasks[i] = Task.Run(s_nothing);
        }
        Task.WaitAll(tasks);
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("Run(Action) -> Task")]
    public void Spindle_Run()
    {
        var tasks = new Task[Batch];
        for (int i = 0; i < Batch; i++)
        {
            tasks[i] = _pool.Run(s_nothing);
        }
        Task.WaitAll(tasks);
    }

    private static readonly WaitCallback s_waitCallback = static state => ((Countdown)state!).Signal();
    private static readonly Action<State> s_generic = static state => state.Countdown.Signal();
    private static readonly Action s_nothing = static () => { };

    private readonly record struct State(Countdown Countdown);

    private sealed class CountingItem(Countdown countdown) : IWorkItem
    {
        public void Execute() => countdown.Signal();
    }

    private sealed class BuiltInCountingItem(Countdown countdown) : IThreadPoolWorkItem
    {
        public void Execute() => countdown.Signal();
    }
}

/// <summary>A reusable countdown: Signal from the items, Wait (spinning, then sleeping) in the benchmark.</summary>
internal sealed class Countdown
{
    private readonly ManualResetEventSlim _done = new(false);
    private int _remaining;

    public void Reset(int count)
    {
        _done.Reset();
        Volatile.Write(ref _remaining, count);
    }

    public void Signal()
    {
        if (Interlocked.Decrement(ref _remaining) == 0)
        {
            _done.Set();
        }
    }

    public void Wait()
    {
        if (!_done.Wait(TimeSpan.FromSeconds(60)))
        {
            throw new TimeoutException("The queued items did not all run within 60 s.");
        }
    }
}
