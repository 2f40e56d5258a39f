using System.Collections.Concurrent;
using System.Globalization;
using System.Threading;

namespace Spindle.Tests.Fuzzing;

// The ledger entries of the lanes of one fuzz iteration (see FuzzRecords.cs for the pool's own work).

/// <summary>
/// A place in one producer's sequence of queueing calls to a serial lane. <see cref="Ordered"/> is set once the call
/// returned having queued the item, before the producer's next call: items so marked must start in their producer's
/// order (a serial lane runs its items in the order they were queued).
/// </summary>
internal sealed class OrderMark(int producer, long sequence, string label)
{
    public int Producer { get; } = producer;

    public long Sequence { get; } = sequence;

    public string Label { get; } = label;

    public volatile bool Ordered;

    /// <summary>Where it started (for the report).</summary>
    public string? Where;
}

/// <summary>A lane of the fuzzed pool, with what the fuzzer knows about it.</summary>
internal sealed class LaneRecord(int id, WorkerPoolLane lane, LaneOptions options, int owner)
{
    public int Id { get; } = id;

    public WorkerPoolLane Lane { get; } = lane;

    public LaneOptions Options { get; } = options;

    /// <summary>The producer that created the lane and is the only one to use it; -1 for a lane every producer uses.</summary>
    public int Owner { get; } = owner;

    public string Name => Options.Name;

    /// <summary>A cap of 1: items never overlap and start in their producer's order.</summary>
    public bool Serial => Options.MaxConcurrency == 1;

    public bool Bounded => Options.QueueLimit is not null;

    /// <summary>A plain queueing call may block here until there is room.</summary>
    public bool MayWait => Bounded && Options.FullMode == LaneFullMode.Wait;

    public string Description =>
        $"{Name} ({Options.Priority}, share {Options.Share}, cap {Text(Options.MaxConcurrency)}, limit {Text(Options.QueueLimit)}, {Options.FullMode})";

    /// <summary>Code of the lane running now (a serial lane's must never exceed 1).</summary>
    public int Inside;

    /// <summary>The order marks of the serial lane's items, in the order they started.</summary>
    public readonly ConcurrentQueue<OrderMark> Starts = new();

    /// <summary>Producer threads inside a queueing call to the lane that may wait for room.</summary>
    public int WaitingForRoom;

    /// <summary>QueueUserWorkItemAsync calls to the lane that have not ended.</summary>
    public int PendingAsync;

    /// <summary>1 once a shutdown of the lane with CancelPending was called: its queued items may then be cancelled.</summary>
    public int CancelRequested;

    /// <summary>Set once a lane shutdown that waits for the stop returned: no item of the lane may start after it.</summary>
    public volatile bool StopSeen;

    /// <summary>The figures the lane's Shutdown calls returned (the largest so far).</summary>
    public int LastFigure = -1;

    /// <summary>How the lane was shut down (for the report).</summary>
    public readonly ConcurrentQueue<string> Shutdowns = new();

    private static string Text(int? value) => value switch
    {
        null => "none",
        int.MaxValue => "int.MaxValue",
        int v => v.ToString(CultureInfo.InvariantCulture),
    };

    public void RecordFigure(int figure)
    {
        int seen = Volatile.Read(ref LastFigure);
        while (figure > seen)
        {
            int previous = Interlocked.CompareExchange(ref LastFigure, figure, seen);
            if (previous == seen)
            {
                return;
            }
            seen = previous;
        }
    }
}
