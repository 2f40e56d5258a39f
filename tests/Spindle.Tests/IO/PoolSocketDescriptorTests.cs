using System;
using System.IO;
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

    private static async Task Cycle(int connections)
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(PoolSocketDescriptorTests) });
        using var listener = new PoolSocket(pool);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        var buffer = new byte[4];
        for (int i = 0; i < connections; i++)
        {
            using var client = new PoolSocket(pool);
            ValueTask<PoolSocket> accept = listener.AcceptAsync();
            await client.ConnectAsync(listener.Socket.LocalEndPoint!).AsTask().WaitAsync(Waits.MustHappen);
            using PoolSocket server = await accept.AsTask().WaitAsync(Waits.MustHappen);
            await client.SendAsync(new byte[] { 1, 2, 3, 4 }).AsTask().WaitAsync(Waits.MustHappen);
            int received = 0;
            while (received < 4)
            {
                received += await server.ReceiveAsync(buffer.AsMemory(received)).AsTask().WaitAsync(Waits.MustHappen);
            }
            if (i % 2 == 0)
            {
                _ = server.ReceiveAsync(buffer); // left pending: disposal must still close everything
            }
        }
    }

    [Fact]
    public async Task SocketsAndTheDriver_CloseEveryDescriptorTheyOpened()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // /proc/self/fd is Linux's; the driver exists only there
        }
        await Cycle(2); // the runtime's own first-use descriptors (libraries, resolver files) are not ours
        int before = OpenDescriptors();
        await Cycle(100);
        // The poller thread closes the epoll and event descriptors on its way out, just after Dispose returns.
        Waits.Until(() => OpenDescriptors() <= before, $"the descriptor count to return to {before} (now {OpenDescriptors()})");
    }
}
