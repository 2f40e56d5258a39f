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
/// Isolation from a starved built-in pool: one loopback connection whose client and echo loops (plain awaits, started
/// with <c>pool.Run</c> / <c>Task.Run</c>) run on the pool under test (Spindle: <c>PoolSocket</c> on its own driver; built-in: the runtime's socket async methods), both started and
/// waiting before 2,000 items that block are queued to the built-in <see cref="ThreadPool"/> (in both children: the
/// situation a user adopts Spindle to escape). Then 1,000 one-byte round trips, with at most 3 s for all of them.
/// Metrics: the 99th percentile of a round trip (a round trip not done by the deadline counts as the time it had
/// waited), and how many took more than 100 ms or never finished.
/// </summary>
internal sealed class IsolationScenario : IScenario
{
    private const int BlockedItems = 2_000;
    private const int RoundTrips = 1_000;
    private static readonly TimeSpan s_deadline = TimeSpan.FromSeconds(3);
    private static readonly long s_stalledTicks = Pacer.Ticks(TimeSpan.FromMilliseconds(100));

    public string Id => "isolation";

    public string Description =>
        $"{RoundTrips:N0} loopback round trips on the pool under test while {BlockedItems:N0} blocked items starve the built-in pool (at most {s_deadline.TotalSeconds:N0} s)";

    public IReadOnlyList<string> Variants { get; } = ["starved"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("p99", "us", Better.Lower),
        new("stalled", "ops", Better.Lower),
    ];

    public string HeadlineMetric => "p99";

    // The built-in runs wait out the whole deadline, and the effect is all or nothing (every built-in round trip
    // stalls, none of Spindle's): two runs per pool.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        if (variant != "starved")
        {
            throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant));
        }
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        (Socket client, Socket server) = LoopbackSockets.ConnectPair();
        IStreamEnd clientEnd = pool.WrapSocket(client);
        IStreamEnd serverEnd = pool.WrapSocket(server);
        var latencies = new long[RoundTrips];
        var go = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var warmed = new ManualResetEventSlim();
        int completed = 0;
        long triggered = 0;
        Task echo = pool.Run(() => LoopbackSockets.EchoAsync(serverEnd, bufferSize: 1));
        Task driver = pool.Run(async () =>
        {
            var message = new byte[1];
            var reply = new byte[1];
            for (int i = 0; i < 200; i++) // warm-up, with the built-in pool healthy
            {
                await RoundTrip(clientEnd, message, reply);
            }
            warmed.Set();
            // Resumes on the pool this loop belongs to: Spindle's (through its SynchronizationContext), or the starved
            // built-in pool.
            await go.Task;
            for (int i = 0; i < RoundTrips; i++)
            {
                long began = Stopwatch.GetTimestamp();
                await RoundTrip(clientEnd, message, reply);
                latencies[i] = Stopwatch.GetTimestamp() - began;
                Volatile.Write(ref completed, i + 1);
            }
            clientEnd.Dispose();
        });
        Waits.OrThrow(warmed, "the warm-up round trips");
        ProcessMeter.MarkMeasuredStart(); // the process figures: the starvation and the timed round trips, not the warm-up

        // Never disposed: blocked items that have not started when the run ends still wait on it.
        var gate = new ManualResetEventSlim();
        for (int i = 0; i < BlockedItems; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(static g => ((ManualResetEventSlim)g!).Wait(), gate);
        }
        Thread.Sleep(50); // let the built-in pool's threads take blocked items
        triggered = Stopwatch.GetTimestamp();
        go.SetResult();
        long deadline = triggered + Pacer.Ticks(s_deadline);
        while (Volatile.Read(ref completed) < RoundTrips && Stopwatch.GetTimestamp() < deadline)
        {
            Thread.Sleep(5);
        }
        long end = Stopwatch.GetTimestamp();
        int done = Volatile.Read(ref completed);
        gate.Set();
        if (!Task.WaitAll([echo, driver], Waits.Stuck))
        {
            throw new TimeoutException("The round trips did not finish after the built-in pool was released.");
        }

        // A round trip not done by the deadline counts as what it had waited by then (the first of them from the trigger).
        var figures = new double[RoundTrips];
        int stalled = 0;
        for (int i = 0; i < RoundTrips; i++)
        {
            long ticks = i < done ? latencies[i] : end - triggered;
            figures[i] = Pacer.ToMicroseconds(ticks);
            stalled += ticks > s_stalledTicks || i >= done ? 1 : 0;
        }
        Array.Sort(figures);
        return new Measurement { Items = RoundTrips }
            .Set("p99", Stats.Percentile(figures, 99))
            .Set("stalled", stalled);
    }

    private static async Task RoundTrip(IStreamEnd client, byte[] message, byte[] reply)
    {
        await client.SendAsync(message);
        if (await client.ReceiveAsync(reply) != 1)
        {
            throw new InvalidOperationException("The echo side closed the connection.");
        }
    }
}
