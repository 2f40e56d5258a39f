using System;
using System.Diagnostics;

namespace Spindle.Telemetry;

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

    private int _interval;
    private long _lastSample;

    /// <summary>A sample was taken at <paramref name="now"/>: sets the countdown to the next one.</summary>
    public void Sampled(long now)
    {
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
    }

    /// <summary>Items skipped between two looks at whether anybody listens, while nobody does.</summary>
    public const int IdleInterval = 64;

    /// <summary>Nobody listens: look again after <see cref="IdleInterval"/> items, and forget the pace.</summary>
    public void Idle()
    {
        _lastSample = 0;
        _interval = 0;
        Countdown = IdleInterval;
    }
}
