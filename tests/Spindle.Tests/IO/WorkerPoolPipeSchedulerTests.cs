using System;
using System.IO.Pipelines;
using System.Net;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Spindle.Scheduling;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary><see cref="WorkerPoolPipeScheduler"/>: pipe callbacks on the pool, after shutdown elsewhere, a pipe over a pool socket.</summary>
public sealed class WorkerPoolPipeSchedulerTests
{
    [Fact]
    public async Task AReaderOnThePoolsScheduler_ResumesOnThePool()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolPipeSchedulerTests) });
        Assert.Same(pool.PipeScheduler, pool.PipeScheduler);
        Assert.Same(pool, pool.PipeScheduler.Pool);
        var pipe = new Pipe(new PipeOptions(readerScheduler: pool.PipeScheduler, writerScheduler: pool.PipeScheduler,
            useSynchronizationContext: false));
        WorkerPool? resumedOn = null;
        bool builtIn = true;
        Task<int> reader = ReadOneAsync();
        await pipe.Writer.WriteAsync(new byte[] { 1, 2, 3 });
        Assert.Equal(3, await reader.WaitAsync(Waits.MustHappen));
        Assert.Same(pool, resumedOn);
        Assert.False(builtIn);

        async Task<int> ReadOneAsync()
        {
            ReadResult result = await pipe.Reader.ReadAsync();
            resumedOn = WorkerPool.Current;
            builtIn = Thread.CurrentThread.IsThreadPoolThread;
            int length = (int)result.Buffer.Length;
            pipe.Reader.AdvanceTo(result.Buffer.End);
            return length;
        }
    }

    [Fact]
    public void AfterThePoolHasStopped_CallbacksStillRun()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolPipeSchedulerTests) });
        PipeScheduler scheduler = pool.PipeScheduler;
        pool.Dispose();
        using var ran = new ManualResetEventSlim();
        scheduler.Schedule(static state => ((ManualResetEventSlim)state!).Set(), ran);
        Waits.For(ran, "a callback scheduled after the pool stopped");
        Assert.Equal(1, pool.RedirectedCallbackCount);
        Assert.Throws<ArgumentNullException>(() => scheduler.Schedule(null!, null));
        Assert.Throws<ArgumentNullException>(() => new WorkerPoolPipeScheduler(null!));
        Assert.Throws<ArgumentNullException>(() => new WorkerPoolPipeScheduler(null!, preferLocal: true));
    }

    [Theory]
    [InlineData(true, 1)]
    [InlineData(false, 0)]
    public void ACallbackScheduledOnAWorker_GoesToItsLocalQueueOnlyWhenTheSchedulerPrefersLocal(bool preferLocal, int expectedLocal)
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolPipeSchedulerTests), MinThreads = 1, MaxThreads = 1 });
        var scheduler = new WorkerPoolPipeScheduler(pool, preferLocal);
        Assert.Equal(preferLocal, scheduler.PreferLocal);
        Assert.False(pool.PipeScheduler.PreferLocal);
        using var callbackRan = new ManualResetEventSlim();
        int itemThread = 0;
        int callbackThread = 0;
        WorkerPool? callbackPool = null;
        int localAfterSchedule = -1;
        bool ranBeforeTheItemReturned = true;
        using var itemDone = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            itemThread = Environment.CurrentManagedThreadId;
            scheduler.Schedule(_ =>
            {
                callbackThread = Environment.CurrentManagedThreadId;
                callbackPool = WorkerPool.Current;
                callbackRan.Set();
            }, null);
            localAfterSchedule = Worker.Current!.Local.Ring.Count;
            ranBeforeTheItemReturned = callbackRan.IsSet;
            itemDone.Set();
        });
        Waits.For(callbackRan, "the scheduled callback");
        Waits.For(itemDone, "the item that scheduled it");
        Assert.Equal(expectedLocal, localAfterSchedule);
        Assert.False(ranBeforeTheItemReturned, "the callback ran after the item that scheduled it, not inline");
        Assert.Same(pool, callbackPool);
        Assert.Equal(itemThread, callbackThread); // the pool's only worker
    }

    [Fact]
    public void ALocalScheduler_CalledOffThePool_RunsTheCallbackOnThePool()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolPipeSchedulerTests) });
        var scheduler = new WorkerPoolPipeScheduler(pool, preferLocal: true);
        WorkerPool? ranOn = null;
        using var ran = new ManualResetEventSlim();
        scheduler.Schedule(_ =>
        {
            ranOn = WorkerPool.Current;
            ran.Set();
        }, null);
        Waits.For(ran, "a callback scheduled from a thread outside the pool");
        Assert.Same(pool, ranOn);
    }

    [Fact]
    public void ACallbackQueuedWhenShutdownCancelsPendingWork_StillRuns()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolPipeSchedulerTests), MinThreads = 1, MaxThreads = 1 });
        using var gate = new ManualResetEventSlim();
        using var holding = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ =>
        {
            holding.Set();
            gate.Wait(Waits.MustHappen);
        });
        Waits.For(holding, "the item holding the only worker");
        int userRan = 0;
        using var callbackRan = new ManualResetEventSlim();
        pool.QueueUserWorkItem(_ => Interlocked.Increment(ref userRan));
        pool.PipeScheduler.Schedule(static state => ((ManualResetEventSlim)state!).Set(), callbackRan);

        // The shutdown finds both queued behind the busy worker: it cancels the user item and keeps the pipe's
        // callback, which resumes a reader or writer and so must run.
        Task<int> shutdown = pool.ShutdownAsync(ShutdownMode.CancelPending);
        gate.Set();
        Assert.True(shutdown.Wait(Waits.MustHappen), "the pool stopped");
        Assert.Equal(1, shutdown.Result);
        Assert.True(callbackRan.IsSet, "the pipe callback ran before the pool stopped");
        Assert.Equal(0, Volatile.Read(ref userRan));
    }

    [Fact]
    public async Task APipeReaderOverAPoolSocketStream_ReadsWhatThePeerSent()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(WorkerPoolPipeSchedulerTests) });
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        using var client = new PoolSocket(pool);
        ValueTask<PoolSocket> accept = listener.AcceptAsync();
        await client.ConnectAsync(listener.Socket.LocalEndPoint!).AsTask().WaitAsync(Waits.MustHappen);
        using PoolSocket server = await accept.AsTask().WaitAsync(Waits.MustHappen);
        PipeReader reader = PipeReader.Create(server.GetStream(ownsSocket: false));
        await client.SendAsync(new byte[] { 7, 8, 9, 10 });
        client.Socket.Shutdown(System.Net.Sockets.SocketShutdown.Send);
        long total = 0;
        while (true)
        {
            ReadResult result = await reader.ReadAsync().AsTask().WaitAsync(Waits.MustHappen);
            total += result.Buffer.Length;
            reader.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                break;
            }
        }
        Assert.Equal(4, total);
        await reader.CompleteAsync();
    }
}
