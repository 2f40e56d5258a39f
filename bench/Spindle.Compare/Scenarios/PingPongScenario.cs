using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Channels;
using System.Threading.Tasks;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Two parties hand a token back and forth through the pool. <c>direct</c>: two work item objects A and B, each of
/// which counts a hop and queues the other from inside the pool (preferLocal: true, the way continuations are queued).
/// <c>channel</c>: a capacity-1 bounded channel between a consumer item that runs on the pool and blocks synchronously
/// while the channel is empty, and a producer that writes one value per queued item. The channel completes the
/// consumer's wait inline (synchronous continuations, and an inline context for a wait that completes while its
/// continuation is being registered), so no other pool takes part; when the channel is full the
/// producer asks to be called back when there is room and is then queued again on the pool under test (only the
/// consumer blocks a pool thread: Spindle's fixed-size pool does not add threads). A hop is one value delivered.
/// </summary>
internal sealed class PingPongScenario : IScenario
{
    private const int QuickHops = 100_000;
    private const int FullHops = 500_000;

    /// <summary>
    /// How many more hops <c>direct</c> times than <c>channel</c>. A direct hop takes 20-45 ns, so 100,000 of them last
    /// 2-5 ms, less than one scheduler slice (4 ms on the 2-core VM): beside busy processes a run either escaped
    /// preemption or lost a whole slice, and single runs of either pool read 21-119 ns a hop. A million hops last tens of
    /// milliseconds, long enough to hold the share of preemptions the pool actually gets.
    /// </summary>
    private const int DirectHopsFactor = 10;

    public string Id => "ping-pong";

    public string Description =>
        $"two parties hand a token back and forth through the pool, {QuickHops:N0} hops ({FullHops:N0} with --full; {DirectHopsFactor}x as many direct ones)";

    public IReadOnlyList<string> Variants { get; } = ["direct", "channel"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("hop", "ns", Better.Lower),
        new("alloc", "B/hop", Better.Lower, NoiseFloor: 0.01),
    ];

    public string HeadlineMetric => "hop";

    // Three runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 3;

    // A fixed pool of ProcessorCount threads, and of at least two for the channel variant: its consumer blocks one
    // thread on the channel reader for the whole run, so the producer needs another (on one core the two take turns).
    public PoolSettings GetPoolSettings(string variant) =>
        new() { MinThreads = PoolThreads(variant), MaxThreads = PoolThreads(variant) };

    private static int PoolThreads(string variant) =>
        variant == "channel" ? Math.Max(2, Environment.ProcessorCount) : Environment.ProcessorCount;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        Func<IPoolUnderTest, int, Measurement> runOnce = variant switch
        {
            "direct" => RunDirect,
            "channel" => RunChannel,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        int factor = variant == "direct" ? DirectHopsFactor : 1;
        int hops = (full ? FullHops : QuickHops) * factor;
        PoolWarmup.StartThreads(pool, PoolThreads(variant));
        Warmup.Repeat(() => runOnce(pool, QuickHops * factor / 10));
        return runOnce(pool, hops);
    }

    private static Measurement RunDirect(IPoolUnderTest pool, int hops)
    {
        var run = new DirectRun(pool, hops);
        var a = new HopItem(run);
        var b = new HopItem(run);
        a.Other = b;
        b.Other = a;
        return Time(hops, () =>
        {
            pool.UnsafeQueue(a, preferLocal: true);
            Waits.OrThrow(run.Done, $"{hops:N0} direct hops");
        });
    }

    private static Measurement RunChannel(IPoolUnderTest pool, int hops)
    {
        var run = new ChannelRun(pool, hops);
        Measurement measurement = Time(hops, () =>
        {
            pool.UnsafeQueue(run.Consumer, preferLocal: false);
            pool.UnsafeQueue(run.Producer, preferLocal: false);
            Waits.OrThrow(run.Done, $"{hops:N0} values through the channel");
        });
        if (run.Received != hops || run.Sum != (long)hops * (hops - 1) / 2)
        {
            throw new InvalidOperationException($"The consumer received {run.Received:N0} values (sum {run.Sum}), expected {hops:N0}.");
        }
        return measurement;
    }

    private static Measurement Time(int hops, Action body)
    {
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        body();
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;
        return new Measurement { Items = hops }
            .Set("hop", Pacer.ToNanoseconds(end - start) / hops)
            .Set("alloc", (double)used.AllocatedBytes / hops);
    }

    private sealed class DirectRun(IPoolUnderTest pool, int hops)
    {
        public readonly IPoolUnderTest Pool = pool;
        public readonly int Target = hops;
        public readonly ManualResetEventSlim Done = new(false);
        public int Hops; // only one hop item runs at a time; the queue hand-off orders the accesses
    }

