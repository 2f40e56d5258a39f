using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Bad input to every public member: null callbacks, use after shutdown, undefined enum values. Each is rejected at
/// the call with the documented exception, before any state changes.
/// </summary>
public sealed class WorkerPoolArgumentTests
{
    private static WorkerPool NewPool() => new(new WorkerPoolOptions { ExceptionPolicy = UnhandledExceptionPolicy.Report });

    private sealed class NoopItem : IWorkItem
    {
        public void Execute()
        {
        }
    }

    /// <summary>Every queueing method, called with a valid callback.</summary>
    public static TheoryData<string> QueueMethods() =>
    [
        "QueueUserWorkItem(WaitCallback)",
        "QueueUserWorkItem(WaitCallback, object)",
        "QueueUserWorkItem<TState>(Action<TState>, TState, local)",
        "QueueUserWorkItem<TState>(Action<TState>, TState, global)",
        "QueueUserWorkItem<TState>(Action<TState>, value TState, global)",
        "UnsafeQueueUserWorkItem(WaitCallback, object)",
        "UnsafeQueueUserWorkItem<TState>(Action<TState>, TState, local)",
        "UnsafeQueueUserWorkItem<TState>(Action<TState>, value TState, global)",
        "UnsafeQueueUserWorkItem(IWorkItem, local)",
        "UnsafeQueueUserWorkItem(IWorkItem, global)",
    ];

    private static bool Queue(WorkerPool pool, string method) => method switch
    {
        "QueueUserWorkItem(WaitCallback)" => pool.QueueUserWorkItem(static _ => { }),
        "QueueUserWorkItem(WaitCallback, object)" => pool.QueueUserWorkItem(static _ => { }, "state"),
        "QueueUserWorkItem<TState>(Action<TState>, TState, local)" => pool.QueueUserWorkItem(static _ => { }, "state", preferLocal: true),
        "QueueUserWorkItem<TState>(Action<TState>, TState, global)" => pool.QueueUserWorkItem(static _ => { }, "state", preferLocal: false),
        "QueueUserWorkItem<TState>(Action<TState>, value TState, global)" => pool.QueueUserWorkItem(static _ => { }, 42, preferLocal: false),
        "UnsafeQueueUserWorkItem(WaitCallback, object)" => pool.UnsafeQueueUserWorkItem(static _ => { }, "state"),
        "UnsafeQueueUserWorkItem<TState>(Action<TState>, TState, local)" => pool.UnsafeQueueUserWorkItem(static _ => { }, "state", preferLocal: true),
        "UnsafeQueueUserWorkItem<TState>(Action<TState>, value TState, global)" => pool.UnsafeQueueUserWorkItem(static _ => { }, 42, preferLocal: false),
        "UnsafeQueueUserWorkItem(IWorkItem, local)" => pool.UnsafeQueueUserWorkItem(new NoopItem(), preferLocal: true),
        "UnsafeQueueUserWorkItem(IWorkItem, global)" => pool.UnsafeQueueUserWorkItem(new NoopItem(), preferLocal: false),
        _ => throw new ArgumentOutOfRangeException(nameof(method), method, null),
    };

