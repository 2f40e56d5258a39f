using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Continuations across shutdown: an <c>await</c> under the pool's SynchronizationContext or TaskScheduler whose awaited
/// task completes during the drain runs on the pool; one that completes after the pool has stopped runs on the built-in
/// pool and is counted. Neither throws into the thread that completed the awaited task, and no awaiter is stranded.
/// Async <c>Run</c> items keep the drain going until their task completes.
/// </summary>
public sealed class WorkerPoolContinuationShutdownTests
{
    /// <summary>How the awaiting code reached the pool.</summary>
    public enum Route
    {
        RunWithToken,
        RunWithoutToken,
        SchedulerTask,
        InstalledContext,
    }

    /// <summary>Who completes the awaited task.</summary>
    public enum Completer
    {
        ForeignThread,
        PoolTimer,
        InsidePool,
    }

    private static WorkerPool NewPool(Func<ThreadStart, int, Thread>? threadFactory = null) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolContinuationShutdownTests),
        MinThreads = 2,
        MaxThreads = 2,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
        ThreadFactory = threadFactory,
    });

    /// <summary>
    /// A long-running item that, once <see cref="Release"/> is set, posts a continuation to its pool's context and
    /// records the pool current where the continuation ran. Constructed, the item has started.
    /// </summary>
    /// <summary>
    /// Disposes <paramref name="pool"/> on a thread of its own, releases <paramref name="poster"/> once shutdown has begun
    /// (after <paramref name="whileHeld"/>, given the disposing task), and checks that the posted continuation ran on the
    /// pool, none was redirected, and Dispose returned.
    /// </summary>
    private static void DisposeThenRelease(WorkerPool pool, LongRunningPoster poster, Action<Task>? whileHeld = null)
    {
        Task dispose = Task.Factory.StartNew(pool.Dispose, TaskCreationOptions.LongRunning);
        Waits.Until(() => pool.IsShutdownStarted, "shutdown begins");
        whileHeld?.Invoke(dispose);
        poster.Release.Set();
        Waits.For(poster.Continued, "the posted continuation runs");
        Assert.True(dispose.Wait(Waits.MustHappen), "Dispose returns");
        Assert.Same(pool, poster.ContinuationOn);
        Assert.Equal(0, pool.RedirectedCallbackCount);
    }

    private sealed class LongRunningPoster : IDisposable
    {
        public readonly ManualResetEventSlim Release = new();
        public readonly ManualResetEventSlim Continued = new();
        public WorkerPool? ContinuationOn;
        private readonly ManualResetEventSlim _started = new();

        public LongRunningPoster(WorkerPool pool)
        {
            pool.QueueUserWorkItem(_ =>
            {
                _started.Set();
                Release.Wait(Waits.MustHappen);
                // Posted while the pool drains: the long-running item holds the drain.
                pool.SynchronizationContext.Post(_ =>
                {
                    ContinuationOn = WorkerPool.Current;
                    Continued.Set();
                }, null);
            }, (object?)null, WorkItemOptions.LongRunning);
            Waits.For(_started, "the long-running item");
        }

        public void Dispose()
        {
            Release.Dispose();
            Continued.Dispose();
            _started.Dispose();
        }
    }

    /// <summary>The awaiting code: awaits <paramref name="awaited"/>, then records where it resumed.</summary>
    private sealed class Awaiter(Task awaited)
    {
        public readonly ManualResetEventSlim AtAwait = new();
        public WorkerPool? ResumedOn;
        public bool Resumed;

        public async Task Body()
        {
            AtAwait.Set();
            await awaited;
            ResumedOn = WorkerPool.Current;
            await Task.Yield(); // a second continuation, through the same route
            Resumed = true;
        }
    }

    private static Task Start(WorkerPool pool, Route route, Awaiter awaiter, CancellationToken token)
    {
        switch (route)
        {
            case Route.RunWithToken:
                return pool.Run(awaiter.Body, token);
            case Route.RunWithoutToken:
                return pool.Run(awaiter.Body, CancellationToken.None);
            case Route.SchedulerTask:
                return Task.Factory.StartNew(awaiter.Body, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler).Unwrap();
            default:
                var started = new TaskCompletionSource<Task>();
                var thread = new Thread(() =>
                {
                    SynchronizationContext.SetSynchronizationContext(pool.SynchronizationContext);
                    started.SetResult(awaiter.Body());
                })
                { IsBackground = true };
                thread.Start();
                return started.Task.Unwrap();
        }
    }

    /// <summary>Completes an awaited task the way a <see cref="Completer"/> says, once <see cref="Trigger"/> is called.</summary>
    private sealed class Completion
    {
        private readonly TaskCompletionSource _awaited;
        private readonly Completer _completer;
        private readonly ITimer? _timer;
        private readonly ManualResetEventSlim _insideGo = new();
        private Exception? _failure;
        private Thread? _thread;

        public Completion(WorkerPool pool, TaskCompletionSource awaited, Completer completer)
        {
            _awaited = awaited;
            _completer = completer;
            switch (completer)
            {
                case Completer.PoolTimer:
                    // Created while the pool runs (CreateTimer refuses new timers after shutdown began), started later.
                    _timer = pool.CreateTimer(_ => Complete(), null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
                    break;
                case Completer.InsidePool:
                    pool.QueueUserWorkItem(_ =>
                    {
                        _insideGo.Wait(Waits.MustHappen);
                        Complete();
                    });
                    break;
            }
        }

        private void Complete()
        {
            try
            {
                // No RunContinuationsAsynchronously: the awaiter's continuation is posted or queued by this very thread,
                // which is where a refused post used to throw.
                _awaited.SetResult();
            }
            catch (Exception exception)
            {
                _failure = exception;
            }
        }

        public void Trigger()
        {
            switch (_completer)
            {
                case Completer.ForeignThread:
                    _thread = new Thread(Complete) { IsBackground = true };
                    _thread.Start();
                    break;
                case Completer.PoolTimer:
                    Assert.True(_timer!.Change(TimeSpan.FromMilliseconds(1), Timeout.InfiniteTimeSpan));
                    break;
                default:
                    _insideGo.Set();
                    break;
            }
        }

        public void AssertCompletedCleanly()
        {
            Waits.Until(() => _awaited.Task.IsCompleted, "the awaited task is completed");
            Assert.True(_thread?.Join(Waits.MustHappen) ?? true);
            Assert.Null(_failure);
            _timer?.Dispose();
        }
    }

    public static IEnumerable<object[]> AllRoutesAndCompleters()
    {
        foreach (Route route in Enum.GetValues<Route>())
        {
            foreach (Completer completer in Enum.GetValues<Completer>())
            {
                yield return [route, completer];
            }
        }
    }

    public static IEnumerable<object[]> RoutesWithoutHoldAndOutsideCompleters()
    {
        foreach (Route route in new[] { Route.SchedulerTask, Route.InstalledContext })
        {
            foreach (Completer completer in new[] { Completer.ForeignThread, Completer.PoolTimer })
            {
                yield return [route, completer];
            }
        }
    }

    [Theory]
    [MemberData(nameof(AllRoutesAndCompleters))]
    public void ContinuationDuringTheDrain_RunsOnThePool(Route route, Completer completer)
    {
        using var cts = new CancellationTokenSource();
        WorkerPool pool = NewPool();
        using var gate = new ManualResetEventSlim();
        using var gateStarted = new ManualResetEventSlim();
        // Keeps the drain going while the awaited task completes.
        pool.QueueUserWorkItem(_ =>
        {
            gateStarted.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(gateStarted, "the item that keeps the drain going");
        var awaited = new TaskCompletionSource();
        var awaiter = new Awaiter(awaited.Task);
        Task work = Start(pool, route, awaiter, cts.Token);
        Waits.For(awaiter.AtAwait, "the awaiting code reaches its await");
        var completion = new Completion(pool, awaited, completer);

        Task dispose = Task.Factory.StartNew(pool.Dispose, TaskCreationOptions.LongRunning);
        Waits.Until(() => pool.IsShutdownStarted, "shutdown begins");
        completion.Trigger();

        Assert.True(((IAsyncResult)work).AsyncWaitHandle.WaitOne(Waits.MustHappen), "the awaiting code finishes");
        completion.AssertCompletedCleanly();
        Assert.Equal(TaskStatus.RanToCompletion, work.Status);
        Assert.True(awaiter.Resumed);
        Assert.Same(pool, awaiter.ResumedOn);
        gate.Set();
        Assert.True(dispose.Wait(Waits.MustHappen), "Dispose returns");
        Assert.Equal(0, pool.RedirectedCallbackCount);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Theory]
    [MemberData(nameof(RoutesWithoutHoldAndOutsideCompleters))]
    public void ContinuationAfterThePoolStopped_RunsOnTheBuiltInPool_AndIsCounted(Route route, Completer completer)
    {
        WorkerPool pool = NewPool();
        var awaited = new TaskCompletionSource();
        var awaiter = new Awaiter(awaited.Task);
        Task work = Start(pool, route, awaiter, CancellationToken.None);
        Waits.For(awaiter.AtAwait, "the awaiting code reaches its await");
        var completion = new Completion(pool, awaited, completer);

        Waits.RunBounded(pool.Dispose, "Dispose");
        Assert.Equal(0, pool.ThreadCount);
        completion.Trigger();

        Assert.True(((IAsyncResult)work).AsyncWaitHandle.WaitOne(Waits.MustHappen), "the awaiting code finishes");
        completion.AssertCompletedCleanly();
        Assert.Equal(TaskStatus.RanToCompletion, work.Status);
        Assert.True(awaiter.Resumed);
        Assert.Null(awaiter.ResumedOn); // not on the stopped pool's threads
        Assert.True(pool.RedirectedCallbackCount >= 1);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Theory]
    [InlineData(Route.RunWithToken, Completer.ForeignThread)]
    [InlineData(Route.RunWithToken, Completer.PoolTimer)]
    [InlineData(Route.RunWithoutToken, Completer.ForeignThread)]
    [InlineData(Route.RunWithoutToken, Completer.PoolTimer)]
    public void Dispose_WaitsForAnAsyncRunItem_WhoseContinuationsRunOnThePool(Route route, Completer completer)
    {
        using var cts = new CancellationTokenSource();
        WorkerPool pool = NewPool();
        var awaited = new TaskCompletionSource();
        var awaiter = new Awaiter(awaited.Task);
        Task work = Start(pool, route, awaiter, cts.Token);
        Waits.For(awaiter.AtAwait, "the awaiting code reaches its await");
        var completion = new Completion(pool, awaited, completer);

        Task dispose = Task.Factory.StartNew(pool.Dispose, TaskCreationOptions.LongRunning);
        Waits.Until(() => pool.IsShutdownStarted, "shutdown begins");
        Waits.Never(() => dispose.IsCompleted, "Dispose returned while a Run item's task was still running");
        completion.Trigger();

        Assert.True(dispose.Wait(Waits.MustHappen), "Dispose returns");
        completion.AssertCompletedCleanly();
        Assert.Equal(TaskStatus.RanToCompletion, work.Status);
        Assert.Same(pool, awaiter.ResumedOn);
        Assert.True(awaiter.Resumed);
        Assert.Equal(0, pool.RedirectedCallbackCount);
    }

    [Fact]
    public void CancelPending_StillRunsTheContinuationsOfAsyncRunItemsThatHadStarted()
    {
        WorkerPool pool = NewPool();
        var awaited = new TaskCompletionSource();
        var awaiter = new Awaiter(awaited.Task);
        Task work = pool.Run(awaiter.Body);
        Waits.For(awaiter.AtAwait, "the awaiting code reaches its await");

        Task<int> shutdown = Task.Factory.StartNew(() => pool.Shutdown(ShutdownMode.CancelPending), TaskCreationOptions.LongRunning);
        Waits.Until(() => pool.IsShutdownStarted, "shutdown begins");
        new Thread(() => awaited.SetResult()) { IsBackground = true }.Start();

        Assert.True(shutdown.Wait(Waits.MustHappen), "Shutdown(CancelPending) returns");
        Assert.Equal(0, shutdown.Result); // the item had started: nothing was cancelled
        Assert.True(((IAsyncResult)work).AsyncWaitHandle.WaitOne(Waits.MustHappen));
        Assert.Equal(TaskStatus.RanToCompletion, work.Status);
        Assert.Same(pool, awaiter.ResumedOn);
    }

    [Fact]
    public void ContinuationOfALongRunningItem_DuringTheDrain_RunsOnThePool()
    {
        WorkerPool pool = NewPool();
        using var poster = new LongRunningPoster(pool); // every worker idle when it posts

        DisposeThenRelease(pool, poster, whileHeld: dispose =>
            Waits.Never(() => dispose.IsCompleted, "Dispose returned while a long-running item was running"));
    }

    [Fact]
    public void ContinuationOfALongRunningItem_InAPoolWithoutWorkers_RunsOnAWorkerNotOnTheDisposingThread()
    {
        // The pool's only work runs on a dedicated thread, so the pool has no worker while it drains. The continuation
        // that item posts is queued before a worker exists; creating that worker is held up here (the factory's second
        // call: the first made the dedicated thread), so the waiting Dispose looks at the queue meanwhile. It must see
        // the continuation run on the pool's worker, not run it on its own thread. The hold only gives a wrong Dispose
        // time to be wrong: a right one passes however the threads are scheduled.
        int creations = 0;
        WorkerPool pool = NewPool((start, stack) =>
        {
            if (Interlocked.Increment(ref creations) == 2)
            {
                Thread.Sleep(100);
            }
            return new Thread(start, stack);
        });
        using var poster = new LongRunningPoster(pool);
        Assert.Equal(0, pool.ThreadCount);

        DisposeThenRelease(pool, poster);
    }

    [Fact]
    public void DisposeFromInsideAWorkItem_WithAnAsyncRunItemPending_StopsOnceItsTaskCompletes()
    {
        WorkerPool pool = NewPool();
        var awaited = new TaskCompletionSource();
        var awaiter = new Awaiter(awaited.Task);
        Task work = pool.Run(awaiter.Body, CancellationToken.None);
        Waits.For(awaiter.AtAwait, "the awaiting code reaches its await");
        using var disposed = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            pool.Dispose(); // returns at once on a worker
            disposed.Set();
        });
        Waits.For(disposed, "Dispose from inside returns");
        Waits.Never(() => pool.ThreadCount == 0, "the workers exited while a Run item's task was running");
        new Thread(() => awaited.SetResult()) { IsBackground = true }.Start();
        Assert.True(((IAsyncResult)work).AsyncWaitHandle.WaitOne(Waits.MustHappen));
        Assert.Same(pool, awaiter.ResumedOn);
        Waits.Until(() => pool.ThreadCount == 0, "the workers exit once the task has completed");
        Assert.Equal(0, pool.RedirectedCallbackCount);
    }

    [Fact]
    public void PostAndSend_AfterThePoolStopped_RunElsewhere_AndNeverThrow()
    {
        WorkerPool pool = NewPool();
        SynchronizationContext context = pool.SynchronizationContext;
        pool.Dispose();

        using var posted = new ManualResetEventSlim();
        SynchronizationContext? seenInPost = null;
        context.Post(_ =>
        {
            seenInPost = SynchronizationContext.Current;
            posted.Set();
        }, null);
        Waits.For(posted, "the post runs");
        Assert.Same(context, seenInPost);
        Assert.Equal(1, pool.RedirectedCallbackCount);

        int sentOn = 0;
        context.Send(_ => sentOn = Environment.CurrentManagedThreadId, null);
        Assert.Equal(Environment.CurrentManagedThreadId, sentOn);
    }

    [Fact]
    public void SchedulerTask_QueuedAfterThePoolStopped_Runs_AndIsCounted()
    {
        WorkerPool pool = NewPool();
        TaskScheduler scheduler = pool.TaskScheduler;
        pool.Dispose();
        Task<WorkerPool?> task = Task.Factory.StartNew(() => WorkerPool.Current, CancellationToken.None, TaskCreationOptions.None, scheduler);
        Assert.True(((IAsyncResult)task).AsyncWaitHandle.WaitOne(Waits.MustHappen));
        Assert.Null(task.Result);
        Assert.Equal(1, pool.RedirectedCallbackCount);
        Task longRunning = Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.LongRunning, scheduler);
        Assert.True(((IAsyncResult)longRunning).AsyncWaitHandle.WaitOne(Waits.MustHappen));
        Assert.Equal(2, pool.RedirectedCallbackCount);
    }

    [Fact]
    public async Task TimeProviderDelays_OutliveThePool_AndComplete()
    {
        WorkerPool pool = NewPool();
        TimeProvider provider = pool.TimeProvider;
        var clock = System.Diagnostics.Stopwatch.StartNew();
        Task delay = Task.Delay(TimeSpan.FromMilliseconds(200), provider);
        using var cts = new CancellationTokenSource(TimeSpan.FromMilliseconds(210), provider);
        pool.Dispose();
        TimeSpan stoppedAt = clock.Elapsed;
        await delay.WaitAsync(Waits.MustHappen);
        Assert.True(cts.Token.WaitHandle.WaitOne(Waits.MustHappen), "the timeout of a CancellationTokenSource fires");
        if (stoppedAt < TimeSpan.FromMilliseconds(200))
        {
            // Both came due after the pool had stopped (a timer never fires early): both ran on the built-in pool. On a
            // machine slow enough for the drain to outlast them they ran on the pool, as firings during a drain do.
            Assert.True(pool.RedirectedCallbackCount >= 2, $"{pool.RedirectedCallbackCount} callbacks redirected; the pool stopped after {stoppedAt.TotalMilliseconds} ms");
        }
        Waits.Until(() => !pool.TimerThreadIsAlive, "the timer thread exits once no timer is scheduled");
    }
}

