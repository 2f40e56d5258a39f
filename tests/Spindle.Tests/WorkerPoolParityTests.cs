using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Where a method has the built-in pool's signature it behaves like the built-in pool: its parameter names and the
/// exceptions bad arguments get (checked against <see cref="ThreadPool"/> itself), the edges it accepts, the queue it
/// uses, and what the pool's <see cref="TaskScheduler"/> tells <see cref="Parallel"/> about its concurrency. Where a
/// method of another shape does the same job (<see cref="WorkerPool.SetThreadLimits(int, int)"/>), its edges are stated
/// here too, the deliberate differences included.
/// </summary>
public sealed class WorkerPoolParityTests
{
    private static WorkerPool NewPool(int minThreads, int maxThreads) => new(new WorkerPoolOptions
    {
        Name = nameof(WorkerPoolParityTests),
        MinThreads = minThreads,
        MaxThreads = maxThreads,
        ExceptionPolicy = UnhandledExceptionPolicy.Report,
    });

    [Fact]
    public void QueueUserWorkItemWithWaitCallback_FromAWorker_UsesTheGlobalQueue_AsTheBuiltInPoolDoes()
    {
        using WorkerPool pool = NewPool(1, 1);
        using var done = new CountdownEvent(3);
        long globalWithState = -1, globalWithoutState = -1, globalUnsafe = -1;
        pool.QueueUserWorkItem(_ =>
        {
            // The only worker is here, so whatever is queued now stays where it was put until this item returns.
            pool.QueueUserWorkItem(_ => done.Signal(), null);
            globalWithState = pool.GlobalQueueCount;
            pool.QueueUserWorkItem(_ => done.Signal());
            globalWithoutState = pool.GlobalQueueCount;
            pool.UnsafeQueueUserWorkItem(_ => done.Signal(), null);
            globalUnsafe = pool.GlobalQueueCount;
        }, null);
        Waits.For(done, "the queued items");
        Assert.Equal(1, globalWithState);
        Assert.Equal(2, globalWithoutState);
        Assert.Equal(3, globalUnsafe);
    }

    [Fact]
    public void PreferLocalOverloads_FromAWorker_StillUseTheWorkersLocalQueue()
    {
        using WorkerPool pool = NewPool(1, 1);
        using var done = new CountdownEvent(2);
        long global = -1;
        pool.QueueUserWorkItem(_ =>
        {
            pool.QueueUserWorkItem(static (CountdownEvent d) => d.Signal(), done, preferLocal: true);
            pool.QueueUserWorkItem(static (CountdownEvent d) => d.Signal(), done, WorkItemOptions.PreferLocal);
            global = pool.GlobalQueueCount;
        }, null);
        Waits.For(done, "the queued items");
        Assert.Equal(0, global);
    }

    [Theory]
    [InlineData(1, 1)]
    [InlineData(1, 3)]
    [InlineData(2, WorkerPoolOptions.MaxThreadLimit)]
    [InlineData(64, WorkerPoolOptions.MaxThreadLimit)]
    public void TaskSchedulerMaximumConcurrencyLevel_IsWhatThePoolRunsAtOnce(int minThreads, int maxThreads)
    {
        using WorkerPool pool = NewPool(minThreads, maxThreads);
        int expected = Math.Min(maxThreads, Math.Max(minThreads, Environment.ProcessorCount));
        Assert.Equal(expected, pool.TaskScheduler.MaximumConcurrencyLevel);
        Assert.True(pool.TaskScheduler.MaximumConcurrencyLevel <= pool.MaxThreads);
    }

    [Fact]
    public void TaskSchedulerMaximumConcurrencyLevel_FollowsSetThreadLimits()
    {
        using WorkerPool pool = NewPool(1, WorkerPoolOptions.MaxThreadLimit);
        pool.SetThreadLimits(1, 1);
        Assert.Equal(1, pool.TaskScheduler.MaximumConcurrencyLevel);
        pool.SetThreadLimits(Environment.ProcessorCount + 3, WorkerPoolOptions.MaxThreadLimit);
        Assert.Equal(Environment.ProcessorCount + 3, pool.TaskScheduler.MaximumConcurrencyLevel);
    }