    private sealed class HopItem(DirectRun run) : PoolWorkItem
    {
        public HopItem? Other { get; set; }

        public override void Execute()
        {
            if (++run.Hops >= run.Target)
            {
                run.Done.Set();
            }
            else
            {
                run.Pool.UnsafeQueue(Other!, preferLocal: true);
            }
        }
    }

    /// <summary>
    /// Registers <paramref name="continuation"/> on a channel wait so that it runs inline on whichever thread completes
    /// the wait. Awaiting (or <c>AsTask</c>) would do that too, except when the wait completes during the registration:
    /// the channel then hands the continuation to the built-in ThreadPool, which would bring a second pool, spinning
    /// on the same cores, into a Spindle run. A synchronization context whose Post runs the callback at once, current
    /// while registering, covers that case as well (the channel posts to a captured context).
    /// </summary>
    private static void OnCompletedInline(ValueTask<bool> wait, Action continuation)
    {
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(InlineContext.Instance);
        try
        {
            wait.GetAwaiter().UnsafeOnCompleted(continuation);
        }
        finally
        {
            SynchronizationContext.SetSynchronizationContext(previous);
        }
    }

    private sealed class InlineContext : SynchronizationContext
    {
        public static readonly InlineContext Instance = new();

        public override void Post(SendOrPostCallback d, object? state) => d(state);

        public override SynchronizationContext CreateCopy() => this;
    }

    private sealed class ChannelRun
    {
        public readonly IPoolUnderTest Pool;
        public readonly int Total;
        public readonly Channel<int> Channel = System.Threading.Channels.Channel.CreateBounded<int>(new BoundedChannelOptions(1)
        {
            SingleReader = true,
            SingleWriter = true,
            AllowSynchronousContinuations = true,
        });
        public readonly ManualResetEventSlim Done = new(false);
        public readonly ConsumerItem Consumer;
        public readonly ProducerItem Producer;
        public int Received;
        public long Sum;

        public ChannelRun(IPoolUnderTest pool, int total)
        {
            Pool = pool;
            Total = total;
            Consumer = new ConsumerItem(this);
            Producer = new ProducerItem(this);
        }
    }

    /// <summary>Runs once, on one pool thread, blocking it while the channel is empty.</summary>
    private sealed class ConsumerItem : PoolWorkItem
    {
        private readonly ChannelRun _run;
        private readonly ManualResetEventSlim _readable = new(false);
        private readonly Action _setReadable;

        public ConsumerItem(ChannelRun run)
        {
            _run = run;
            _setReadable = _readable.Set;
        }

        public override void Execute()
        {
            ChannelReader<int> reader = _run.Channel.Reader;
            int received = 0;
            long sum = 0;
            while (received < _run.Total)
            {
                if (reader.TryRead(out int value))
                {
                    received++;
                    sum += value;
                    continue;
                }
                ValueTask<bool> wait = reader.WaitToReadAsync();
                if (!wait.IsCompleted)
                {
                    _readable.Reset();
                    OnCompletedInline(wait, _setReadable);
                    _readable.Wait();
                }
                if (!wait.Result)
                {
                    break;
                }
            }
            _run.Received = received;
            _run.Sum = sum;
            _run.Done.Set();
        }
    }

    /// <summary>
    /// Writes one value per execution and queues itself for the next. When the channel is full it does not block and
    /// does not poll: it asks the channel to call it back once there is room (the consumer's read runs that callback
    /// inline, synchronous continuations being allowed), and the callback queues the producer on the pool under test.
    /// </summary>
    private sealed class ProducerItem : PoolWorkItem
    {
        private readonly ChannelRun _run;
        private readonly Action _onWritable;
        private ValueTask<bool> _pendingWait;
        private int _next;

        public ProducerItem(ChannelRun run)
        {
            _run = run;
            _onWritable = OnWritable;
        }

        public override void Execute()
        {
            ChannelWriter<int> writer = _run.Channel.Writer;
            while (!writer.TryWrite(_next))
            {
                ValueTask<bool> wait = writer.WaitToWriteAsync();
                if (wait.IsCompleted)
                {
                    if (wait.Result)
                    {
                        continue;
                    }
                    return; // completed channel: nothing more to write
                }
                _pendingWait = wait;
                OnCompletedInline(wait, _onWritable);
                return;
            }
            if (++_next < _run.Total)
            {
                _run.Pool.UnsafeQueue(this, preferLocal: true);
            }
        }

        private void OnWritable()
        {
            ValueTask<bool> wait = _pendingWait;
            _pendingWait = default;
            if (wait.IsCompleted && wait.Result) // consuming the result lets the channel reuse its wait operation
            {
                // Runs on the consumer's thread (inside its read), which then blocks again: share the producer.
                _run.Pool.UnsafeQueue(this, preferLocal: false);
            }
        }
    }
}
