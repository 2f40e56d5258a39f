using System;
using System.Diagnostics;

namespace Spindle.Primitives;

/// <summary>
/// Paces a histogram's samples by time instead of by count: after each sample it sets how many items to skip before
/// the next so that samples come about every <see cref="TargetTicks"/> (100 µs). A fixed one-in-N would cost a busy
/// pool of short items a clock read and a recorded measurement every few hundred nanoseconds, and give a quiet pool
/// almost no samples; paced, the cost stays under a few tenths of a percent of a thread's time and every item of a
/// quiet pool is measured.
/// </summary>
/// <remarks>Owned by one thread (a worker's field, or a thread-static): plain fields, no atomics.</remarks>
internal struct SamplePacer
{
    /// <summary>The aimed-for time between two samples of one thread, in Stopwatch ticks: 100 µs.</summary>
    public static readonly long TargetTicks = Stopwatch.Frequency / 10_000;

    /// <summary>The most items skipped between two samples.</summary>
    public const int MaxInterval = 4096;

    /// <summary>Items left before the next sample; the owner decrements it per item and samples when it reaches zero.</summary>
    public int Countdown;

    /// <summary>
    /// <see cref="Environment.TickCount64"/> at the last sample: a thread outside the pool, whose enqueues may stop for
    /// any length of time after a burst, also samples once <see cref="MaxGapMs"/> have passed (see
    /// <see cref="IsDue"/>).
    /// </summary>
    public long LastSampleMs;

    /// <summary>The longest a thread outside the pool goes between samples while it keeps queueing.</summary>
    public const int MaxGapMs = 10;

    private int _interval;
    private long _lastSample;
    private bool _everyItem;

    /// <summary>
    /// A pacer that picks every item: for a thread whose items are few and usually long (a dedicated thread, the relief
    /// thread), where two clock reads each cost nothing that matters and the histogram needs every one of them.
    /// </summary>
    public static SamplePacer EveryItem() => new() { _everyItem = true };

    /// <summary>A sample was taken at <paramref name="now"/>: sets the countdown to the next one.</summary>
    public void Sampled(long now)
    {
        if (_everyItem)
        {
            Countdown = 0;
            return;
        }
        if (_interval == 0)
        {
            _interval = 1;
        }
        else if (_lastSample != 0)
        {
            // Shrinks at once, grows at most fourfold per sample, as the timer checks between items do.
            long elapsed = now - _lastSample;
            long interval = elapsed <= 0 ? 4L * _interval : _interval * TargetTicks / elapsed;
            _interval = (int)Math.Clamp(interval, 1, Math.Min(4L * _interval, MaxInterval));
        }
        _lastSample = now;
        Countdown = _interval;
        LastSampleMs = Environment.TickCount64;
    }

    /// <summary>
    /// For a thread outside the pool: counts one item and says whether it is sampled. A countdown set during a burst
    /// (up to <see cref="MaxInterval"/> items) would otherwise hold through a quiet spell that follows it, leaving the
    /// histogram without samples for as many enqueues, however far apart; so a sample is also due once
    /// <see cref="MaxGapMs"/> have passed since the last one (a coarse clock read, about 5 ns, per enqueue while a
    /// listener has the histogram on). Workers need no clock: they <see cref="Rewind"/> when they park.
    /// </summary>
    public bool IsDue() => --Countdown <= 0 || Environment.TickCount64 - LastSampleMs >= MaxGapMs;

    /// <summary>The owner is about to sleep (a worker parking): the first item after it is sampled.</summary>
    public void Rewind()
    {
        if (Countdown > 1)
        {
            Countdown = 1;
        }
    }

    /// <summary>Items skipped between two looks at whether anybody listens, while nobody does.</summary>
    public const int IdleInterval = 64;

    /// <summary>Nobody listens: look again after <see cref="IdleInterval"/> items, and forget the pace.</summary>
    public void Idle()
    {
        if (_everyItem)
        {
            Countdown = 0;
            return;
        }
        _lastSample = 0;
        _interval = 0;
        Countdown = IdleInterval;
    }
}
