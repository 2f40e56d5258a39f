using System;
using System.Collections.Generic;
using System.Diagnostics.Metrics;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>The pool's TaskScheduler and SynchronizationContext, the Run methods, and cancellation of queued work.</summary>
public sealed class WorkerPoolTaskTests
{
    private static WorkerPool NewPool(int maxThreads = WorkerPoolOptions.MaxThreadLimit, Action<WorkerPoolOptions>? configure = null)
    {
        var options = new WorkerPoolOptions
        {
            Name = nameof(WorkerPoolTaskTests),
            MinThreads = Math.Min(2, maxThreads),
            MaxThreads = maxThreads,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        };
        configure?.Invoke(options);
        return new WorkerPool(options);
    }

    /// <summary>Occupies every worker of a pool with MaxThreads = <paramref name="threads"/> until the returned gate opens.</summary>
    private static ManualResetEventSlim Occupy(WorkerPool pool, int threads)
    {
        var gate = new ManualResetEventSlim();
        using var started = new CountdownEvent(threads);
        for (int i = 0; i < threads; i++)
        {
            pool.QueueUserWorkItem(_ =>
            {
                started.Signal();
                gate.Wait(Waits.MustHappen);
            });
        }
        Waits.For(started, "the blocking items");
        return gate;
    }

    // ---- TaskScheduler -------------------------------------------------------------------------------------------

    [Fact]
    public async Task TaskScheduler_RunsTasksOnThePool_AndIsCurrentForChildrenAndContinuations()
    {
        using var pool = NewPool();
        TaskScheduler scheduler = pool.TaskScheduler;
        Assert.Same(scheduler, pool.TaskScheduler);
        Assert.Same(pool, pool.TaskScheduler.Pool);
        WorkerPool? outer = null, child = null, continuation = null;
        TaskScheduler? current = null;
        await Task.Factory.StartNew(async () =>
        {
            outer = WorkerPool.Current;
            current = TaskScheduler.Current;
            await Task.Factory.StartNew(() => child = WorkerPool.Current); // default scheduler here is TaskScheduler.Current
            await Task.Delay(5); // resumes through the scheduler, so TaskScheduler.Current is still the pool's
            await Task.CompletedTask.ContinueWith(_ => continuation = WorkerPool.Current);
        }, CancellationToken.None, TaskCreationOptions.None, scheduler).Unwrap();
        Assert.Same(pool, outer);
        Assert.Same(scheduler, current);
        Assert.Same(pool, child);
        Assert.Same(pool, continuation);
    }

    [Fact]
    public void TaskScheduler_InlinesAQueuedTaskWaitedOnByAPoolThread()
    {
        // One worker: the waited-on task can only run by being inlined into the waiting task.
        using var pool = NewPool(maxThreads: 1);
        int waiterThread = 0, innerThread = 0;
        Task outer = Task.Factory.StartNew(() =>
        {
            waiterThread = Environment.CurrentManagedThreadId;
            Task inner = Task.Factory.StartNew(() => innerThread = Environment.CurrentManagedThreadId);
            inner.Wait(); // an untimed, uncancellable wait is the one Task inlines
        }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);
        Assert.True(outer.Wait(Waits.MustHappen), "the inner task was not inlined (and nothing else could run it)");
        Assert.Equal(waiterThread, innerThread);
    }

    [Fact]
    public void TaskScheduler_DoesNotInlineOnAForeignThread()
    {
        using var pool = NewPool();
        var task = new Task(() => Assert.Same(pool, WorkerPool.Current));
        task.RunSynchronously(pool.TaskScheduler); // refused inline here: queued, and this thread waits
        Assert.True(task.IsCompletedSuccessfully, task.Exception?.ToString());
    }

    [Fact]
    public void TaskScheduler_LongRunningGoesToADedicatedThread()
    {
        using var pool = NewPool();
        string? name = null;
        Task task = Task.Factory.StartNew(() => name = Thread.CurrentThread.Name, CancellationToken.None,
            TaskCreationOptions.LongRunning, pool.TaskScheduler);
        Assert.True(task.Wait(Waits.MustHappen));
        Assert.Contains("long-running", name);
        Assert.Equal(1, pool.GetThreadInjectionCount(ThreadInjectionReason.LongRunning));
    }