    [Fact]
    public void ParallelFor_OverThePoolsScheduler_RunsEveryIterationOnce()
    {
        using WorkerPool pool = NewPool(1, WorkerPoolOptions.MaxThreadLimit);
        var hits = new int[100_000];
        int onPool = 0;
        Parallel.For(0, hits.Length, new ParallelOptions { TaskScheduler = pool.TaskScheduler }, i =>
        {
            Interlocked.Increment(ref hits[i]);
            if (WorkerPool.Current == pool)
            {
                Interlocked.Increment(ref onPool);
            }
        });
        Assert.All(hits, hit => Assert.Equal(1, hit));
        Assert.True(onPool > 0, "the pool's workers took part");
    }

    /// <summary>
    /// The pool's members with the built-in pool's name and parameter types (an <see cref="IWorkItem"/> standing for an
    /// <see cref="IThreadPoolWorkItem"/>): every one the pool has. Its <c>UnsafeRegisterWaitForSingleObject</c> and
    /// <c>UnsafeQueueNativeOverlapped</c> have no counterpart here.
    /// </summary>
    private static readonly string[] s_mirroredMembers =
    [
        "QueueUserWorkItem(System.Threading.WaitCallback)",
        "QueueUserWorkItem(System.Threading.WaitCallback, System.Object)",
        "QueueUserWorkItem(System.Action`1[!!0], !!0, System.Boolean)",
        "UnsafeQueueUserWorkItem(System.Threading.WaitCallback, System.Object)",
        "UnsafeQueueUserWorkItem(System.Action`1[!!0], !!0, System.Boolean)",
        "UnsafeQueueUserWorkItem(System.Threading.IThreadPoolWorkItem, System.Boolean)",
        "RegisterWaitForSingleObject(System.Threading.WaitHandle, System.Threading.WaitOrTimerCallback, System.Object, System.Int32, System.Boolean)",
        "RegisterWaitForSingleObject(System.Threading.WaitHandle, System.Threading.WaitOrTimerCallback, System.Object, System.Int64, System.Boolean)",
        "RegisterWaitForSingleObject(System.Threading.WaitHandle, System.Threading.WaitOrTimerCallback, System.Object, System.UInt32, System.Boolean)",
        "RegisterWaitForSingleObject(System.Threading.WaitHandle, System.Threading.WaitOrTimerCallback, System.Object, System.TimeSpan, System.Boolean)",
    ];

    private static string Describe(Type type) => type switch
    {
        _ when type == typeof(IWorkItem) => typeof(IThreadPoolWorkItem).FullName!,
        { IsGenericMethodParameter: true } => "!!" + type.GenericParameterPosition,
        { IsGenericType: true } => $"{type.GetGenericTypeDefinition().FullName}[{string.Join(", ", type.GetGenericArguments().Select(Describe))}]",
        _ => type.FullName!,
    };

    private static string Describe(MethodInfo method) =>
        $"{method.Name}({string.Join(", ", method.GetParameters().Select(p => Describe(p.ParameterType)))})";

    [Fact]
    public void MirroredMembers_HaveTheBuiltInPoolsParameterNames()
    {
        Dictionary<string, MethodInfo> builtIn = typeof(ThreadPool)
            .GetMethods(BindingFlags.Public | BindingFlags.Static)
            .ToDictionary(Describe);
        var mirrored = new List<string>();
        foreach (MethodInfo method in typeof(WorkerPool).GetMethods(BindingFlags.Public | BindingFlags.Instance))
        {
            if (method.IsSpecialName || !builtIn.TryGetValue(Describe(method), out MethodInfo? counterpart))
            {
                continue;
            }
            mirrored.Add(Describe(method));
            Assert.Equal(
                counterpart.GetParameters().Select(p => p.Name),
                method.GetParameters().Select(p => p.Name));
        }
        Assert.Equal(s_mirroredMembers.Order(), mirrored.Order());

        MethodInfo unregister = typeof(RegisteredWait).GetMethod(nameof(RegisteredWait.Unregister))!;
        MethodInfo builtInUnregister = typeof(RegisteredWaitHandle).GetMethod(nameof(RegisteredWaitHandle.Unregister))!;
        Assert.Equal(builtInUnregister.GetParameters().Select(p => p.Name), unregister.GetParameters().Select(p => p.Name));
    }

