using System;
using System.Buffers;
using System.Net;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// Sends: a <see cref="ReadOnlySequence{T}"/> (<see cref="PoolSocket.SendAsync(ReadOnlySequence{byte}, System.Threading.CancellationToken)"/>)
/// goes on the pool's driver in gather <c>sendmsg</c> calls, on the runtime's engine one segment after another; either
/// way the bytes arrive whole and in order, and bad input is refused at the call. A send cancelled part-way leaves the
/// next send whole. Bounds are generous.
/// </summary>
public abstract class PoolSocketSendTests
{
    /// <summary>Whether this run's pools leave the driver aside.</summary>
    protected abstract bool RuntimeEngine { get; }

    private WorkerPool NewPool()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = GetType().Name, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        pool.SocketsUseRuntimeEngine = RuntimeEngine;
        return pool;
    }

    /// <summary>A sequence over <paramref name="bytes"/> cut at <paramref name="lengths"/> (an empty segment where a length is 0).</summary>
    private static ReadOnlySequence<byte> Cut(byte[] bytes, int[] lengths)
    {
        Chunk first = new(bytes.AsMemory(0, lengths[0]));
        Chunk last = first;
        int offset = lengths[0];
        for (int i = 1; i < lengths.Length; i++)
        {
            last = last.Append(bytes.AsMemory(offset, lengths[i]));
            offset += lengths[i];
        }
        Assert.Equal(bytes.Length, offset);
        return new ReadOnlySequence<byte>(first, 0, last, last.Memory.Length);
    }

    [Fact]
    public async Task ASequenceOfManySegments_ArrivesWholeAndInOrder_ThroughPartialSends()
    {
        // 40 segments (more than one gather takes), some empty, some of one byte, 2 MB in all: more than the socket
        // buffers hold while nobody reads, so the send stops part-way through a gather and resumes where it stopped.
        int[] lengths = new int[40];
        var random = new Random(11);
        for (int i = 0; i < lengths.Length; i++)
        {
            lengths[i] = (i % 7) switch { 0 => 0, 1 => 1, 2 => 3, _ => random.Next(1, 120_000) };
        }
        int total = 0;
        foreach (int length in lengths)
        {
            total += length;
        }
        byte[] sent = new byte[total];
        random.NextBytes(sent);
        ReadOnlySequence<byte> buffers = Cut(sent, lengths);
        Assert.False(buffers.IsSingleSegment);

        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            Task<int> send = client.SendAsync(buffers).AsTask();
            await Task.Delay(50); // let the send fill the buffers and wait before anyone reads
            byte[] received = new byte[total];
            await SocketPairs.ReceiveExactlyAsync(server, received);
            Assert.Equal(total, await send.WaitAsync(Waits.MustHappen));
            Assert.True(sent.AsSpan().SequenceEqual(received));

            // The send direction is free again: a second sequence, small enough to leave in one call, follows it.
            byte[] again = [1, 2, 3, 4, 5, 6, 7];
            Assert.Equal(again.Length, await client.SendAsync(Cut(again, [2, 0, 4, 1])).AsTask().WaitAsync(Waits.MustHappen));
            byte[] echo = new byte[again.Length];
            await SocketPairs.ReceiveExactlyAsync(server, echo);
            Assert.Equal(again, echo);
        }
    }

    [Fact]
    public async Task AnEmptySequence_SendsNothing_AndLeavesTheSocketUsable()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            ReadOnlySequence<byte> empty = Cut([], [0, 0, 0]);
            Assert.True(empty.IsEmpty);
            Assert.Equal(0, await client.SendAsync(empty).AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(0, await client.SendAsync(ReadOnlySequence<byte>.Empty).AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(1, await client.SendAsync(Cut([42], [0, 1])).AsTask().WaitAsync(Waits.MustHappen));
            byte[] one = new byte[1];
            await SocketPairs.ReceiveExactlyAsync(server, one);
            Assert.Equal(42, one[0]);
        }
    }

    [Fact]
    public async Task ASequenceLongerThanOneSendTakes_IsRefusedAtTheCall_AndLeavesTheSocketUsable()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            // Two segments of int.MaxValue bytes that are never read: the length check comes before anything else.
            using var huge = new UnreadableMemory();
            Chunk first = new(huge.Memory);
            Chunk last = first.Append(huge.Memory);
            var tooLong = new ReadOnlySequence<byte>(first, 0, last, last.Memory.Length);
            ArgumentOutOfRangeException refused = Assert.Throws<ArgumentOutOfRangeException>(() => { _ = client.SendAsync(tooLong); });
            Assert.Equal("buffers", refused.ParamName);

            Assert.Equal(2, await client.SendAsync(Cut([7, 8], [1, 1])).AsTask().WaitAsync(Waits.MustHappen));
            byte[] two = new byte[2];
            await SocketPairs.ReceiveExactlyAsync(server, two);
            Assert.Equal([7, 8], two);
        }
    }

    [Fact]
    public async Task ASequenceOnADisposedSocket_IsRefusedWithObjectDisposed()
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        server.Dispose();
        client.Dispose();
        Assert.Throws<ObjectDisposedException>(() => { _ = client.SendAsync(Cut([1, 2], [1, 1])); });
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task ASendCancelledPartWay_ThrowsOperationCanceled_AndTheNextSendArrivesWhole(bool sequence)
    {
        using WorkerPool pool = NewPool();
        (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            // 16 MB of zeros while nobody reads, through socket buffers fixed at 64 KB (no autotuning): the kernel takes
            // part of it at the call, and the send waits for room.
            client.Socket.SendBufferSize = 64 << 10;
            server.Socket.ReceiveBufferSize = 64 << 10;
            byte[] zeros = new byte[16 << 20];
            using var cancel = new CancellationTokenSource();
            Task<int> first = sequence
                ? client.SendAsync(Cut(zeros, [1 << 20, 15 << 20]), cancel.Token).AsTask()
                : client.SendAsync(zeros, cancel.Token).AsTask();
            Assert.False(first.IsCompleted, "16 MB fitted in the socket buffers; the test needs a send that waits.");
            cancel.Cancel();
            OperationCanceledException error = await Assert.ThrowsAnyAsync<OperationCanceledException>(() => first.WaitAsync(Waits.MustHappen));
            Assert.Equal(cancel.Token, error.CancellationToken);

            // The next send must carry all of its bytes, after whatever part of the first one the kernel had taken.
            byte[] marker = new byte[64];
            for (int i = 0; i < marker.Length; i++)
            {
                marker[i] = (byte)(i + 1);
            }
            Task<int> second = sequence ? client.SendAsync(Cut(marker, [10, 0, 54])).AsTask() : client.SendAsync(marker).AsTask();
            byte[] buffer = new byte[1 << 16];
            var tail = new System.Collections.Generic.List<byte>();
            long zerosReceived = 0;
            while (tail.Count < marker.Length)
            {
                int received = await server.ReceiveAsync(buffer).AsTask().WaitAsync(Waits.MustHappen);
                Assert.True(received > 0, $"the connection ended with {tail.Count} of the {marker.Length} marker bytes received");
                for (int i = 0; i < received; i++)
                {
                    if (tail.Count == 0 && buffer[i] == 0)
                    {
                        zerosReceived++;
                    }
                    else
                    {
                        tail.Add(buffer[i]);
                    }
                }
            }
            Assert.Equal(marker.Length, await second.WaitAsync(Waits.MustHappen));
            Assert.Equal(marker, tail.ToArray());
            Assert.InRange(zerosReceived, 1, zeros.Length - 1);
        }
    }

    private sealed class Chunk : ReadOnlySequenceSegment<byte>
    {
        public Chunk(ReadOnlyMemory<byte> memory) => Memory = memory;

        public Chunk Append(ReadOnlyMemory<byte> memory)
        {
            var next = new Chunk(memory) { RunningIndex = RunningIndex + Memory.Length };
            Next = next;
            return next;
        }
    }

    /// <summary>Memory of <see cref="int.MaxValue"/> bytes that does not exist: any read of it fails the test.</summary>
    private sealed class UnreadableMemory : MemoryManager<byte>
    {
        public override Memory<byte> Memory => CreateMemory(int.MaxValue);

        public override Span<byte> GetSpan() => throw new InvalidOperationException("The refused sequence was read.");

        public override MemoryHandle Pin(int elementIndex = 0) => throw new InvalidOperationException("The refused sequence was pinned.");

        public override void Unpin()
        {
        }

        protected override void Dispose(bool disposing)
        {
        }
    }
}

/// <summary>The gather tests on the pool's own driver (on platforms without it, on the runtime's engine).</summary>
public sealed class PoolSocketSendDriverTests : PoolSocketSendTests
{
    protected override bool RuntimeEngine => false;
}

/// <summary>The gather tests on the runtime's socket engine, as on platforms without the driver.</summary>
public sealed class PoolSocketSendRuntimeEngineTests : PoolSocketSendTests
{
    protected override bool RuntimeEngine => true;
}
