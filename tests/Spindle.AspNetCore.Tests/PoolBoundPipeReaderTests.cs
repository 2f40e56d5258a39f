using System;
using System.Buffers;
using System.IO.Pipelines;
using System.Threading;
using System.Threading.Tasks;
using Spindle.AspNetCore.Transport;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>The application's end of a connection's input: reads made off the pool complete on the pool.</summary>
public sealed class PoolBoundPipeReaderTests : IDisposable
{
    private readonly WorkerPool _pool = new(new WorkerPoolOptions { Name = "reader" });

    public void Dispose() => _pool.Dispose();

    private Pipe NewPipe() => new(new PipeOptions(readerScheduler: _pool.PipeScheduler, writerScheduler: PipeScheduler.Inline,
        useSynchronizationContext: false));

    [Fact]
    public async Task ReadOffThePool_WithDataAlreadyThere_ContinuesOnAWorkerOfThePool()
    {
        Pipe pipe = NewPipe();
        var reader = new PoolBoundPipeReader(pipe.Reader, _pool);
        await pipe.Writer.WriteAsync("data"u8.ToArray());

        Assert.False(reader.TryRead(out _), "off the pool, a synchronous read finds nothing");
        (WorkerPool? resumedOn, byte[] data) = await ReadObservingWhereItResumes(reader).WaitAsync(TestServer.Generous);

        Assert.Same(_pool, resumedOn);
        Assert.Equal("data"u8.ToArray(), data);
    }

    /// <summary>Awaits the reader's own value task, and notes the pool of the thread its continuation runs on.</summary>
    private static async Task<(WorkerPool? ResumedOn, byte[] Data)> ReadObservingWhereItResumes(PoolBoundPipeReader reader)
    {
        ReadResult result = await reader.ReadAsync();
        WorkerPool? resumedOn = WorkerPool.Current;
        byte[] data = result.Buffer.ToArray();
        reader.AdvanceTo(result.Buffer.End);
        return (resumedOn, data);
    }

    [Fact]
    public async Task ReadOffThePool_BeforeTheData_ContinuesOnAWorkerOfThePoolOnceItArrives()
    {
        Pipe pipe = NewPipe();
        var reader = new PoolBoundPipeReader(pipe.Reader, _pool);

        Task<(WorkerPool? ResumedOn, byte[] Data)> read = ReadObservingWhereItResumes(reader);
        Assert.False(read.IsCompleted, "no data yet");
        await pipe.Writer.WriteAsync("late"u8.ToArray());
        (WorkerPool? resumedOn, byte[] data) = await read.WaitAsync(TestServer.Generous);

        Assert.Same(_pool, resumedOn);
        Assert.Equal("late"u8.ToArray(), data);
    }

    [Fact]
    public async Task ReadOnThePool_IsThePipesOwnAndTryReadSeesTheData()
    {
        Pipe pipe = NewPipe();
        var reader = new PoolBoundPipeReader(pipe.Reader, _pool);
        await pipe.Writer.WriteAsync("here"u8.ToArray());

        (bool tried, byte[] read) = await _pool.Run(() =>
        {
            bool found = reader.TryRead(out ReadResult result);
            byte[] bytes = result.Buffer.ToArray();
            reader.AdvanceTo(result.Buffer.End);
            return (found, bytes);
        }).WaitAsync(TestServer.Generous);

        Assert.True(tried);
        Assert.Equal("here"u8.ToArray(), read);
    }

    [Fact]
    public async Task ReadOffThePool_OfACompletedPipe_ReportsCompletionAndFailures()
    {
        Pipe pipe = NewPipe();
        var reader = new PoolBoundPipeReader(pipe.Reader, _pool);
        await pipe.Writer.CompleteAsync();

        ReadResult result = await reader.ReadAsync().AsTask().WaitAsync(TestServer.Generous);
        Assert.True(result.IsCompleted);
        reader.AdvanceTo(result.Buffer.End);

        Pipe failed = NewPipe();
        var failing = new PoolBoundPipeReader(failed.Reader, _pool);
        await failed.Writer.CompleteAsync(new InvalidOperationException("broken"));
        InvalidOperationException e = await Assert.ThrowsAsync<InvalidOperationException>(() => failing.ReadAsync().AsTask().WaitAsync(TestServer.Generous));
        Assert.Equal("broken", e.Message);
    }

    [Fact]
    public async Task SecondReadOffThePool_WhileOneIsPending_Throws()
    {
        Pipe pipe = NewPipe();
        var reader = new PoolBoundPipeReader(pipe.Reader, _pool);

        Task<ReadResult> first = reader.ReadAsync().AsTask();

        InvalidOperationException? overlap = null;
        try
        {
            _ = reader.ReadAsync().AsTask(); // throws at the call
        }
        catch (InvalidOperationException e)
        {
            overlap = e;
        }

        Assert.NotNull(overlap);
        reader.CancelPendingRead();
        ReadResult result = await first.WaitAsync(TestServer.Generous);
        Assert.True(result.IsCanceled);
    }
}
