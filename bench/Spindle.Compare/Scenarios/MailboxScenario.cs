using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// Actor mailboxes as Akka.NET's dispatcher runs them, on each pool's zero-allocation work-item path: 2 x cores pairs of
/// mailboxes ping-pong messages, each mailbox starting with one (<c>ping-pong</c>: a turn mostly finds one message, so
/// nearly every message makes its receiver schedule itself) or four (<c>batched</c>: a turn usually finds several, and
/// the mailbox queue's own cost weighs more than the pool's). Posting a message enqueues it in the target's queue and, if the
/// mailbox was idle, schedules the mailbox on the pool (<c>preferLocal: true</c>, as a message posted from an actor is
/// usually posted from a pool thread); a scheduled mailbox handles up to 30 messages per turn (Akka.NET's default
/// throughput), each by posting it back to the partner, then goes idle and schedules itself again if messages arrived
/// meanwhile. Messages and mailboxes are allocated before the measured part, which lasts 300 ms (3 s with --full): the
/// measuring thread sleeps that long and then raises a stop flag that every turn reads (a turn reads no clock, as
/// Akka.NET's mailbox reads none unless a throughput deadline is configured: a clock read per turn was a fifth of the
/// time of a one-message turn on either pool). Metric: messages handled per second.
/// </summary>
internal sealed class MailboxScenario : IScenario
{
    private const int Throughput = 30;
    private static readonly TimeSpan s_quickDuration = TimeSpan.FromMilliseconds(300);
    private static readonly TimeSpan s_fullDuration = TimeSpan.FromSeconds(3);
    private static readonly TimeSpan s_warmupDuration = TimeSpan.FromMilliseconds(100);

    public string Id => "mailbox";

    public string Description =>
        $"2 x cores pairs of actor mailboxes ping-ponging messages (each mailbox starting with 1 message, batched: 4; up to {Throughput} per turn) "
        + $"for {s_quickDuration.TotalMilliseconds:N0} ms ({s_fullDuration.TotalSeconds:N0} s with --full)";

    public IReadOnlyList<string> Variants { get; } = ["ping-pong", "batched"];

    public IReadOnlyList<MetricInfo> Metrics { get; } =
    [
        new("throughput", "msgs/s", Better.Higher),
        new("alloc", "B/msg", Better.Lower, NoiseFloor: 0.01),
    ];

    public string HeadlineMetric => "throughput";

    // Two runs per pool in the default (quick) run, which must stay under ten minutes.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        int perMailbox = variant switch
        {
            "ping-pong" => 1,
            "batched" => 4,
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        Warmup.Repeat(() => RunPairs(pool, perMailbox, s_warmupDuration));
        return RunPairs(pool, perMailbox, full ? s_fullDuration : s_quickDuration);
    }

    private static Measurement RunPairs(IPoolUnderTest pool, int perMailbox, TimeSpan duration)
    {
        int pairs = 2 * Environment.ProcessorCount;
        var run = new MailboxRun(pairs * 2 * perMailbox);
        var mailboxes = new Mailbox[pairs * 2];
        for (int i = 0; i < mailboxes.Length; i++)
        {
            mailboxes[i] = new Mailbox(pool, run);
        }
        var messages = new Message[pairs][];
        for (int p = 0; p < pairs; p++)
        {
            mailboxes[2 * p].Partner = mailboxes[2 * p + 1];
            mailboxes[2 * p + 1].Partner = mailboxes[2 * p];
            messages[p] = new Message[perMailbox * 2];
            for (int m = 0; m < messages[p].Length; m++)
            {
                messages[p][m] = new Message();
            }
        }
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        long start = Stopwatch.GetTimestamp();
        for (int p = 0; p < pairs; p++)
        {
            // Half of each pair's messages start at each side.
            for (int m = 0; m < messages[p].Length; m++)
            {
                mailboxes[2 * p + (m & 1)].Post(messages[p][m]);
            }
        }
        Thread.Sleep(duration);
        Volatile.Write(ref run.Stopping, true);
        Waits.OrThrow(run.Done, "the mailboxes to stop after the stop flag");
        long end = Stopwatch.GetTimestamp();
        GcSnapshot used = GcSnapshot.Take() - before;

        long handled = 0;
        foreach (Mailbox mailbox in mailboxes)
        {
            handled += mailbox.Handled;
        }
        double seconds = (end - start) / (double)Stopwatch.Frequency;
        return new Measurement { Items = handled }
            .Set("throughput", handled / seconds)
            .Set("alloc", (double)used.AllocatedBytes / Math.Max(1, handled));
    }

    private sealed class Message;

    /// <summary>The run's stop flag (written once, by the measuring thread), and its end: set when every message has been retired after the stop.</summary>
    private sealed class MailboxRun(int messages)
    {
        public readonly ManualResetEventSlim Done = new(false);
        public bool Stopping;
        private int _live = messages;

        public void Retire()
        {
            if (Interlocked.Decrement(ref _live) == 0)
            {
                Done.Set();
            }
        }
    }

    /// <summary>
    /// A mailbox: a queue and a scheduled flag. The flag is set by the poster that finds the mailbox idle (that poster
    /// schedules it), and cleared by the mailbox's turn, which then looks at the queue once more, so a message posted
    /// while the turn ended is never left unscheduled.
    /// </summary>
    private sealed class Mailbox(IPoolUnderTest pool, MailboxRun run) : PoolWorkItem
    {
        private readonly ConcurrentQueue<Message> _queue = new();
        private int _scheduled;

        public Mailbox? Partner { get; set; }

        public long Handled; // written by the mailbox's turns only, one at a time

        public void Post(Message message)
        {
            _queue.Enqueue(message);
            if (Volatile.Read(ref _scheduled) == 0 && Interlocked.Exchange(ref _scheduled, 1) == 0)
            {
                pool.UnsafeQueue(this, preferLocal: true);
            }
        }

        public override void Execute()
        {
            Mailbox partner = Partner!;
            bool over = Volatile.Read(ref run.Stopping);
            for (int i = 0; i < Throughput && _queue.TryDequeue(out Message? message); i++)
            {
                Handled++;
                if (over)
                {
                    run.Retire(); // after the stop a message is handled once more and then dropped
                }
                else
                {
                    partner.Post(message);
                }
            }
            Interlocked.Exchange(ref _scheduled, 0); // a full fence: the look at the queue below cannot move above it
            if (!_queue.IsEmpty && Interlocked.Exchange(ref _scheduled, 1) == 0)
            {
                pool.UnsafeQueue(this, preferLocal: true);
            }
        }
    }
}