/// <summary>
/// Every <c>Run</c> and <c>RunAsValueTask</c> overload has one model, token or not: the delegate runs on the pool with the
/// pool's SynchronizationContext installed (awaits come back through it), and TaskScheduler.Current is the default
/// scheduler, as inside <see cref="Task.Run(Action)"/>.
/// </summary>
public sealed class WorkerPoolRunModelTests
{
    private sealed record Observed(WorkerPool? Pool, SynchronizationContext? Context, TaskScheduler Scheduler, WorkerPool? AfterAwait, WorkerPool? StartNewOn);

    private static async Task<Observed> ObserveAsync()
    {
        WorkerPool? pool = WorkerPool.Current;
        SynchronizationContext? context = SynchronizationContext.Current;
        TaskScheduler scheduler = TaskScheduler.Current;
        WorkerPool? startNewOn = await Task.Factory.StartNew(() => WorkerPool.Current);
        await Task.Delay(1);
        return new Observed(pool, context, scheduler, WorkerPool.Current, startNewOn);
    }

    private static Observed ObserveSync() =>
        new(WorkerPool.Current, SynchronizationContext.Current, TaskScheduler.Current, null,
            Task.Factory.StartNew(() => WorkerPool.Current).GetAwaiter().GetResult());

    public static IEnumerable<object[]> Overloads()
    {
        foreach (bool withToken in new[] { false, true })
        {
            foreach (string overload in new[] { "Action", "Func", "AsyncAction", "AsyncFunc", "ValueTaskAction", "ValueTaskFunc" })
            {
                yield return [overload, withToken];
            }
        }
    }

