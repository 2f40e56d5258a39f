using System.Diagnostics;

namespace Spindle.Parking;

/// <summary>
/// A worker's record of how its latest park ended, which decides whether its searches stay available longer before
/// the next park: work arriving in back-to-back bursts (an outside thread queueing batches and waiting for each, socket
/// completions arriving in waves) pays a futex wake per burst when the workers park in the
/// gaps, and the thread that queues pays the wake. Owner only: written and read by the worker's own thread.
/// </summary>
/// <remarks>
/// <para>The rule: the latest park ended within <see cref="ShortParkTicks"/> (200 µs: the gap between two bursts, not
/// idleness) and the worker has started at least <see cref="BurstItems"/> items since it woke (a burst's worth, not one
/// item of a trickle). A trickle of single items, however close together, never qualifies, so a pool fed one item every
/// 100 µs still parks at once between items and burns no CPU spinning through the gaps; a long park turns the rule off
/// until the next short one.</para>
/// <para>The cost is bounded: the extension only adds yields to a search (<see cref="Scheduling.IdleCoordinator.DefaultBurstYieldAttempts"/>),
/// and the first park after the bursts stop is long, so at most one extended search runs per idle period.</para>
/// </remarks>
internal sealed class BurstTracker
{
    /// <summary>A park shorter than this (200 µs) is a gap between bursts.</summary>
    public static readonly long ShortParkTicks = Stopwatch.Frequency / 5_000;

    /// <summary>Items started since the latest wake for it to count as a burst's wake.</summary>
    public const int BurstItems = 16;

    private bool _wokeSoon;
    private long _startedAtWake;

    /// <summary>The worker woke from a park that lasted <paramref name="parkedTicks"/>, having started <paramref name="started"/> items so far.</summary>
    public void NoteWoken(long parkedTicks, long started)
    {
        Debug.Assert(parkedTicks >= 0 && started >= 0);
        _wokeSoon = parkedTicks < ShortParkTicks;
        _startedAtWake = started;
    }

    /// <summary>Whether work has been arriving in back-to-back bursts, given the items started so far (see the remarks).</summary>
    public bool InBackToBackBursts(long started) => _wokeSoon && started - _startedAtWake >= BurstItems;
}