    /// <summary>A task that is also a work item, of both pools: neither may queue it.</summary>
    private sealed class TaskAndWorkItem : Task, IWorkItem, IThreadPoolWorkItem
    {
        public int Executed;

        public TaskAndWorkItem()
            : base(static () => { })
        {
        }

        public void Execute() => Interlocked.Increment(ref Executed);
    }

    /// <summary>A wait handle with no OS handle: its <see cref="WaitHandle.SafeWaitHandle"/> is invalid.</summary>
    private sealed class HandleLessWaitHandle : WaitHandle
    {
    }

    /// <summary>A bad call to the built-in pool and the same call to a pool, each of which must throw before doing anything.</summary>
    public sealed record BadCall(string Name, Type Exception, string ParamName, Action<WorkerPool> Spindle, Action BuiltIn)
    {
        public override string ToString() => Name;
    }

    private static readonly WaitOrTimerCallback s_waitCallback = static (_, _) => { };

    private static readonly ManualResetEvent s_handle = new(false);

    public static TheoryData<BadCall> BadCalls()
    {
        WaitOrTimerCallback callback = s_waitCallback;
        ManualResetEvent handle = s_handle;
        return new TheoryData<BadCall>
        {
            new BadCall("QueueUserWorkItem(null)", typeof(ArgumentNullException), "callBack",
                p => p.QueueUserWorkItem(null!), () => ThreadPool.QueueUserWorkItem(null!)),
            new BadCall("QueueUserWorkItem(null, state)", typeof(ArgumentNullException), "callBack",
                p => p.QueueUserWorkItem(null!, "state"), () => ThreadPool.QueueUserWorkItem(null!, "state")),
            new BadCall("QueueUserWorkItem<T>(null, state, true)", typeof(ArgumentNullException), "callBack",
                p => p.QueueUserWorkItem<string>(null!, "state", preferLocal: true), () => ThreadPool.QueueUserWorkItem<string>(null!, "state", preferLocal: true)),
            new BadCall("QueueUserWorkItem<T>(null, state, false)", typeof(ArgumentNullException), "callBack",
                p => p.QueueUserWorkItem<int>(null!, 1, preferLocal: false), () => ThreadPool.QueueUserWorkItem<int>(null!, 1, preferLocal: false)),
            new BadCall("UnsafeQueueUserWorkItem(null, state)", typeof(ArgumentNullException), "callBack",
                p => p.UnsafeQueueUserWorkItem(null!, "state"), () => ThreadPool.UnsafeQueueUserWorkItem(null!, "state")),
            new BadCall("UnsafeQueueUserWorkItem<T>(null, state, true)", typeof(ArgumentNullException), "callBack",
                p => p.UnsafeQueueUserWorkItem<string>(null!, "state", preferLocal: true), () => ThreadPool.UnsafeQueueUserWorkItem<string>(null!, "state", preferLocal: true)),
            new BadCall("UnsafeQueueUserWorkItem(null work item, false)", typeof(ArgumentNullException), "callBack",
                p => p.UnsafeQueueUserWorkItem((IWorkItem)null!, preferLocal: false), () => ThreadPool.UnsafeQueueUserWorkItem((IThreadPoolWorkItem)null!, preferLocal: false)),
            new BadCall("UnsafeQueueUserWorkItem(task, true)", typeof(ArgumentOutOfRangeException), "callBack",
                p => p.UnsafeQueueUserWorkItem((IWorkItem)new TaskAndWorkItem(), preferLocal: true), () => ThreadPool.UnsafeQueueUserWorkItem((IThreadPoolWorkItem)new TaskAndWorkItem(), preferLocal: true)),
            new BadCall("RegisterWaitForSingleObject(null, int)", typeof(ArgumentNullException), "waitObject",
                p => p.RegisterWaitForSingleObject(null!, callback, null, 0, true), () => ThreadPool.RegisterWaitForSingleObject(null!, callback, null, 0, true)),
            new BadCall("RegisterWaitForSingleObject(null, long)", typeof(ArgumentNullException), "waitObject",
                p => p.RegisterWaitForSingleObject(null!, callback, null, 0L, true), () => ThreadPool.RegisterWaitForSingleObject(null!, callback, null, 0L, true)),
            new BadCall("RegisterWaitForSingleObject(null, uint)", typeof(ArgumentNullException), "waitObject",
                p => p.RegisterWaitForSingleObject(null!, callback, null, 0u, true), () => ThreadPool.RegisterWaitForSingleObject(null!, callback, null, 0u, true)),
            new BadCall("RegisterWaitForSingleObject(null, TimeSpan)", typeof(ArgumentNullException), "waitObject",
                p => p.RegisterWaitForSingleObject(null!, callback, null, TimeSpan.Zero, true), () => ThreadPool.RegisterWaitForSingleObject(null!, callback, null, TimeSpan.Zero, true)),
            new BadCall("RegisterWaitForSingleObject(handle, null callback)", typeof(ArgumentNullException), "callBack",
                p => p.RegisterWaitForSingleObject(handle, null!, null, 0, true), () => ThreadPool.RegisterWaitForSingleObject(handle, null!, null, 0, true)),
            new BadCall("RegisterWaitForSingleObject(int -2)", typeof(ArgumentOutOfRangeException), "millisecondsTimeOutInterval",
                p => p.RegisterWaitForSingleObject(handle, callback, null, -2, true), () => ThreadPool.RegisterWaitForSingleObject(handle, callback, null, -2, true)),
            new BadCall("RegisterWaitForSingleObject(long -2)", typeof(ArgumentOutOfRangeException), "millisecondsTimeOutInterval",
                p => p.RegisterWaitForSingleObject(handle, callback, null, -2L, true), () => ThreadPool.RegisterWaitForSingleObject(handle, callback, null, -2L, true)),
            new BadCall("RegisterWaitForSingleObject(long int.MaxValue + 1)", typeof(ArgumentOutOfRangeException), "millisecondsTimeOutInterval",
                p => p.RegisterWaitForSingleObject(handle, callback, null, int.MaxValue + 1L, true), () => ThreadPool.RegisterWaitForSingleObject(handle, callback, null, int.MaxValue + 1L, true)),
            new BadCall("RegisterWaitForSingleObject(uint int.MaxValue + 1)", typeof(ArgumentOutOfRangeException), "millisecondsTimeOutInterval",
                p => p.RegisterWaitForSingleObject(handle, callback, null, int.MaxValue + 1u, true), () => ThreadPool.RegisterWaitForSingleObject(handle, callback, null, int.MaxValue + 1u, true)),
            new BadCall("RegisterWaitForSingleObject(TimeSpan -2 ms)", typeof(ArgumentOutOfRangeException), "timeout",
                p => p.RegisterWaitForSingleObject(handle, callback, null, TimeSpan.FromMilliseconds(-2), true), () => ThreadPool.RegisterWaitForSingleObject(handle, callback, null, TimeSpan.FromMilliseconds(-2), true)),
            new BadCall("RegisterWaitForSingleObject(TimeSpan int.MaxValue + 1 ms)", typeof(ArgumentOutOfRangeException), "timeout",
                p => p.RegisterWaitForSingleObject(handle, callback, null, TimeSpan.FromMilliseconds((double)int.MaxValue + 1), true), () => ThreadPool.RegisterWaitForSingleObject(handle, callback, null, TimeSpan.FromMilliseconds((double)int.MaxValue + 1), true)),
            // The timeout is checked before the handle and the callback.
            new BadCall("RegisterWaitForSingleObject(null, null, int -2)", typeof(ArgumentOutOfRangeException), "millisecondsTimeOutInterval",
                p => p.RegisterWaitForSingleObject(null!, null!, null, -2, true), () => ThreadPool.RegisterWaitForSingleObject(null!, null!, null, -2, true)),
            new BadCall("RegisterWaitForSingleObject(null, null, TimeSpan -2 ms)", typeof(ArgumentOutOfRangeException), "timeout",
                p => p.RegisterWaitForSingleObject(null!, null!, null, TimeSpan.FromMilliseconds(-2), true), () => ThreadPool.RegisterWaitForSingleObject(null!, null!, null, TimeSpan.FromMilliseconds(-2), true)),
        };
    }

