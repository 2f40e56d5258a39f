using System;
using System.IO;
using System.Linq;
using System.Net;
using System.Threading.Tasks;
using Spindle.IO;
using Xunit;

namespace Spindle.Tests.IO;

/// <summary>
/// Nothing the pool's sockets and driver open outlives them: counted in the process's descriptor table, so this runs
/// alone (the process-wide collection), where no other test opens or closes descriptors meanwhile.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class PoolSocketDescriptorTests
{
    private static int OpenDescriptors() => Directory.GetFiles("/proc/self/fd").Length;

    private static string[] Describe() => Array.ConvertAll(Directory.GetFiles("/proc/self/fd"), path =>
    {
        try
        {
            return new FileInfo(path).LinkTarget ?? path;
        }
        catch (IOException)
        {
            return path;
        }
    });

    /// <summary>
    /// Opens a pool, makes <paramref name="connections"/> connections through it (half of them left with a receive
    /// pending), and disposes it from this thread, which is not the pool's: the awaits inside resume on the pool, and a
    /// pool disposed from its own worker could not wait for its own stop.
    /// </summary>
    private static void Cycle(int connections)
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketDescriptorTests) });
        Assert.True(Connect(pool, connections).Wait(Waits.MustHappen), "the connections did not finish");
        pool.Dispose();
    }

    private static async Task Connect(WorkerPool pool, int connections)
    {
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        var buffer = new byte[4];
        for (int i = 0; i < connections; i++)
        {
            using var client = new PoolSocket(pool);
            ValueTask<PoolSocket> accept = listener.AcceptAsync();
            await client.ConnectAsync(listener.Socket.LocalEndPoint!);
            using PoolSocket server = await accept;
            await client.SendAsync(new byte[] { 1, 2, 3, 4 });
            int received = 0;
            while (received < 4)
            {
                received += await server.ReceiveAsync(buffer.AsMemory(received));
            }
            if (i % 2 == 0)
            {
                _ = server.ReceiveAsync(buffer); // left pending: disposal must still close everything
            }
        }
    }

    [Fact]
    public void SocketsAndTheDriver_CloseEveryDescriptorTheyOpened()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // /proc/self/fd is Linux's; the driver exists only there
        }
        Cycle(2); // the runtime's own first-use descriptors (libraries, resolver files) are not ours
        int before = OpenDescriptors();
        string[] beforeList = Describe();
        Cycle(100);
        // The poller thread closes the epoll and event descriptors on its way out, just after Dispose returns.
        int now = before;
        Assert.True(Waits.Poll(() => (now = OpenDescriptors()) <= before, Waits.MustHappen),
            $"the descriptor count did not return to {before}: {now} open; new: {string.Join(", ", Describe().Except(beforeList))}");
    }
}