    [Theory]
    [MemberData(nameof(Overloads))]
    public async Task EveryRunOverload_RunsUnderThePoolsContext_WithTheDefaultScheduler(string overload, bool withToken)
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolRunModelTests), ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using var cts = new CancellationTokenSource();
        CancellationToken token = withToken ? cts.Token : CancellationToken.None;
        Observed? observed = null;
        switch (overload)
        {
            case "Action":
                await pool.Run(() => { observed = ObserveSync(); }, token);
                break;
            case "Func":
                observed = await pool.Run(ObserveSync, token);
                break;
            case "AsyncAction":
                await pool.Run(async () => { observed = await ObserveAsync(); }, token);
                break;
            case "AsyncFunc":
                observed = await pool.Run(ObserveAsync, token);
                break;
            case "ValueTaskAction":
                await pool.RunAsValueTask(() => { observed = ObserveSync(); }, token);
                break;
            default:
                observed = await pool.RunAsValueTask(ObserveSync, token);
                break;
        }
        Assert.NotNull(observed);
        Assert.Same(pool, observed.Pool);
        Assert.Same(pool.SynchronizationContext, observed.Context);
        Assert.Same(TaskScheduler.Default, observed.Scheduler);
        Assert.NotSame(pool, observed.StartNewOn); // StartNew without a scheduler uses TaskScheduler.Current: the default one
        if (overload.StartsWith("Async", StringComparison.Ordinal))
        {
            Assert.Same(pool, observed.AfterAwait); // the await came back through the pool's context
        }
    }

    /// <summary>
    /// Every worker blocks in a synchronous wait for a continuation that is queued only once the drain has begun: the
    /// pool must add a thread for it during the drain, as it would before, or the drain would wait for ever.
    /// </summary>
    [Fact]
    public void Drain_WorkersBlockedOnContinuationsQueuedDuringTheDrain_GetAThread()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(Drain_WorkersBlockedOnContinuationsQueuedDuringTheDrain_GetAThread),
            MinThreads = 2,
            MaxThreads = 8,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var blocked = new CountdownEvent(2);
        int continuations = 0;
        for (int i = 0; i < 2; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                Task continuation = release.Task.ContinueWith(
                    _ => Interlocked.Increment(ref continuations), CancellationToken.None, TaskContinuationOptions.None, pool.TaskScheduler);
                blocked.Signal();
                continuation.Wait(Waits.MustHappen); // sync over async: this worker holds on until its continuation has run
            });
        }
        Waits.For(blocked, "both workers blocked");

        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.Drain);
        release.SetResult();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the drain finished");
        Assert.Equal(2, Volatile.Read(ref continuations));
    }
}
