using System;
using System.Collections.Generic;
using System.Linq;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// <see cref="PoolSocket"/> under races whose outcome the contract fixes however they go: receives cancelled while
/// data arrives lose no byte and keep the order; sends cancelled part-way leave a prefix of each cancelled send and all
/// of each completed one, in order; disposal of either side and the pool's shutdown, while operations are pending in
/// both directions, complete every operation with an outcome the contract allows, and nothing reaches the pool's
/// exception policy. Each round is seeded (the seed is in every failure message); every assertion holds whichever way
/// each race goes, so a run that happens to miss a race still passes. <c>SPINDLE_STRESS=1</c> runs more and larger
/// rounds. Every test runs on the pool's own driver and on the runtime's socket engine.
/// </summary>
public abstract class PoolSocketRaceTests
{
    /// <summary>Whether this run's pools leave the driver aside.</summary>
    protected abstract bool RuntimeEngine { get; }

    private WorkerPool NewPool(List<Exception> reported)
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = GetType().Name, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        pool.SocketsUseRuntimeEngine = RuntimeEngine;
        pool.UnhandledException += (_, e) =>
        {
            lock (reported)
            {
                reported.Add(e.Exception);
            }
        };
        return pool;
    }

    [Fact]
    public async Task ReceivesCancelledWhileDataArrives_LoseNoByte_AndKeepTheOrder()
    {
        int rounds = Stress.Scale(2, 12);
        int pairs = Stress.Scale(4, 8);
        int bytesPerPair = Stress.Scale(192 << 10, 2 << 20);
        for (int round = 0; round < rounds; round++)
        {
            int seed = Environment.TickCount ^ (round * 7919);
            var reported = new List<Exception>();
            using WorkerPool pool = NewPool(reported);
            var transfers = new Task[pairs];
            var sockets = new List<PoolSocket>();
            for (int p = 0; p < pairs; p++)
            {
                (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
                sockets.Add(client);
                sockets.Add(server);
                transfers[p] = CancelledReceiveTransferAsync(client, server, bytesPerPair, seed + p, $"seed {seed}, pair {p}");
            }
            try
            {
                await Task.WhenAll(transfers).WaitAsync(Waits.MustHappen);
                Assert.Empty(reported);
            }
            finally
            {
                sockets.ForEach(static s => s.Dispose());
            }
        }
    }

    /// <summary>
    /// The client sends <paramref name="total"/> bytes of the position pattern in random pieces; after each piece it may
    /// cancel the server's current receive, which races the arrival of that piece. The server receives into random
    /// lengths, each receive with a token of its own (or none), and now and then cancels a receive of its own that is
    /// pending; it starts again after each cancellation, and checks every byte against its position.
    /// </summary>
    private static async Task CancelledReceiveTransferAsync(PoolSocket client, PoolSocket server, int total, int seed, string where)
    {
        CancellationTokenSource? current = null;
        Task sending = Task.Run(async () =>
        {
            var random = new Random(seed);
            byte[] piece = new byte[2 << 10];
            int sent = 0;
            while (sent < total)
            {
                int length = Math.Min(total - sent, random.Next(1, piece.Length + 1));
                for (int i = 0; i < length; i++)
                {
                    piece[i] = PatternAt(sent + i);
                }
                // A cancellation just before the piece races its arrival at a waiting receive; one just after races
                // the receive's completion. A pause now and then lets the server's receive go pending first.
                if (random.Next(2) == 0)
                {
                    Thread.SpinWait(random.Next(50, 5_000));
                }
                int cancel = random.Next(4);
                if (cancel == 0)
                {
                    Volatile.Read(ref current)?.Cancel();
                }
                Assert.Equal(length, await client.SendAsync(piece.AsMemory(0, length)));
                sent += length;
                if (cancel == 1)
                {
                    Volatile.Read(ref current)?.Cancel();
                }
            }
        });

        var receiveRandom = new Random(~seed);
        byte[] buffer = new byte[4 << 10];
        int received = 0;
        int cancelled = 0;
        while (received < total)
        {
            // Never disposed (it has no timer): the sender may cancel it after this receive has moved on.
            CancellationTokenSource? cancellation = receiveRandom.Next(4) == 0 ? null : new CancellationTokenSource();
            Volatile.Write(ref current, cancellation);
            int length = receiveRandom.Next(1, buffer.Length + 1);
            int count;
            try
            {
                ValueTask<int> receive = server.ReceiveAsync(buffer.AsMemory(0, length), cancellation?.Token ?? default);
                if (cancellation is not null && !receive.IsCompleted && receiveRandom.Next(2) == 0)
                {
                    // A pending receive cancelled by its own caller a moment later, while the next piece may be arriving.
                    Thread.SpinWait(receiveRandom.Next(0, 2_000));
                    cancellation.Cancel();
                }
                count = await receive;
            }
            catch (OperationCanceledException e) when (cancellation is not null && e.CancellationToken == cancellation.Token)
            {
                cancelled++;
                continue;
            }
            finally
            {
                Volatile.Write(ref current, null);
            }
            Assert.True(count > 0, $"{where}: the connection ended after {received:N0} of {total:N0} bytes");
            for (int i = 0; i < count; i++)
            {
                if (buffer[i] != PatternAt(received + i))
                {
                    Assert.Fail($"{where}: byte {received + i:N0} is {buffer[i]}, expected {PatternAt(received + i)}: "
                        + $"bytes were lost, repeated or reordered (after {cancelled} cancelled receives)");
                }
            }
            received += count;
        }
        await sending;
    }

    /// <summary>The byte at a stream position: a shifted, dropped or repeated run of bytes breaks the pattern at once.</summary>
    private static byte PatternAt(long position) => (byte)((ulong)(position + 1) * 0x9E3779B97F4A7C15UL >> 56);

    [Fact]
    public async Task SendsCancelledPartWay_LeaveAPrefixOfEachCancelledSend_AndAllOfEachCompletedOne_InOrder()
    {
        int rounds = Stress.Scale(2, 10);
        int sends = Stress.Scale(40, 200);
        for (int round = 0; round < rounds; round++)
        {
            int seed = Environment.TickCount ^ (round * 104729);
            string where = $"seed {seed}";
            var reported = new List<Exception>();
            using WorkerPool pool = NewPool(reported);
            (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
            using (client)
            using (server)
            {
                // Small fixed buffers, so that large sends wait for room while the server reads slowly.
                client.Socket.SendBufferSize = 32 << 10;
                server.Socket.ReceiveBufferSize = 32 << 10;
                var random = new Random(seed);
                var lengths = new int[sends];
                for (int k = 0; k < sends; k++)
                {
                    lengths[k] = random.Next(4) == 0 ? random.Next(1, 512) : random.Next(16 << 10, 256 << 10);
                }
                var completed = new bool[sends];
                CancellationTokenSource? current = null;
                Task sending = Task.Run(async () =>
                {
                    for (int k = 0; k < sends; k++)
                    {
                        byte[] bytes = SendBytes(k, lengths[k]);
                        var cancellation = new CancellationTokenSource(); // never disposed: the reader may cancel it late
                        Volatile.Write(ref current, cancellation);
                        try
                        {
                            Assert.Equal(bytes.Length, await client.SendAsync(bytes, cancellation.Token));
                            completed[k] = true;
                        }
                        catch (OperationCanceledException e) when (e.CancellationToken == cancellation.Token)
                        {
                        }
                        catch (OperationCanceledException e)
                        {
                            Assert.Fail($"{where}: send {k} ended cancelled by a token other than its own (the reader cancels only the send in progress): {e}");
                        }
                        finally
                        {
                            Volatile.Write(ref current, null);
                        }
                    }
                    client.Socket.Shutdown(SocketShutdown.Send); // the end of the stream: the server's receive returns 0
                });

                // The server reads in random lengths, now and then cancelling the send in progress.
                var stream = new List<byte>();
                var readRandom = new Random(~seed);
                byte[] buffer = new byte[64 << 10];
                while (true)
                {
                    int count = await ReceiveWhileSending(
                        server.ReceiveAsync(buffer.AsMemory(0, readRandom.Next(1, buffer.Length + 1))).AsTask(),
                        sending,
                        $"{where}: a receive after {stream.Count:N0} bytes ({completed.Count(static c => c)} sends completed)");
                    if (count == 0)
                    {
                        break;
                    }
                    stream.AddRange(buffer.AsSpan(0, count));
                    if (readRandom.Next(3) == 0)
                    {
                        Volatile.Read(ref current)?.Cancel();
                    }
                }
                await MustComplete(sending, $"{where}: the sends");
                Assert.Empty(reported);
                AssertPrefixesInOrder(stream, lengths, completed, where);
            }
        }
    }

    /// <summary>
    /// Awaits a receive within <see cref="Waits.MustHappen"/>, unless <paramref name="sending"/> fails first: then its
    /// exception is the test's failure (the receive would only wait for bytes that no send will bring).
    /// </summary>
    private static async Task<int> ReceiveWhileSending(Task<int> receive, Task sending, string what)
    {
        Task first = await MustComplete(Task.WhenAny(receive, sending), what);
        if (first == sending && !sending.IsCompletedSuccessfully)
        {
            await sending;
        }
        return await MustComplete(receive, what);
    }

    /// <summary>Awaits <paramref name="task"/> within <see cref="Waits.MustHappen"/>; a timeout names what and the seed.</summary>
    private static async Task<T> MustComplete<T>(Task<T> task, string what)
    {
        await MustComplete((Task)task, what);
        return await task;
    }

    /// <summary>As <see cref="MustComplete{T}(Task{T}, string)"/> for a task without a result.</summary>
    private static async Task MustComplete(Task task, string what)
    {
        try
        {
            await task.WaitAsync(Waits.MustHappen);
        }
        catch (TimeoutException e)
        {
            throw new TimeoutException($"{what} did not complete within {Waits.MustHappen.TotalSeconds:N0} s", e);
        }
    }

    /// <summary>Send <paramref name="index"/>'s bytes: a pattern of the send and the position in it.</summary>
    private static byte[] SendBytes(int index, int length)
    {
        var bytes = new byte[length];
        for (int j = 0; j < length; j++)
        {
            bytes[j] = SendByte(index, j);
        }
        return bytes;
    }

    private static byte SendByte(int index, int position) =>
        (byte)((((ulong)index << 32) | (uint)position) * 0x9E3779B97F4A7C15UL >> 56);

    /// <summary>
    /// The stream must read as, for each send in order, all of its bytes if it completed, or a prefix of them (possibly
    /// empty, never all) if it was cancelled. The cut points of cancelled sends are not known, so every cut that fits
    /// is followed: the set of stream positions each send can end at.
    /// </summary>
    private static void AssertPrefixesInOrder(List<byte> stream, int[] lengths, bool[] completed, string where)
    {
        var positions = new HashSet<int> { 0 };
        for (int k = 0; k < lengths.Length; k++)
        {
            var next = new HashSet<int>();
            foreach (int start in positions)
            {
                int matched = 0;
                int limit = Math.Min(lengths[k], stream.Count - start);
                while (matched < limit && stream[start + matched] == SendByte(k, matched))
                {
                    matched++;
                }
                if (completed[k])
                {
                    if (matched == lengths[k])
                    {
                        next.Add(start + matched);
                    }
                }
                else
                {
                    for (int cut = 0; cut <= Math.Min(matched, lengths[k] - 1); cut++)
                    {
                        next.Add(start + cut);
                    }
                }
            }
            Assert.True(next.Count > 0,
                $"{where}: send {k} ({lengths[k]:N0} bytes, {(completed[k] ? "completed" : "cancelled")}) does not follow the sends before it in the stream");
            positions = next;
        }
        Assert.True(positions.Contains(stream.Count),
            $"{where}: {stream.Count:N0} bytes arrived; the sends account for none of the possible lengths ending at the stream's end");
    }

    [Fact]
    public async Task DisposalAndShutdown_WhileOperationsArePending_CompleteEveryOperation_WithAnOutcomeTheContractAllows()
    {
        int rounds = Stress.Scale(6, 40);
        int pairs = Stress.Scale(8, 24);
        for (int round = 0; round < rounds; round++)
        {
            int seed = Environment.TickCount ^ (round * 15485863);
            string where = $"seed {seed}, round {round}";
            var random = new Random(seed);
            var reported = new List<Exception>();
            WorkerPool pool = NewPool(reported);
            var sockets = new List<PoolSocket>();
            var loops = new List<Task>();
            for (int p = 0; p < pairs; p++)
            {
                (PoolSocket client, PoolSocket server) = await SocketPairs.ConnectAsync(pool);
                sockets.Add(client);
                sockets.Add(server);
                int pairSeed = random.Next();
                // Half the loops run as the pool's own async items, half as outside async code resuming on the pool.
                bool onPool = random.Next(2) == 0;
                loops.Add(Launch(pool, onPool, () => EchoServerAsync(server, pairSeed)));
                loops.Add(Launch(pool, onPool, () => ChattyClientAsync(client, pairSeed)));
            }

            Thread.Sleep(random.Next(0, 15));
            // Dispose some sockets (either side, from another thread at the same time as the traffic), then shut the pool
            // down one way or another while the rest still run.
            var disposer = Task.Run(() =>
            {
                var order = new Random(seed ^ 0x5bd1e995);
                foreach (PoolSocket socket in sockets)
                {
                    if (order.Next(3) == 0)
                    {
                        socket.Dispose();
                    }
                }
            });
            Thread.Sleep(random.Next(0, 5));
            switch (random.Next(3))
            {
                case 0:
                    Assert.True(pool.ShutdownAsync(ShutdownMode.Drain).Wait(Waits.MustHappen), $"{where}: the pool did not drain");
                    break;
                case 1:
                    pool.Shutdown(ShutdownMode.CancelPending);
                    break;
                default:
                    pool.Dispose();
                    break;
            }
            await disposer.WaitAsync(Waits.MustHappen);
            Task all = Task.WhenAll(loops);
            try
            {
                await all.WaitAsync(Waits.MustHappen);
            }
            catch (TimeoutException)
            {
                Assert.Fail($"{where}: {loops.FindAll(static t => !t.IsCompleted).Count} of {loops.Count} socket loops never completed after the shutdown");
            }
            catch
            {
                // Judged below, loop by loop.
            }
            foreach (Task loop in loops)
            {
                if (loop.IsFaulted)
                {
                    Exception error = loop.Exception!.InnerException!;
                    Assert.Fail($"{where}: a socket loop failed with an outcome the contract does not allow: {error}");
                }
                // Cancelled: an async item of the pool that CancelPending took before it started.
            }
            sockets.ForEach(static s => s.Dispose());
            pool.Dispose();
            lock (reported)
            {
                Assert.True(reported.Count == 0, $"{where}: the pool reported {(reported.Count == 0 ? null : reported[0])}");
            }
        }
    }

    private static Task Launch(WorkerPool pool, bool onPool, Func<Task> loop)
    {
        if (onPool)
        {
            try
            {
                return pool.Run(loop);
            }
            catch (ObjectDisposedException)
            {
                return Task.CompletedTask;
            }
        }
        return Task.Run(loop);
    }

    /// <summary>Echoes what arrives until the peer closes or the socket ends; receives are now and then cancelled and retried.</summary>
    private static async Task EchoServerAsync(PoolSocket server, int seed)
    {
        var random = new Random(seed);
        byte[] buffer = new byte[4096];
        while (true)
        {
            int count;
            using (var cancellation = new CancellationTokenSource())
            {
                ValueTask<int> receive;
                if (!TryStart(() => server.ReceiveAsync(buffer, cancellation.Token), out receive))
                {
                    return;
                }
                if (random.Next(8) == 0)
                {
                    cancellation.Cancel();
                }
                int? outcome = await Outcome(receive, cancellation.Token);
                if (outcome is null)
                {
                    continue; // cancelled: the socket stays usable
                }
                if (outcome < 0)
                {
                    return;
                }
                count = outcome.Value;
            }
            if (count == 0)
            {
                return;
            }
            if (!TryStart(() => server.SendAsync(buffer.AsMemory(0, count)), out ValueTask<int> send) || await Outcome(send, default) < 0)
            {
                return;
            }
        }
    }

    /// <summary>Sends pieces and reads what comes back, a few at a time in flight, until the socket ends.</summary>
    private static async Task ChattyClientAsync(PoolSocket client, int seed)
    {
        var random = new Random(~seed);
        byte[] piece = new byte[2048];
        byte[] buffer = new byte[8192];
        while (true)
        {
            int length = random.Next(1, piece.Length + 1);
            using var cancellation = new CancellationTokenSource();
            if (!TryStart(() => client.SendAsync(piece.AsMemory(0, length), cancellation.Token), out ValueTask<int> send))
            {
                return;
            }
            if (random.Next(16) == 0)
            {
                cancellation.Cancel();
            }
            if (await Outcome(send, cancellation.Token) < 0)
            {
                return;
            }
            if (!TryStart(() => client.ReceiveAsync(buffer), out ValueTask<int> receive))
            {
                return;
            }
            int? received = await Outcome(receive, default);
            if (received is null or <= 0)
            {
                return;
            }
        }
    }

    /// <summary>
    /// Starts an operation; false when the call itself refused it because the socket or the pool has ended (the
    /// contract's <see cref="ObjectDisposedException"/> at the call).
    /// </summary>
    private static bool TryStart(Func<ValueTask<int>> start, out ValueTask<int> operation)
    {
        try
        {
            operation = start();
            return true;
        }
        catch (ObjectDisposedException)
        {
            operation = default;
            return false;
        }
    }

    /// <summary>
    /// An operation's outcome: its result; null when <paramref name="token"/> cancelled it; -1 when the socket ended
    /// (disposed, the pool shut down, or the peer reset or closed the connection). Anything else is not in the contract
    /// and propagates.
    /// </summary>
    private static async Task<int?> Outcome(ValueTask<int> operation, CancellationToken token)
    {
        try
        {
            return await operation;
        }
        catch (OperationCanceledException e) when (token.CanBeCanceled && e.CancellationToken == token)
        {
            return null;
        }
        catch (ObjectDisposedException)
        {
            return -1;
        }
        catch (SocketException e) when (e.SocketErrorCode is SocketError.ConnectionReset or SocketError.Shutdown
            or SocketError.ConnectionAborted or SocketError.OperationAborted)
        {
            return -1;
        }
    }
}

public sealed class PoolSocketDriverRaceTests : PoolSocketRaceTests
{
    protected override bool RuntimeEngine => false;
}

public sealed class PoolSocketRuntimeEngineRaceTests : PoolSocketRaceTests
{
    protected override bool RuntimeEngine => true;
}