    [Theory]
    [MemberData(nameof(BadCalls))]
    public void BadArguments_ThrowWhatTheBuiltInPoolThrows_WithItsParameterName(BadCall call)
    {
        using WorkerPool pool = NewPool(1, 1);
        Exception builtIn = Assert.ThrowsAny<ArgumentException>(call.BuiltIn);
        Assert.IsType(call.Exception, builtIn);
        Assert.Equal(call.ParamName, ((ArgumentException)builtIn).ParamName);

        Exception spindle = Assert.ThrowsAny<ArgumentException>(() => call.Spindle(pool));
        Assert.IsType(call.Exception, spindle);
        Assert.Equal(call.ParamName, ((ArgumentException)spindle).ParamName);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.Equal(0, pool.RegisteredWaitCount);
    }

    /// <summary>Every method that takes an <see cref="IWorkItem"/>, on the pool and on a lane.</summary>
    public static TheoryData<string, bool> WorkItemMethods() => new()
    {
        { "UnsafeQueueUserWorkItem(IWorkItem, bool)", false },
        { "UnsafeQueueUserWorkItem(IWorkItem, WorkItemOptions)", false },
        { "UnsafeQueueUserWorkItem(IWorkItem, LongRunning)", false },
        { "TryQueueUserWorkItem(IWorkItem, bool)", false },
        { "QueueUserWorkItemAsync(IWorkItem)", false },
        { "UnsafeQueueUserWorkItem(IWorkItem, bool)", true },
        { "UnsafeQueueUserWorkItem(IWorkItem, WorkItemOptions)", true },
        { "TryQueueUserWorkItem(IWorkItem, bool)", true },
        { "QueueUserWorkItemAsync(IWorkItem)", true },
    };

