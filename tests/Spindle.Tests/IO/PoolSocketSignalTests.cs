using System;
using System.Globalization;
using System.IO;
using System.Net;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// Signals interrupting the driver's system calls: with a handler installed for a signal, a thread blocked in
/// <c>epoll_wait</c>, a futex or a socket call that receives it returns <c>EINTR</c>, which the driver must treat as "try
/// again", never as an error or a lost wake-up. Sent to every thread in turn, the signals interrupted the poller's
/// <c>epoll_wait</c> about 35 times in one run of this test (counted once with a probe in the driver). Signals reach the
/// whole process, so this runs alone (the process-wide collection).
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed partial class PoolSocketSignalTests
{
    private const int SigWinch = 28; // the same on Linux x64 and arm64, the driver's platforms

    [LibraryImport("libc", EntryPoint = "tgkill", SetLastError = true)]
    private static partial int ThreadKill(int pid, int tid, int signal);

    [Fact]
    public void EchoRoundTrips_AllComplete_WhileSignalsInterruptThePoolsSystemCalls()
    {
        if (!OperatingSystem.IsLinux() || !Spindle.Polling.EpollDriver.IsSupported)
        {
            return; // elsewhere the runtime's socket engine serves the pool's sockets: no driver to interrupt
        }
        int delivered = 0;
        // A handler makes the signal interrupt blocking calls (an ignored signal would not); SIGWINCH is otherwise
        // harmless to a test host.
        using PosixSignalRegistration registration = PosixSignalRegistration.Create(PosixSignal.SIGWINCH, context =>
        {
            context.Cancel = true;
            Interlocked.Increment(ref delivered);
        });
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketSignalTests) });
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        EndPoint endPoint = listener.Socket.LocalEndPoint!;

        using var stop = new CancellationTokenSource();
        int pid = Environment.ProcessId;
        var signaller = new Thread(() =>
        {
            // To every thread of the process in turn: a signal sent to the process goes to its main thread whenever
            // that thread does not block it, so the pool's threads would never see one.
            while (!stop.IsCancellationRequested)
            {
                foreach (string task in Directory.GetDirectories("/proc/self/task"))
                {
                    if (int.TryParse(Path.GetFileName(task), NumberStyles.None, CultureInfo.InvariantCulture, out int tid))
                    {
                        ThreadKill(pid, tid, SigWinch); // fails harmlessly for a thread that has exited meanwhile
                    }
                }
                Thread.Sleep(1);
            }
        })
        { IsBackground = true, Name = "signaller" };
        signaller.Start();
        try
        {
            const int Connections = 8;
            const int Rounds = 300;
            var loops = new Task[Connections];
            for (int i = 0; i < Connections; i++)
            {
                // One accept at a time on the listener: each pair is connected before the next, signals arriving.
                Task<(PoolSocket Client, PoolSocket Server)> connecting = pool.Run(() => ConnectAsync(listener, endPoint));
                Assert.True(connecting.Wait(Waits.MustHappen), $"connection {i} while signals arrived");
                (PoolSocket client, PoolSocket server) = connecting.Result;
                int seed = i;
                loops[i] = pool.Run(() => EchoAsync(client, server, seed, Rounds));
            }
            Assert.True(Task.WaitAll(loops, Waits.MustHappen), "the echo loops did not finish while signals arrived");
            foreach (Task loop in loops)
            {
                Assert.True(loop.IsCompletedSuccessfully, loop.Exception?.ToString());
            }
        }
        finally
        {
            stop.Cancel();
            signaller.Join();
        }
        Assert.True(Volatile.Read(ref delivered) > 0, "no signal was delivered: nothing was interrupted");
    }

    private static async Task<(PoolSocket Client, PoolSocket Server)> ConnectAsync(PoolSocket listener, EndPoint endPoint)
    {
        var client = new PoolSocket(listener.Pool);
        ValueTask<PoolSocket> accepting = listener.AcceptAsync();
        await client.ConnectAsync(endPoint);
        return (client, await accepting);
    }

    /// <summary>One connection: <paramref name="rounds"/> messages of a few bytes, each echoed back and checked.</summary>
    private static async Task EchoAsync(PoolSocket client, PoolSocket server, int seed, int rounds)
    {
        using PoolSocket clientSide = client;
        using PoolSocket serverSide = server;
        var random = new Random(seed);
        var message = new byte[1 + seed];
        var echo = new byte[message.Length];
        for (int round = 0; round < rounds; round++)
        {
            random.NextBytes(message);
            await client.SendAsync(message);
            await ReceiveExactlyAsync(server, echo);
            await server.SendAsync(echo);
            Array.Clear(echo);
            await ReceiveExactlyAsync(client, echo);
            Assert.Equal(message, echo);
        }
    }

    private static async Task ReceiveExactlyAsync(PoolSocket socket, Memory<byte> buffer)
    {
        int total = 0;
        while (total < buffer.Length)
        {
            int received = await socket.ReceiveAsync(buffer[total..]);
            Assert.True(received > 0, $"the connection ended after {total} of {buffer.Length} bytes");
            total += received;
        }
    }
}