    [Fact]
    public void TaskScheduler_PreferFairnessGoesToTheGlobalQueue_OthersToTheLocalQueue()
    {
        // On a one-thread pool nothing can take either task while the queueing task still runs, so the global queue's
        // length shows where each one went.
        using var pool = NewPool(maxThreads: 1);
        long afterLocal = -1, afterFair = -1;
        Task outer = Task.Factory.StartNew(() =>
        {
            Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, TaskScheduler.Current);
            afterLocal = pool.GlobalQueueCount;
            Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.PreferFairness, TaskScheduler.Current);
            afterFair = pool.GlobalQueueCount;
        }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);
        Assert.True(outer.Wait(Waits.MustHappen));
        Assert.Equal(0, afterLocal);
        Assert.Equal(1, afterFair);
    }

    [Fact]
    public void TaskScheduler_GetScheduledTasks_ListsQueuedTasksForDebuggers()
    {
        using var pool = NewPool(maxThreads: 1);
        using ManualResetEventSlim gate = Occupy(pool, 1);
        var queued = new[]
        {
            Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler),
            Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler),
        };
        MethodInfo method = typeof(TaskScheduler).GetMethod("GetScheduledTasks", BindingFlags.Instance | BindingFlags.NonPublic)!;
        // A snapshot read without stopping the pool (documented as able to miss a task that moves meanwhile): looked at
        // until it lists both, which it must while they wait behind the occupied worker.
        Waits.Until(
            () => new HashSet<Task>((IEnumerable<Task>)method.Invoke(pool.TaskScheduler, null)!).IsSupersetOf(queued),
            "the debugger snapshot to list both queued tasks");
        Assert.All(queued, task => Assert.Equal(TaskStatus.WaitingToRun, task.Status));
        gate.Set();
        Assert.True(Task.WaitAll(queued, Waits.MustHappen));
    }

    [Fact]
    public void TaskScheduler_GetScheduledTasks_ListsTasksTheQueueWaitHistogramSampled()
    {
        // While a listener has the queue-wait histogram on, a sampled enqueue queues the task inside a timing wrapper;
        // the snapshot must look through it. A thread outside the pool samples its first enqueue after a pause of
        // 10 ms or more, so each task here is sampled.
        using MeterListener listener = QueueWaitListener.Start();
        using var pool = NewPool(maxThreads: 1);
        using ManualResetEventSlim gate = Occupy(pool, 1);
        var queued = new Task[2];
        for (int i = 0; i < queued.Length; i++)
        {
            Thread.Sleep(20);
            queued[i] = Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);
        }
        MethodInfo method = typeof(TaskScheduler).GetMethod("GetScheduledTasks", BindingFlags.Instance | BindingFlags.NonPublic)!;
        var listed = new HashSet<Task>((IEnumerable<Task>)method.Invoke(pool.TaskScheduler, null)!);
        Assert.True(listed.IsSupersetOf(queued), $"the snapshot listed {listed.Count} of the {queued.Length} queued tasks");
        gate.Set();
        Assert.True(Task.WaitAll(queued, Waits.MustHappen));
    }

    [Fact]
    public void TaskScheduler_ParallelForEachRunsOnThePool()
    {
        using var pool = NewPool();
        // The calling thread takes part in the loop; each iteration sleeps a little so that the replicas the loop
        // schedules on the pool get to run iterations too, however fast the calling thread is.
        int onPool = 0;
        Parallel.For(0, 200, new ParallelOptions { TaskScheduler = pool.TaskScheduler }, _ =>
        {
            if (WorkerPool.Current == pool)
            {
                Interlocked.Increment(ref onPool);
            }
            Thread.Sleep(1);
        });
        Assert.True(onPool > 0, "no iteration ran on the pool");
    }

    // ---- SynchronizationContext ---------------------------------------------------------------------------------

    [Theory]
    [MemberData(nameof(Tokens))]
    public async Task Awaits_InsideRun_ResumeOnThePool_IncludingTimersFilesAndSockets(bool cancellableToken)
    {
        using var pool = NewPool();
        using var cts = new CancellationTokenSource();
        string path = Path.Combine(Path.GetTempPath(), $"spindle-{Guid.NewGuid():N}.txt");
        var seen = new List<(string what, WorkerPool? pool)>();
        void Record(string what) => seen.Add((what, WorkerPool.Current));
        try
        {
            using var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            int port = ((IPEndPoint)listener.LocalEndpoint).Port;
            await pool.Run(async () =>
            {
                Record("start");
                await Task.Delay(20);
                Record("timer");
                await File.WriteAllTextAsync(path, "spindle");
                Record("file write");
                await using (var stream = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.Read, 4096, FileOptions.Asynchronous))
                {
                    var buffer = new byte[16];
                    await stream.ReadAtLeastAsync(buffer, 1);
                }
                Record("file read");
                using var client = new TcpClient();
                Task<TcpClient> accept = listener.AcceptTcpClientAsync();
                await client.ConnectAsync(IPAddress.Loopback, port);
                Record("socket connect");
                using TcpClient server = await accept;
                Record("socket accept");
                var received = new byte[1];
                ValueTask<int> read = client.GetStream().ReadAsync(received);
                _ = Task.Run(async () => { await Task.Delay(20); await server.GetStream().WriteAsync(new byte[] { 42 }); });
                Assert.Equal(1, await read);
                Assert.Equal(42, received[0]);
                Record("socket read");
            }, cancellableToken ? cts.Token : CancellationToken.None);
        }
        finally
        {
            File.Delete(path);
        }
        Assert.Equal(7, seen.Count);
        foreach ((string what, WorkerPool? where) in seen)
        {
            Assert.True(where == pool, $"'{what}' resumed off the pool");
        }
    }

    [Fact]
    public void SynchronizationContext_Post_RunsOnThePoolWithTheContextInstalled()
    {
        using var pool = NewPool();
        WorkerPoolSynchronizationContext context = pool.SynchronizationContext;
        Assert.Same(context, pool.SynchronizationContext);
        Assert.Same(context, context.CreateCopy());
        using var done = new ManualResetEventSlim();
        SynchronizationContext? inside = null;
        WorkerPool? where = null;
        context.Post(state =>
        {
            inside = SynchronizationContext.Current;
            where = WorkerPool.Current;
            ((ManualResetEventSlim)state!).Set();
        }, done);
        Waits.For(done, "the posted callback");
        Assert.Same(context, inside);
        Assert.Same(pool, where);
    }

    [Fact]
    public void SynchronizationContext_Send_FromOutsideWaitsAndRethrows_FromInsideRunsInline()
    {
        using var pool = NewPool();
        WorkerPoolSynchronizationContext context = pool.SynchronizationContext;
        WorkerPool? where = null;
        context.Send(_ => where = WorkerPool.Current, null);
        Assert.Same(pool, where); // ran on the pool, and Send returned after it

        var thrown = Assert.Throws<InvalidOperationException>(() => context.Send(_ => throw new InvalidOperationException("sent"), null));
        Assert.Equal("sent", thrown.Message);

        int outerThread = 0, innerThread = -1;
        pool.Run(() =>
        {
            outerThread = Environment.CurrentManagedThreadId;
            context.Send(_ => innerThread = Environment.CurrentManagedThreadId, null);
        }).Wait(Waits.MustHappen);
        Assert.Equal(outerThread, innerThread);
    }

    // ---- Run methods -----------------------------------------------------------------------------------------------

    public static TheoryData<bool> Tokens() => [false, true];

    [Theory]
    [MemberData(nameof(Tokens))]
    public async Task Run_AllShapes_RunOnThePoolAndUnwrap(bool cancellableToken)
    {
        using var pool = NewPool();
        using var cts = new CancellationTokenSource();
        CancellationToken token = cancellableToken ? cts.Token : CancellationToken.None;
        WorkerPool? where = null;
        await pool.Run(() => { where = WorkerPool.Current; }, token);
        Assert.Same(pool, where);
        Assert.Equal(42, await pool.Run(() => 42, token));
        await pool.Run(async () =>
        {
            await Task.Delay(5);
            where = WorkerPool.Current;
        }, token);
        Assert.Same(pool, where);
        Assert.Equal("async", await pool.Run(async () =>
        {
            await Task.Yield();
            return "async";
        }, token));
        await Assert.ThrowsAsync<InvalidOperationException>(() => pool.Run((Func<Task>)(() => null!), token));
    }

    [Theory]
    [MemberData(nameof(Tokens))]
    public async Task Run_ExceptionsSurfaceThroughTheTask_NotThePoolPolicy(bool cancellableToken)
    {
        int reported = 0;
        using var pool = NewPool(configure: o => o.ExceptionPolicy = UnhandledExceptionPolicy.FailProcess);
        pool.UnhandledException += (_, _) => Interlocked.Increment(ref reported);
        using var cts = new CancellationTokenSource();
        CancellationToken token = cancellableToken ? cts.Token : CancellationToken.None;
        await Assert.ThrowsAsync<InvalidOperationException>(() => pool.Run(() => throw new InvalidOperationException("a"), token));
        await Assert.ThrowsAsync<InvalidOperationException>(() => pool.Run((Func<int>)(() => throw new InvalidOperationException("b")), token));
        await Assert.ThrowsAsync<InvalidOperationException>(() => pool.Run(async () =>
        {
            await Task.Yield();
            throw new InvalidOperationException("c");
        }, token));
        await Assert.ThrowsAsync<InvalidOperationException>(async () => await pool.RunAsValueTask(() => throw new InvalidOperationException("d"), token));
        Assert.Equal(0, reported);
    }

    [Fact]
    public async Task Run_DelegateThatObservesItsToken_EndsCancelled()
    {
        using var pool = NewPool();
        using var cts = new CancellationTokenSource();
        using var started = new ManualResetEventSlim();
        Task task = pool.Run(() =>
        {
            started.Set();
            cts.Token.WaitHandle.WaitOne(Waits.MustHappen);
            cts.Token.ThrowIfCancellationRequested();
        }, cts.Token);
        Waits.For(started, "the item to start");
        cts.Cancel(); // already running: only passed along
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => task);
        Assert.True(task.IsCanceled);
    }

    [Fact]
    public async Task RunAsValueTask_ReturnsResults_AndReusesItsSources()
    {
        using var pool = NewPool();
        long sum = 0;
        for (int i = 0; i < 1000; i++)
        {
            int value = i;
            sum += await pool.RunAsValueTask(() => value);
            await pool.RunAsValueTask(() => { });
        }
        Assert.Equal(999 * 1000 / 2, sum);
    }

    // ---- Cancellation of queued work ---------------------------------------------------------------------------

    [MethodImplAttribute(MethodImplOptions.NoInlining)]
    private static (Task task, WeakReference state) QueueWithState(WorkerPool pool, StrongBox<bool> ran, bool valueTask, CancellationToken token)
    {
        var state = new byte[1024];
        Action work = () =>
        {
            GC.KeepAlive(state);
            ran.Value = true;
        };
        Task task = valueTask ? pool.RunAsValueTask(work, token).AsTask() : pool.Run(work, token);
        return (task, new WeakReference(state));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void CancelledBeforeStart_NeverRuns_TaskCancelledAtOnce_StateReleased(bool valueTask)
    {
        using var pool = NewPool(maxThreads: 1);
        using ManualResetEventSlim gate = Occupy(pool, 1);
        using var cts = new CancellationTokenSource();
        var ran = new StrongBox<bool>();
        (Task task, WeakReference state) = QueueWithState(pool, ran, valueTask, cts.Token);
        Assert.False(task.IsCompleted);

        cts.Cancel();
        // Promptly: the only worker is still blocked, so nobody has dequeued the item.
        Assert.True(task.IsCanceled, $"status {task.Status}");
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        Assert.False(state.IsAlive, "the cancelled item's state is still reachable");

        gate.Set();
        Waits.Until(() => pool.PendingWorkItemCount == 0 && pool.CompletedWorkItemCount >= 2, "the queue to drain");
        Assert.False(ran.Value);
    }

    [Fact]
    public void CancellationRacingStart_ExactlyOneOfRanOrCancelled()
    {
        using var pool = NewPool();
        var random = new Random(7);
        const int rounds = 2_000;
        var tasks = new Task[rounds];
        var ran = new int[rounds];
        var sources = new CancellationTokenSource[rounds];
        for (int i = 0; i < rounds; i++)
        {
            int index = i;
            sources[i] = new CancellationTokenSource();
            tasks[i] = pool.Run(() => Interlocked.Increment(ref ran[index]), sources[i].Token);
            if (random.Next(2) == 0)
            {
                Thread.SpinWait(random.Next(200));
                sources[i].Cancel();
            }
        }
        Assert.True(Task.WaitAll(Array.ConvertAll(tasks, t => t.ContinueWith(_ => { })), Waits.MustHappen));
        for (int i = 0; i < rounds; i++)
        {
            Assert.True(tasks[i].IsCanceled ^ (ran[i] == 1), $"item {i}: cancelled {tasks[i].IsCanceled}, ran {ran[i]} times");
            Assert.True(ran[i] <= 1);
            if (ran[i] == 1)
            {
                Assert.True(tasks[i].IsCompletedSuccessfully);
            }
            sources[i].Dispose();
        }
    }

    [MethodImplAttribute(MethodImplOptions.NoInlining)]
    private static WeakReference RunAndForget(WorkerPool pool, CancellationToken token)
    {
        Task task = pool.Run(() => { }, token);
        Assert.True(task.Wait(Waits.MustHappenMilliseconds, CancellationToken.None));
        return new WeakReference(task);
    }

    [Fact]
    public void RegistrationIsDisposedWhenTheItemRuns_NothingLeaksIntoALongLivedToken()
    {
        using var pool = NewPool();
        using var longLived = new CancellationTokenSource();
        WeakReference task = RunAndForget(pool, longLived.Token);
        Waits.Until(() =>
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            return !task.IsAlive;
        }, "the completed task to be collectable while its token lives on");
    }

    [Fact]
    public void ShutdownCancellingPending_CancelsRunTasks_AndStillRunsSchedulerTasks()
    {
        var pool = NewPool(maxThreads: 1);
        ManualResetEventSlim gate = Occupy(pool, 1);
        using var cts = new CancellationTokenSource();
        Task runItem = pool.Run(() => { }, cts.Token);
        bool plainRan = false;
        Task plainRunItem = pool.Run(() => plainRan = true); // no token: the slimmer item, cancelled the same way
        ValueTask valueItem = pool.RunAsValueTask(() => { }, cts.Token);
        Task schedulerTask = Task.Factory.StartNew(() => { }, CancellationToken.None, TaskCreationOptions.None, pool.TaskScheduler);
        var shutdown = Task.Run(() => pool.Shutdown(ShutdownMode.CancelPending));
        Waits.Until(() => pool.IsShutdownStarted, "shutdown to start");
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen));
        Assert.True(runItem.IsCanceled, $"run item: {runItem.Status}");
        Assert.True(plainRunItem.IsCanceled, $"run item without a token: {plainRunItem.Status}");
        Assert.False(plainRan);
        Assert.True(valueItem.IsCanceled);
        Assert.True(schedulerTask.IsCompletedSuccessfully, $"scheduler task: {schedulerTask.Status}");
        Assert.Equal(3, shutdown.Result);
        gate.Dispose();
    }

    // ---- Bad input -----------------------------------------------------------------------------------------------------

    [Fact]
    public void NullDelegates_Throw()
    {
        using var pool = NewPool();
        Assert.Throws<ArgumentNullException>(() => { _ = pool.Run((Action)null!); });
        Assert.Throws<ArgumentNullException>(() => { _ = pool.Run((Func<int>)null!); });
        Assert.Throws<ArgumentNullException>(() => { _ = pool.Run((Func<Task>)null!); });
        Assert.Throws<ArgumentNullException>(() => { _ = pool.Run((Func<Task<int>>)null!); });
        Assert.Throws<ArgumentNullException>(() => { _ = pool.RunAsValueTask(null!); });
        Assert.Throws<ArgumentNullException>(() => { _ = pool.RunAsValueTask((Func<int>)null!); });
        Assert.Throws<ArgumentNullException>(() => pool.SynchronizationContext.Post(null!, null));
        Assert.Throws<ArgumentNullException>(() => pool.SynchronizationContext.Send(null!, null));
    }

    [Fact]
    public void CancelledTokenAtCall_ReturnsCancelledTasksWithoutQueueing()
    {
        using var pool = NewPool();
        var token = new CancellationToken(canceled: true);
        bool ran = false;
        Assert.True(pool.Run(() => { ran = true; }, token).IsCanceled);
        Assert.True(pool.Run(() => 1, token).IsCanceled);
        Assert.True(pool.Run(() => Task.CompletedTask, token).IsCanceled);
        Assert.True(pool.Run(() => Task.FromResult(1), token).IsCanceled);
        Assert.True(pool.RunAsValueTask(() => { ran = true; }, token).IsCanceled);
        Assert.True(pool.RunAsValueTask(() => 1, token).IsCanceled);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(0, pool.ThreadCount); // nothing was queued, so no thread was even needed
        Assert.False(ran);
    }

    [Fact]
    public void DisposedPool_Throws()
    {
        var pool = NewPool();
        pool.Dispose();
        Assert.Throws<ObjectDisposedException>(() => { _ = pool.Run(() => { }); });
        Assert.Throws<ObjectDisposedException>(() => { _ = pool.Run(() => 1, new CancellationTokenSource().Token); });
        Assert.Throws<ObjectDisposedException>(() => { _ = pool.Run(() => Task.CompletedTask); });
        Assert.Throws<ObjectDisposedException>(() => { _ = pool.RunAsValueTask(() => { }); });
        Assert.Throws<ObjectDisposedException>(() => { _ = pool.RunAsValueTask(() => 1, new CancellationTokenSource().Token); });
        // Posts and sends are continuations, not new work: they never throw (see WorkerPoolContinuationShutdownTests).
        Assert.Equal(0, pool.RedirectedCallbackCount);
    }
}
