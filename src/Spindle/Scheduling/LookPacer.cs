using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using Spindle.Primitives;

namespace Spindle.Scheduling;

/// <summary>
/// A worker's pacing of its looks outside its own queues (owner only): how many dispatches of the pool's queue until the
/// next look, and how many lane items until the next timing of them, both fitted to the length of the items so that a
/// look comes about every <see cref="FairnessLookTicks"/> of work; and whether the worker's items are long
/// enough for the relief thread to count it as being in long items (see <see cref="Worker.TryBeginLook"/>).
/// </summary>
internal struct LookPacer
{
    /// <summary>
    /// The most local items a worker runs between looks at the global queue (and at its own oldest item): short items
    /// are looked past this many at a time, so the look's clock read costs a fraction of a nanosecond per item.
    /// </summary>
    internal const int FairnessInterval = 61;

    /// <summary>
    /// How much work (in Stopwatch ticks) a busy worker does between looks at the global queue: 100 µs. The number of
    /// items between looks adapts to it (see <c>Worker.TryBeginLook</c>), so an item queued from outside while every
    /// worker runs local work waits about this long, plus the rest of the items in progress, whatever their length.
    /// </summary>
    internal static readonly long FairnessLookTicks = Stopwatch.Frequency / 10_000;

    /// <summary>How long the oldest item of a worker's local ring may wait, untouched, before its owner takes it.</summary>
    internal const int OldestLocalAgeMs = 20;

    /// <summary>
    /// How many looks running a chain at the top of a worker's ring (each item popping the one its predecessor pushed)
    /// may pass over the items below it before the worker takes the oldest of them at each look: about a millisecond of
    /// work at <see cref="FairnessLookTicks"/> a look (see <c>WorkerLocalQueue.TakeAgedBottom</c>).
    /// </summary>
    internal const int ChainLooks = 10;

    /// <summary>
    /// How long (in Stopwatch ticks) one item must take, at two looks running, before the worker counts as being in
    /// long items for the relief thread: 200 µs, twice a look's target. Shorter items are looked past after each item
    /// anyway, so outside work waits for them no longer than about that; and a single long spell is more often the
    /// thread being descheduled than a long item.
    /// </summary>
    private static readonly long s_longItemTicks = FairnessLookTicks * 2;

    /// <summary>Dispatches of the pool's queue left before the next look (the dispatch counts it down).</summary>
    public int Countdown;

    /// <summary>Lane items left before the next timing of lane items (the lane turn counts it down).</summary>
    public int LaneCountdown;

    private int _interval;
    private long _lastLook;
    private int _laneInterval;
    private long _lastLaneTiming;
    private int _laneItemsSinceLook;
    private bool _tookOutside;
    private bool _counted;
    private bool _streak;

    [MethodImpl(RarePath.Compile)]
    public static LookPacer Create() => new()
    {
        Countdown = FairnessInterval,
        _interval = FairnessInterval,
        LaneCountdown = FairnessInterval,
        _laneInterval = FairnessInterval,
    };

    /// <summary>
    /// Whether this look may be the local work's turn instead: the previous dispatch was a look (the interval is one
    /// item) that took an outside item, and the stall monitor did not ask for this one. The caller then checks that
    /// local work waits and calls <see cref="YieldToLocalWork"/>.
    /// </summary>
    public readonly bool MayYieldToLocalWork(bool requested) => _tookOutside && _interval == 1 && !requested;

    /// <summary>
    /// This dispatch is the local work's turn: items long enough to make every dispatch a look (a chain that re-queues
    /// itself outside, as a mailbox that used its throughput does) would otherwise be taken ahead of local work at
    /// every look, for as long as the chain lasted. Two items ran by the next look: its interval's arithmetic counts them.
    /// </summary>
    public void YieldToLocalWork()
    {
        _tookOutside = false;
        _interval = 2;
        Countdown = 1;
    }

