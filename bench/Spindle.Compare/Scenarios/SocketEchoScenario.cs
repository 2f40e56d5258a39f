using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Request/response over 64 loopback TCP connections: each client loop sends a message (<c>1B</c> or <c>4KB</c>) and
/// reads the whole echo back; each server loop echoes what it receives. Spindle's loops use <c>PoolSocket</c> on the
/// pool's own epoll driver; the built-in pool's use the runtime's socket async methods (<c>Socket.SendAsync</c> and
/// <c>ReceiveAsync</c>, completed through the runtime's engine on the built-in pool). Both sides are the same async code,
/// started with <c>pool.Run</c> / <c>Task.Run</c>, with plain awaits (inside <c>Run</c> they resume on Spindle's pool
/// through its context; the built-in pool's have none). After a 2 s warm-up
/// of the same loops, the measured part lasts 0.5 s (2 s with --full). Metrics: round trips per second, the 99th
/// percentile of a round trip, allocation per round trip (both ends).
/// </summary>
internal sealed class SocketEchoScenario : IScenario
{
    private const int Connections = 64;
    /// <summary>
    /// The loops run this long before the measured part. With 300 ms, both pools were measured before their code had
    /// settled (the JIT promotes hot methods until 1.5-2.5 s into a child; the runtime's socket engine, precompiled,
    /// tiers up too): in 6 interleaved runs per pool on 2 cores, 2 s instead of 300 ms took the built-in pool's 1B
    /// round trips from 40.8k to 54.0k per second and Spindle's from 49.8k to 56.1k, and lowered both p99s.
    /// </summary>
    private static readonly TimeSpan s_warmup = TimeSpan.FromSeconds(2);
    private static readonly TimeSpan s_quick = TimeSpan.FromMilliseconds(500);
    private static readonly TimeSpan s_full = TimeSpan.FromSeconds(2);

    public string Id => "socket-echo";

    public string Description =>
        $"{Connections} loopback connections doing request/response round trips ({s_quick.TotalSeconds:0.#} s, {s_full.TotalSeconds:N0} s with --full): "
        + "Spindle's socket driver against the runtime's socket async methods on the built-in pool";

    public IReadOnlyList<string> Variants { get; } = ["1B", "4KB"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "ops/s", Better.Higher),
        new("p99", "us", Better.Lower),
        new("alloc", "B/op", Better.Lower, NoiseFloor: 0.5),
    ];

    public string HeadlineMetric => "throughput";

    public int? MaxDefaultRuns => 3;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        int size = variant switch
        {
            "1B" => 1,
            "4KB" => 4096,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        var run = new EchoRun();
        var clients = new ClientState[Connections];
        var tasks = new List<Task>(2 * Connections);
        for (int i = 0; i < Connections; i++)
        {
            (Socket client, Socket server) = LoopbackSockets.ConnectPair();
            IStreamEnd serverEnd = pool.WrapSocket(server);
            IStreamEnd clientEnd = pool.WrapSocket(client);
            var state = new ClientState(clientEnd, size);
            clients[i] = state;
            tasks.Add(pool.Run(() => LoopbackSockets.EchoAsync(serverEnd, size)));
            tasks.Add(pool.Run(() => ClientLoop(run, state)));
        }
        var latencies = new LatencyHistogram(); // the clients' merged, allocated before the measured part
        Thread.Sleep(s_warmup);

        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long operationsBefore = CountOperations(clients);
        long start = Stopwatch.GetTimestamp();
        Volatile.Write(ref run.Measuring, true);
        Thread.Sleep(full ? s_full : s_quick);
        Volatile.Write(ref run.Measuring, false);
        long end = Stopwatch.GetTimestamp();
        long operations = CountOperations(clients) - operationsBefore;
        GcSnapshot used = GcSnapshot.Take() - before;
        Volatile.Write(ref run.Stop, true);
        if (!Task.WaitAll([.. tasks], Waits.Stuck))
        {
            throw new TimeoutException("The echo loops did not stop.");
        }

        foreach (ClientState client in clients)
        {
            latencies.Add(client.Latencies);
        }
        double seconds = (end - start) / (double)Stopwatch.Frequency;
        return new Measurement { Items = operations }
            .Set("throughput", operations / seconds)
            .Set("p99", latencies.Count == 0 ? double.NaN : latencies.Percentile(99))
            .Set("alloc", (double)used.AllocatedBytes / Math.Max(1, operations));
    }

    private static long CountOperations(ClientState[] clients)
    {
        long total = 0;
        foreach (ClientState client in clients)
        {
            total += Volatile.Read(ref client.Operations);
        }
        return total;
    }

    private static async Task ClientLoop(EchoRun run, ClientState state)
    {
        using (state.End)
        {
            while (!Volatile.Read(ref run.Stop))
            {
                long began = Stopwatch.GetTimestamp();
                await state.End.SendAsync(state.Message);
                int total = 0;
                while (total < state.Reply.Length)
                {
                    int received = await state.End.ReceiveAsync(state.Reply.AsMemory(total));
                    if (received == 0)
                    {
                        throw new InvalidOperationException("The echo side closed the connection.");
                    }
                    total += received;
                }
                if (Volatile.Read(ref run.Measuring))
                {
                    state.Latencies.Record(Stopwatch.GetTimestamp() - began);
                }
                Volatile.Write(ref state.Operations, state.Operations + 1);
            }
        }
    }

    private sealed class EchoRun
    {
        public bool Measuring;
        public bool Stop;
    }

    /// <summary>One client's buffers and figures (written by its loop only, one step at a time).</summary>
    private sealed class ClientState(IStreamEnd end, int size)
    {
        public readonly IStreamEnd End = end;
        public readonly byte[] Message = new byte[size];
        public readonly byte[] Reply = new byte[size];
        /// <summary>Every measured operation's latency (a histogram: no cap, nothing allocated when recording).</summary>
        public readonly LatencyHistogram Latencies = new();
        public long Operations;
    }
}
