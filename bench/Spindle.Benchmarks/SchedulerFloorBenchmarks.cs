using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using BenchmarkDotNet.Attributes;

namespace Spindle.Benchmarks;

/// <summary>
/// What any custom <see cref="TaskScheduler"/> costs, measured apart from Spindle's pool: the thinnest possible scheduler
/// on the built-in pool itself (queue = <see cref="ThreadPool.UnsafeQueueUserWorkItem{TState}(Action{TState}, TState, bool)"/>,
/// execute = <see cref="TaskScheduler.TryExecuteTask"/>) next to the default scheduler and Spindle's, for the shapes of
/// the comparison program's <c>task-run</c> (1,000 tasks from outside, then wait) and <c>async-yield</c> (tasks that
/// <c>await Task.Yield()</c>; on a custom scheduler the runtime allocates and schedules a task per yield). Baseline: the
/// default scheduler.
/// </summary>
public class SchedulerFloorBenchmarks
{
    private const int Batch = 1_000;
    private const int Yielders = 100;
    private const int YieldsEach = 100;

    private static readonly Action s_work = static () => { };

    private WorkerPool _pool = null!;
    private TaskFactory _thinFactory = null!;
    private readonly Task[] _tasks = new Task[Batch];
    private readonly Task[] _yielders = new Task[Yielders];

    [GlobalSetup]
    public void Setup()
    {
        _pool = new WorkerPool(new WorkerPoolOptions { Name = "benchmarks" });
        _thinFactory = new TaskFactory(CancellationToken.None, TaskCreationOptions.DenyChildAttach,
            TaskContinuationOptions.None, new ThinScheduler());
    }

    [GlobalCleanup]
    public void Cleanup() => _pool.Dispose();

    [Benchmark(Baseline = true, OperationsPerInvoke = Batch), BenchmarkCategory("task-run shape, per task")]
    public void Default_TaskRun()
    {
        for (int i = 0; i < Batch; i++)
        {
            _tasks[i] = Task.Run(s_work);
        }
        Task.WaitAll(_tasks);
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("task-run shape, per task")]
    public void ThinSchedulerOnBuiltInPool_StartNew()
    {
        for (int i = 0; i < Batch; i++)
        {
            _tasks[i] = _thinFactory.StartNew(s_work);
        }
        Task.WaitAll(_tasks);
    }

    [Benchmark(OperationsPerInvoke = Batch), BenchmarkCategory("task-run shape, per task")]
    public void Spindle_Run()
    {
        for (int i = 0; i < Batch; i++)
        {
            _tasks[i] = _pool.Run(s_work);
        }
        Task.WaitAll(_tasks);
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Yielders * YieldsEach), BenchmarkCategory("async-yield shape, per yield")]
    public void Default_Yield() => RunYielders(static f => Task.Run(f));

    [Benchmark(OperationsPerInvoke = Yielders * YieldsEach), BenchmarkCategory("async-yield shape, per yield")]
    public void ThinSchedulerOnBuiltInPool_Yield() => RunYielders(f => _thinFactory.StartNew(f).Unwrap());

    [Benchmark(OperationsPerInvoke = Yielders * YieldsEach), BenchmarkCategory("async-yield shape, per yield")]
    public void Spindle_Yield() => RunYielders(f => _pool.Run(f));

    private void RunYielders(Func<Func<Task>, Task> start)
    {
        for (int i = 0; i < Yielders; i++)
        {
            _yielders[i] = start(static async () =>
            {
                for (int j = 0; j < YieldsEach; j++)
                {
                    await Task.Yield();
                }
            });
        }
        Task.WaitAll(_yielders);
    }

    /// <summary>The least a custom scheduler can do: hand each task to the built-in pool and execute it there.</summary>
    private sealed class ThinScheduler : TaskScheduler
    {
        private readonly Action<Task> _execute;

        public ThinScheduler() => _execute = task => TryExecuteTask(task);

        protected override void QueueTask(Task task) =>
            ThreadPool.UnsafeQueueUserWorkItem(_execute, task, preferLocal: (task.CreationOptions & TaskCreationOptions.PreferFairness) == 0);

        protected override bool TryExecuteTaskInline(Task task, bool taskWasPreviouslyQueued) =>
            Thread.CurrentThread.IsThreadPoolThread && TryExecuteTask(task);

        protected override IEnumerable<Task>? GetScheduledTasks() => null;
    }
}