    [Fact]
    public void NullCallbacks_Throw_BeforeAnyStateChanges()
    {
        using WorkerPool pool = NewPool();
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.QueueUserWorkItem(null!)).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.QueueUserWorkItem(null!, "state")).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.QueueUserWorkItem<string>(null!, "state", preferLocal: true)).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.QueueUserWorkItem<int>(null!, 1, preferLocal: false)).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem(null!, "state")).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem<string>(null!, "state", preferLocal: false)).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem<int>(null!, 1, preferLocal: true)).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem((IWorkItem)null!, preferLocal: true)).ParamName);
        Assert.Equal("callBack", Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem((IWorkItem)null!, preferLocal: false)).ParamName);

        Assert.Equal(0, pool.ThreadCount);
        Assert.Equal(0, pool.PendingWorkItemCount);
        Assert.False(pool.IsShutdownStarted);
    }

    [Fact]
    public void NullCallbacks_FromAWorker_Throw()
    {
        using WorkerPool pool = NewPool();
        int rejected = 0;
        using var done = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            try
            {
                try
                {
                    pool.QueueUserWorkItem<string>(null!, "state", preferLocal: true);
                }
                catch (ArgumentNullException e) when (e.ParamName == "callBack")
                {
                    rejected++;
                }
                try
                {
                    pool.UnsafeQueueUserWorkItem((IWorkItem)null!, preferLocal: true);
                }
                catch (ArgumentNullException e) when (e.ParamName == "callBack")
                {
                    rejected++;
                }
            }
            finally
            {
                done.Set();
            }
        });
        Waits.For(done, "the item");
        Assert.Equal(2, rejected);
        Assert.Equal(0, pool.PendingWorkItemCount);
    }

    [Theory]
    [MemberData(nameof(QueueMethods))]
    public void QueueMethods_AcceptWorkAndReturnTrue(string method)
    {
        using WorkerPool pool = NewPool();
        Assert.True(Queue(pool, method));
    }

    [Theory]
    [MemberData(nameof(QueueMethods))]
    public void QueueMethods_AfterDispose_ThrowObjectDisposedException(string method)
    {
        using WorkerPool pool = NewPool();
        pool.Dispose();
        Assert.Throws<ObjectDisposedException>(() => Queue(pool, method));
    }

    [Theory]
    [MemberData(nameof(QueueMethods))]
    public void QueueMethods_AfterShutdownCancelPending_ThrowObjectDisposedException(string method)
    {
        using WorkerPool pool = NewPool();
        pool.Shutdown(ShutdownMode.CancelPending);
        Assert.Throws<ObjectDisposedException>(() => Queue(pool, method));
    }

    [Theory]
    [MemberData(nameof(QueueMethods))]
    public void QueueMethods_FromAWorkerAfterShutdownBegan_ThrowObjectDisposedException(string method)
    {
        using WorkerPool pool = NewPool();
        Exception? thrown = null;
        using var done = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            pool.Dispose(); // from inside: starts the shutdown and returns
            try
            {
                Queue(pool, method);
            }
            catch (Exception e)
            {
                thrown = e;
            }
            done.Set();
        });
        Waits.For(done, "the item");
        Waits.RunBounded(pool.Dispose, "Dispose");
        Assert.IsType<ObjectDisposedException>(thrown);
    }

    [Fact]
    public void NullCallback_AfterDispose_IsStillAnArgumentNullException()
    {
        using WorkerPool pool = NewPool();
        pool.Dispose();
        Assert.Throws<ArgumentNullException>(() => pool.QueueUserWorkItem(null!));
        Assert.Throws<ArgumentNullException>(() => pool.UnsafeQueueUserWorkItem((IWorkItem)null!, preferLocal: false));
    }

    [Theory]
    [InlineData(2)]
    [InlineData(-1)]
    [InlineData(int.MaxValue)]
    public void Shutdown_WithAnUndefinedMode_Throws_AndDoesNotShutDown(int mode)
    {
        using WorkerPool pool = NewPool();
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => pool.Shutdown((ShutdownMode)mode));
        Assert.Equal("mode", e.ParamName);
        Assert.False(pool.IsShutdownStarted);
        Assert.True(pool.QueueUserWorkItem(static _ => { }));
    }

    [Fact]
    public void UnhandledException_AcceptsSubscribeAndUnsubscribe()
    {
        using WorkerPool pool = NewPool();
        int calls = 0;
        EventHandler<WorkItemExceptionEventArgs> handler = (_, _) => Interlocked.Increment(ref calls);
        pool.UnhandledException += handler;
        pool.UnhandledException -= handler;
        pool.UnhandledException -= handler; // removing twice is harmless
        using var after = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("reported to nobody"));
        pool.QueueUserWorkItem(_ => after.Set());
        Waits.For(after, "an item after the throwing one");
        Waits.Never(() => Volatile.Read(ref calls) != 0, "a call to an unsubscribed handler");
    }
}
