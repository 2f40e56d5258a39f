using System;
using System.Threading;
using BenchmarkDotNet.Attributes;

namespace Spindle.Benchmarks;

/// <summary>Schedule and cancel a timer: 1,000 per invocation, figures per timer. Baseline: <see cref="Timer"/> create and dispose.</summary>
public class TimerBenchmarks
{
    private const int Batch = 1_000;
    private WorkerPool _pool = null!;
    private readonly ITimer[] _timers = new ITimer[Batch];

    [GlobalSetup]
    public void Setup() => _pool = new WorkerPool(new WorkerPoolOptions { Name = "benchmarks" });

    [GlobalCleanup]
    public void Cleanup() => _pool.Dispose();

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("timer schedule + cancel")]
    public void BuiltIn_TimerCreateDispose()
    {
        for (int i = 0; i < Batch; i++)
        {
            _timers[i] = new Timer(s_callback, null, TimeSpan.FromSeconds(30 + (i & 7)), Timeout.InfiniteTimeSpan);
        }
        for (int i = 0; i < Batch; i++)
        {
            _timers[i].Dispose();
        }
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("timer schedule + cancel")]
    public void Spindle_CreateTimerDispose()
    {
        for (int i = 0; i < Batch; i++)
        {
            _timers[i] = _pool.CreateTimer(s_callback, null, TimeSpan.FromSeconds(30 + (i & 7)), Timeout.InfiniteTimeSpan);
        }
        for (int i = 0; i < Batch; i++)
        {
            _timers[i].Dispose();
        }
    }

    private static readonly TimerCallback s_callback = static _ => { };
}

/// <summary>
/// Park and wake: one item queued to a quiet pool and waited for, so each operation includes waking a worker (or
/// finding one still searching) and the hand-back. Baseline: the built-in pool.
/// </summary>
public class WakeBenchmarks
{
    private WorkerPool _pool = null!;
    private readonly Countdown _countdown = new();

    [GlobalSetup]
    public void Setup() => _pool = new WorkerPool(new WorkerPoolOptions { Name = "benchmarks" });

    [GlobalCleanup]
    public void Cleanup() => _pool.Dispose();

    [Benchmark(Baseline = true), BenchmarkCategory("wake a quiet pool for one item")]
    public void BuiltIn_OneItemRoundTrip()
    {
        _countdown.Reset(1);
        ThreadPool.UnsafeQueueUserWorkItem(s_signal, _countdown);
        _countdown.Wait();
    }

    [Benchmark, BenchmarkCategory("wake a quiet pool for one item")]
    public void Spindle_OneItemRoundTrip()
    {
        _countdown.Reset(1);
        _pool.UnsafeQueueUserWorkItem(s_signal, _countdown);
        _countdown.Wait();
    }

    private static readonly WaitCallback s_signal = static state => ((Countdown)state!).Signal();
}