    [Theory]
    [MemberData(nameof(WorkItemMethods))]
    public void ATaskThatIsAWorkItem_IsRefused_AndNeitherRunsNorStarts(string method, bool onLane)
    {
        using WorkerPool pool = NewPool(1, 2);
        WorkTarget target = onLane ? pool.CreateLane(new LaneOptions { Name = "lane", QueueLimit = 4 }) : pool;
        var item = new TaskAndWorkItem();
        Action queue = method switch
        {
            "UnsafeQueueUserWorkItem(IWorkItem, bool)" => () => target.UnsafeQueueUserWorkItem(item, preferLocal: false),
            "UnsafeQueueUserWorkItem(IWorkItem, WorkItemOptions)" => () => target.UnsafeQueueUserWorkItem(item, WorkItemOptions.None),
            "UnsafeQueueUserWorkItem(IWorkItem, LongRunning)" => () => target.UnsafeQueueUserWorkItem(item, WorkItemOptions.LongRunning),
            "TryQueueUserWorkItem(IWorkItem, bool)" => () => target.TryQueueUserWorkItem(item, preferLocal: false),
            "QueueUserWorkItemAsync(IWorkItem)" => () => _ = target.QueueUserWorkItemAsync(item),
            _ => throw new ArgumentOutOfRangeException(nameof(method), method, null),
        };
        Assert.Equal("callBack", Assert.Throws<ArgumentOutOfRangeException>(queue).ParamName);

        using var drained = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => drained.Set());
        Waits.For(drained, "an item queued after the refused one");
        Assert.Equal(0, Volatile.Read(ref item.Executed));
        Assert.Equal(TaskStatus.Created, item.Status);
        Assert.Equal(0, pool.DedicatedThreadCount);
    }

    [Fact]
    public void RegisterWaitForSingleObject_AcceptsWhatTheBuiltInPoolAccepts_AtTheTimeoutEdges()
    {
        using WorkerPool pool = NewPool(1, 2);
        using var handle = new ManualResetEvent(false);
        WaitOrTimerCallback callback = static (_, _) => { };
        RegisteredWait Register(TimeSpan timeout) => pool.RegisterWaitForSingleObject(handle, callback, null, timeout, executeOnlyOnce: true);

        // Whole milliseconds, truncated toward zero, from -1 (infinite) to int.MaxValue.
        RegisteredWait minusOneAndAHalf = Register(TimeSpan.FromMilliseconds(-1.5));
        Assert.Equal(Timeout.InfiniteTimeSpan, minusOneAndAHalf.Timeout);
        RegisteredWait aboveTheMaximum = Register(TimeSpan.FromMilliseconds(int.MaxValue + 0.5));
        Assert.Equal(TimeSpan.FromMilliseconds(int.MaxValue), aboveTheMaximum.Timeout);
        RegisteredWait infiniteUInt = pool.RegisterWaitForSingleObject(handle, callback, null, uint.MaxValue, executeOnlyOnce: true);
        Assert.Equal(Timeout.InfiniteTimeSpan, infiniteUInt.Timeout);
        RegisteredWait maximumLong = pool.RegisterWaitForSingleObject(handle, callback, null, (long)int.MaxValue, executeOnlyOnce: true);
        Assert.Equal(TimeSpan.FromMilliseconds(int.MaxValue), maximumLong.Timeout);

        // A negative fraction of a millisecond is a zero timeout: the callback comes at once, timed out.
        using var timedOut = new ManualResetEventSlim();
        RegisteredWait belowZero = pool.RegisterWaitForSingleObject(handle, (_, t) =>
        {
            if (t)
            {
                timedOut.Set();
            }
        }, null, TimeSpan.FromTicks(-1), executeOnlyOnce: true);
        Assert.Equal(TimeSpan.Zero, belowZero.Timeout);
        Waits.For(timedOut, "the zero timeout");

        foreach (RegisteredWait registration in new[] { minusOneAndAHalf, aboveTheMaximum, infiniteUInt, maximumLong, belowZero })
        {
            Assert.True(registration.Unregister(null));
        }
    }

    [Fact]
    public void Unregister_WithAHandleLessWaitHandle_BlocksUntilTheRunningCallbackReturns()
    {
        using WorkerPool pool = NewPool(2, 2);
        using var handle = new AutoResetEvent(false);
        using var inside = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        int calls = 0;
        RegisteredWait registration = pool.RegisterWaitForSingleObject(handle, (_, _) =>
        {
            Interlocked.Increment(ref calls);
            inside.Set();
            release.Wait(Waits.MustHappen);
        }, null, Timeout.Infinite, executeOnlyOnce: false);
        handle.Set();
        Waits.For(inside, "the callback to start");

        bool returned = false, result = false;
        TestThread unregistering = Waits.Start(() =>
        {
            result = registration.Unregister(new HandleLessWaitHandle());
            Volatile.Write(ref returned, true);
        }, "blocking Unregister");
        Waits.Until(() => registration.IsUnregistered, "Unregister to end the registration");
        Waits.Never(() => Volatile.Read(ref returned), "Unregister returning while the callback runs");
        release.Set();
        unregistering.Join();
        Assert.True(result);

        handle.Set();
        Waits.Never(() => Volatile.Read(ref calls) > 1, "a callback after Unregister");
        Assert.False(registration.Unregister(new HandleLessWaitHandle()));
    }

    [Fact]
    public void Unregister_WithAHandleLessWaitHandle_AndNothingRunning_ReturnsTrue_AndNoCallbackFollows()
    {
        using WorkerPool pool = NewPool(1, 1);
        using var handle = new AutoResetEvent(false);
        int calls = 0;
        RegisteredWait registration = pool.RegisterWaitForSingleObject(handle, (_, _) => Interlocked.Increment(ref calls), null, Waits.MustHappenMilliseconds, executeOnlyOnce: true);
        Assert.True(registration.Unregister(new HandleLessWaitHandle()));
        handle.Set();
        Waits.Never(() => Volatile.Read(ref calls) > 0, "a callback after Unregister");
    }

    [Fact]
    public void Unregister_WithADisposedWaitObject_ThrowsObjectDisposed_AndTheRegistrationStays()
    {
        using WorkerPool pool = NewPool(1, 1);
        using var handle = new AutoResetEvent(false);
        RegisteredWait registration = pool.RegisterWaitForSingleObject(handle, (_, _) => { }, null, Timeout.Infinite, executeOnlyOnce: false);
        var disposed = new ManualResetEvent(false);
        disposed.Dispose();
        Assert.Throws<ObjectDisposedException>(() => registration.Unregister(disposed));
        Assert.False(registration.IsUnregistered);
        using var done = new ManualResetEvent(false);
        Assert.True(registration.Unregister(done));
        Assert.True(done.WaitOne(Waits.MustHappen));
    }

    [Theory]
    [InlineData(WorkerPoolOptions.MaxThreadLimit + 1)]
    [InlineData(int.MaxValue)]
    public void AMaximumAboveTheLimit_IsCappedThere_AsSetMaxThreadsCapsIt(int maxThreads)
    {
        using WorkerPool pool = NewPool(1, 4);
        pool.SetThreadLimits(1, maxThreads);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, pool.MaxThreads);
        Assert.Equal(1, pool.MinThreads);

        using WorkerPool fromOptions = NewPool(1, maxThreads);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, fromOptions.MaxThreads);
    }

    [Fact]
    public void AMinimumAboveTheLimit_IsRefused_AsSetMinThreadsRefusesIt_AndNothingChanges()
    {
        using WorkerPool pool = NewPool(1, 4);
        Assert.Equal("minThreads", Assert.Throws<ArgumentOutOfRangeException>(() =>
            pool.SetThreadLimits(WorkerPoolOptions.MaxThreadLimit + 1, WorkerPoolOptions.MaxThreadLimit + 1)).ParamName);
        Assert.Equal("maxThreads", Assert.Throws<ArgumentOutOfRangeException>(() => pool.SetThreadLimits(0, 0)).ParamName);
        Assert.Equal(1, pool.MinThreads);
        Assert.Equal(4, pool.MaxThreads);

        // The largest minimum is the limit, with any maximum from there up (threads start with the first work).
        using WorkerPool atTheLimit = NewPool(WorkerPoolOptions.MaxThreadLimit, int.MaxValue);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, atTheLimit.MinThreads);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, atTheLimit.MaxThreads);
        Assert.Equal("MinThreads", Assert.Throws<ArgumentOutOfRangeException>(() =>
            NewPool(WorkerPoolOptions.MaxThreadLimit + 1, int.MaxValue)).ParamName);
    }

    [Fact]
    public void AMinimumOfZero_StaysZero_ADeliberateDifference()
    {
        // The built-in pool reads 1 after SetMinThreads(0, ...); here the minimum is the threads kept, and 0 lets an
        // idle pool retire every thread.
        using WorkerPool pool = NewPool(1, 4);
        pool.SetThreadLimits(0, 4);
        Assert.Equal(0, pool.MinThreads);
        using WorkerPool fromOptions = NewPool(0, 4);
        Assert.Equal(0, fromOptions.MinThreads);
    }
}
