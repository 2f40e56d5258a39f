using System;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// Receives after a receive that took everything there was: on the pool's driver such a receive waits for readiness
/// without a first attempt unless an event was reported since, and it must still get every byte that arrives, in
/// order, whether the peer sends before or after the call; a receive that filled its buffer, or read the end of the
/// stream or an error behind its bytes, is not such a receive. Every test runs on the driver and on the runtime's engine. Bounds are generous.
/// </summary>
public abstract class PoolSocketReceiveTests
{
    /// <summary>Whether this run's pools leave the driver aside.</summary>
    protected abstract bool RuntimeEngine { get; }

    private WorkerPool NewPool()
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = GetType().Name, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        pool.SocketsUseRuntimeEngine = RuntimeEngine;
        return pool;
    }

    [Fact]
    public async Task ShortMessages_AreEachReceivedWhole_WhetherSentBeforeOrAfterTheReceiveStarts()
    {
        using WorkerPool pool = NewPool();
        var (client, server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            byte[] buffer = new byte[64]; // longer than any message: every receive takes all there is
            for (int round = 0; round < 2_000; round++)
            {
                int length = 1 + round % 32;
                byte[] message = new byte[length];
                message.AsSpan().Fill((byte)round);
                int received;
                if (round % 2 == 0)
                {
                    // The peer's bytes may be in the socket before the poller has reported them, or after.
                    await client.SendAsync(message).AsTask().WaitAsync(Waits.MustHappen);
                    received = await server.ReceiveAsync(buffer).AsTask().WaitAsync(Waits.MustHappen);
                }
                else
                {
                    ValueTask<int> pending = server.ReceiveAsync(buffer);
                    await client.SendAsync(message).AsTask().WaitAsync(Waits.MustHappen);
                    received = await pending.AsTask().WaitAsync(Waits.MustHappen);
                }
                if (received < length)
                {
                    // Loopback delivers a short send in one piece; should it not, the rest follows.
                    await SocketPairs.ReceiveExactlyAsync(server, buffer.AsMemory(received, length - received));
                    received = length;
                }
                Assert.Equal(length, received);
                Assert.True(buffer.AsSpan(0, length).SequenceEqual(message), $"round {round}: the bytes differ");
            }
        }
    }

    [Fact]
    public async Task AReceiveReadTheMomentItCompletes_LeavesTheNextReceiveAwaitable()
    {
        // The awaiter of every other receive polls for completion and reads the result the moment it sees it, racing
        // the worker that completes it; the next receive is awaited the usual way, registering a continuation while
        // it is pending. Whatever the completing worker still does after publishing the outcome must not reach the
        // next call: each of its receives completes with its own byte.
        using WorkerPool pool = NewPool();
        var (client, server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            byte[] buffer = new byte[16];
            byte[] message = new byte[1];
            int rounds = Stress.Scale(4_000, 400_000);
            for (int round = 0; round < rounds; round++)
            {
                message[0] = (byte)round;
                ValueTask<int> pending = server.ReceiveAsync(buffer);
                if (round % 2 == 0)
                {
                    await client.SendAsync(message).AsTask().WaitAsync(Waits.MustHappen);
                    var waited = System.Diagnostics.Stopwatch.StartNew();
                    var spinner = new System.Threading.SpinWait();
                    while (!pending.IsCompleted)
                    {
                        if (waited.Elapsed >= Waits.MustHappen)
                        {
                            Assert.Fail($"round {round}: the receive never completed");
                        }
                        spinner.SpinOnce(sleep1Threshold: -1);
                    }
                    Assert.Equal(1, pending.Result);
                }
                else
                {
                    Task<int> awaited = pending.AsTask();
                    await client.SendAsync(message).AsTask().WaitAsync(Waits.MustHappen);
                    Assert.Equal(1, await awaited.WaitAsync(Waits.MustHappen));
                }
                Assert.Equal((byte)round, buffer[0]);
            }
        }
    }

    [Fact]
    public async Task AReceiveThatFillsItsBuffer_LeavesTheRestToTheNextReceive_WithoutAnotherEvent()
    {
        using WorkerPool pool = NewPool();
        var (client, server) = await SocketPairs.ConnectAsync(pool);
        using (client)
        using (server)
        {
            byte[] sent = new byte[100];
            for (int i = 0; i < sent.Length; i++)
            {
                sent[i] = (byte)i;
            }
            await client.SendAsync(sent).AsTask().WaitAsync(Waits.MustHappen);
            await Task.Delay(50, TestContext.Current.CancellationToken); // the poller has reported the bytes: no event is due any more

            // Each receive fills its 10 bytes, so none may wait for readiness first: the peer sends nothing more.
            byte[] received = new byte[sent.Length];
            for (int offset = 0; offset < received.Length; offset += 10)
            {
                int count = await server.ReceiveAsync(received.AsMemory(offset, 10)).AsTask().WaitAsync(Waits.MustHappen);
                Assert.Equal(10, count);
            }
            Assert.Equal(sent, received);
        }
    }

    [Fact]
    public async Task TheLastBytesAndTheEndOfTheStream_ReportedBeforeTheReceive_AreReadAsTheBytesThenZero()
    {
        using WorkerPool pool = NewPool();
        var (client, server) = await SocketPairs.ConnectAsync(pool);
        using (server)
        {
            await client.SendAsync(new byte[] { 1, 2, 3 }).AsTask().WaitAsync(Waits.MustHappen);
            client.Dispose(); // the peer's FIN behind the bytes
            await Task.Delay(50, TestContext.Current.CancellationToken); // the poller has reported both: no event is due any more

            // The first receive takes the bytes and, on Linux, the end of the stream with them; the second must not
            // wait for an event that will never come.
            byte[] buffer = new byte[16];
            Assert.Equal(3, await server.ReceiveAsync(buffer).AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(0, await server.ReceiveAsync(buffer).AsTask().WaitAsync(Waits.MustHappen));
            Assert.Equal(0, await server.ReceiveAsync(buffer).AsTask().WaitAsync(Waits.MustHappen));
        }
    }

    [Fact]
    public async Task TheLastBytesAndAReset_ReportedBeforeTheReceive_EndTheNextReceive_WithoutAnotherEvent()
    {
        using WorkerPool pool = NewPool();
        var (client, server) = await SocketPairs.ConnectAsync(pool);
        using (server)
        {
            await client.SendAsync(new byte[] { 1, 2, 3 }).AsTask().WaitAsync(Waits.MustHappen);
            client.Socket.LingerState = new System.Net.Sockets.LingerOption(true, 0);
            client.Dispose(); // a reset behind the bytes
            await Task.Delay(50, TestContext.Current.CancellationToken);

            // Whatever the kernel keeps of the bytes, the receives end: with data, zero or the reset, never by waiting.
            byte[] buffer = new byte[16];
            for (int i = 0; i < 3; i++)
            {
                try
                {
                    if (await server.ReceiveAsync(buffer).AsTask().WaitAsync(Waits.MustHappen) == 0)
                    {
                        break;
                    }
                }
                catch (System.Net.Sockets.SocketException e) when (e.SocketErrorCode == System.Net.Sockets.SocketError.ConnectionReset)
                {
                    break;
                }
            }
        }
    }
}

/// <summary><see cref="PoolSocketReceiveTests"/> on the pool's own driver.</summary>
public sealed class PoolSocketReceiveDriverTests : PoolSocketReceiveTests
{
    protected override bool RuntimeEngine => false;
}

/// <summary><see cref="PoolSocketReceiveTests"/> on the runtime's socket engine.</summary>
public sealed class PoolSocketReceiveRuntimeEngineTests : PoolSocketReceiveTests
{
    protected override bool RuntimeEngine => true;
}