    /// <summary>
    /// A look at <paramref name="now"/>: sets the dispatches until the next one, and enters or leaves
    /// <paramref name="relief"/>'s count of long-item workers by the items' length. Returns the dispatches until the next
    /// look: about how many of the worker's items take <see cref="FairnessLookTicks"/>.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public int Look(long now, IOutsideRelief relief)
    {
        _tookOutside = false;
        long elapsed = now - _lastLook;
        int interval = _interval;
        bool longItems = false;
        if (_lastLook != 0 && elapsed > 0)
        {
            // The items run since the last look (fewer than the interval when the monitor asked for this look early).
            // After a park the first look only starts the clock (see RestartAfterPark). Lane items run since then count
            // for the items' length (not for the interval, which counts dispatches that reach the pool's queue): a
            // worker that serves lanes reaches this look only now and then.
            long ran = Math.Max(1, interval - Countdown);
            interval = NextInterval(elapsed, ran, ran + _laneItemsSinceLook, interval, out longItems);
        }
        _laneItemsSinceLook = 0;
        _interval = interval;
        Countdown = interval;
        _lastLook = now;
        if (NoteItemLength(longItems, out bool counted))
        {
            relief.NoteLongItems(counted);
        }
        return interval;
    }

    /// <summary>The look returned an outside item.</summary>
    public void TookOutside() => _tookOutside = true;

    /// <summary>
    /// A lane item ran; returns whether its timing is due (the caller then calls <see cref="TimeLaneItems"/>). Lane
    /// items are timed on an interval of their own, so a worker whose lane items are long counts as being in long items
    /// even though it never reaches a look of the pool's queue; the pool queue's looks are not moved.
    /// </summary>
    public bool CountLaneItem()
    {
        _laneItemsSinceLook++;
        return --LaneCountdown <= 0;
    }

    /// <summary>
    /// Times the lane items run since the last timing, at <paramref name="now"/>, on an interval of their own fitted like
    /// the looks' (about one clock read per <see cref="FairnessLookTicks"/> of lane items, at most one per
    /// <see cref="FairnessInterval"/> items), and enters or leaves <paramref name="relief"/>'s count of long-item workers
    /// by it. A worker in a turn of a lane's long items never reaches a look of the pool's queue, so without this it
    /// would never count as being in long items, and an item queued to a lane from outside would wait for its item to
    /// end while the relief slept.
    /// </summary>
    public void TimeLaneItems(long now, IOutsideRelief relief)
    {
        long elapsed = now - _lastLaneTiming;
        int interval = _laneInterval;
        if (_lastLaneTiming != 0 && elapsed > 0)
        {
            // After a park the first timing only starts the clock, and says nothing of the items.
            long ran = Math.Max(1, interval - LaneCountdown);
            interval = NextInterval(elapsed, ran, ran, interval, out bool longItems);
            if (NoteItemLength(longItems, out bool counted))
            {
                relief.NoteLongItems(counted);
            }
        }
        _laneInterval = interval;
        LaneCountdown = interval;
        _lastLaneTiming = now;
    }

    /// <summary>
    /// After a park: the next look and lane timing time the work after the wake, not the idle spell (which would cut the
    /// interval to one item and cost a clock read per item for the first looks of every busy spell).
    /// </summary>
    public void RestartAfterPark()
    {
        _lastLook = 0;
        _lastLaneTiming = 0;
        _laneItemsSinceLook = 0;
    }

    /// <summary>Leaves <paramref name="relief"/>'s count of long-item workers, if the worker is in it (it parks, or exits).</summary>
    public void Leave(IOutsideRelief relief)
    {
        if (_counted)
        {
            _counted = false;
            relief.NoteLongItems(false);
        }
    }

    /// <summary>
    /// The number of counted items until the next timing: as many as took about <see cref="FairnessLookTicks"/>
    /// in the last <paramref name="elapsed"/> ticks, in which <paramref name="ran"/> counted items ran (at most four
    /// times the previous <paramref name="interval"/>, at most <see cref="FairnessInterval"/>);
    /// <paramref name="longItems"/>: the <paramref name="itemsRun"/> items run in all took <see cref="s_longItemTicks"/>
    /// or more each.
    /// </summary>
    private static int NextInterval(long elapsed, long ran, long itemsRun, int interval, out bool longItems)
    {
        longItems = elapsed >= itemsRun * s_longItemTicks;
        return (int)Math.Clamp(ran * FairnessLookTicks / elapsed, 1, Math.Min(4L * interval, FairnessInterval));
    }

    /// <summary>
    /// Enters or leaves the relief's count once two timings running found long items (a timing that only starts the
    /// clock finds none). Only transitions are reported, so short items cost the shared count nothing.
    /// </summary>
    private bool NoteItemLength(bool longItems, out bool counted)
    {
        counted = longItems && _streak;
        _streak = longItems;
        if (counted == _counted)
        {
            return false;
        }
        _counted = counted;
        return true;
    }
}
