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
/// idleness) and the worker has started at least <see cref="BurstItems"/> items since it woke without a search having
/// to wait <see cref="TrickleWaitTicks"/> or more into its yields for one of them (a burst's worth, not items of a
/// trickle). A trickle of single items, however close together, never qualifies, so a pool fed one item every 100 µs
/// still parks at once between items and burns no CPU spinning through the gaps; a long park turns the rule off until
/// the next short one.</para>
/// <para>Why the long waits count: a searcher that catches a trickle's next items in its spin and yields (they arrive while
/// it searches) starts many items without parking, and once those counted as a burst the longer search caught still
/// more of them, a state that fed itself. Beside one item per 100 µs from outside (2 cores, the comparison program's
/// <c>idle-cpu</c>), the pool's CPU over 3 s read 255-646 ms, and 1,225 ms in one run, against 245-410 ms with no
/// extension at all. A burst's items are found within the spin: its producer is at most a microsecond ahead. A
/// hand-off between two parties (a channel's producer waiting for its consumer) is found within microseconds of
/// yielding, and beside busy processes within tens of them; counting those as a trickle made every hop of a channel
/// ping-pong beside two busy loops park (20-27 µs a hop against 11-19, ten to a hundred times the parks), hence the
/// wait's length, not the yields alone.</para>
/// <para>The cost is bounded: the extension only adds yields to a search (<see cref="Scheduling.IdleCoordinator.DefaultBurstYieldAttempts"/>),
/// and the first park after the bursts stop is long, so at most one extended search runs per idle period.</para>
/// </remarks>
internal sealed class BurstTracker
{
    /// <summary>A park shorter than this (200 µs) is a gap between bursts.</summary>
    public static readonly long ShortParkTicks = Stopwatch.Frequency / 5_000;

    /// <summary>
    /// A search that had to yield and found its item only this long (80 µs) after its yields began found a trickle's
    /// next item (see <see cref="NoteFoundAfterYielding"/>): waiting that long costs more than the wake a park would need. One
    /// item per 100 µs from outside is found about 95 µs into the yields; a channel's hop beside two busy loops in
    /// 10-20 µs, and at 50 µs enough of them still crossed the line to make a few runs park at every hop.
    /// </summary>
    public static readonly long TrickleWaitTicks = Stopwatch.Frequency / 12_500;

    /// <summary>Items started since the latest wake for it to count as a burst's wake.</summary>
    public const int BurstItems = 16;

    /// <summary>
    /// Searches in a row that found nothing (the worker then went to park) before the next ones stop spinning and
    /// yielding (see <see cref="SpinPays"/>).
    /// </summary>
    public const int FutileSearchesBeforeParkingAtOnce = 4;

    /// <summary>
    /// Once the spin has stopped, how many searches skip it before one spins again as a probe (so one in 32 spins):
    /// without the probe, an item found while spinning, one of the ways back, could never happen.
    /// </summary>
    public const int SkippedSearchesBetweenProbes = 31;

    /// <summary>
    /// A park shorter than this (50 µs, measured until the woken worker runs again) ended soon enough that a search's
    /// spin and yields (about 10 µs on the 2-core VM) could have bridged a good part of it: spinning pays again.
    /// </summary>
    public static readonly long SpinPaysParkTicks = Stopwatch.Frequency / 20_000;

    private const int ProbeState = FutileSearchesBeforeParkingAtOnce + SkippedSearchesBetweenProbes;

    private bool _wokeSoon;
    private long _startedAtWake;
    // Searches in vain in a row, up to the spin's stop (FutileSearchesBeforeParkingAtOnce); past it, the searches
    // skipped since the stop or the last probe, the probe's search at ProbeState.
    private int _futileSearches;

    /// <summary>
    /// Whether the next search should spin and yield before it parks: not after <see cref="FutileSearchesBeforeParkingAtOnce"/>
    /// searches in a row found nothing, except one probe in <see cref="SkippedSearchesBetweenProbes"/> + 1, until a
    /// search finds its item while spinning or yielding, the look on the way to a park finds work, or a park ends within
    /// <see cref="SpinPaysParkTicks"/>.
    /// </summary>
    /// <remarks>
    /// A trickle of items further apart than a spin (one item per millisecond, or per 100 µs) met a spin and four yields
    /// after every item, about 10 µs of a core each time, and then parked anyway: 20 of the 50 ms a pool burned over 3 s
    /// of one item per millisecond (the comparison program's <c>idle-cpu</c>). A worker that skips the spin parks at once
    /// and is woken by the next enqueue, which it would have been anyway. Work that comes back within a spin's reach (a
    /// hand-off, the items of a burst) is found by the next probe, by the look before the park, or wakes the worker soon
    /// after its park, and any of these turns the spin back on.
    /// </remarks>
    public bool SpinPays => _futileSearches < FutileSearchesBeforeParkingAtOnce || _futileSearches == ProbeState;

    /// <summary>A search found its item at <paramref name="attempt"/> (0: at its first look, which says nothing of the spin).</summary>
    public void NoteFound(int attempt)
    {
        if (attempt > 0)
        {
            _futileSearches = 0;
        }
    }

    /// <summary>A search ended without an item: the worker goes to park.</summary>
    public void NoteFutileSearch()
    {
        Debug.Assert(_futileSearches is >= 0 and <= ProbeState);
        // A probe in vain starts the skipped searches over; otherwise count on.
        _futileSearches = _futileSearches == ProbeState ? FutileSearchesBeforeParkingAtOnce : _futileSearches + 1;
    }

    /// <summary>
    /// The look on the way to a park (after the worker went on the idle stack) found work: it came within a spin's reach
    /// of the search that gave up.
    /// </summary>
    public void NoteFoundWhileParking() => _futileSearches = 0;

    /// <summary>The worker woke from a park that lasted <paramref name="parkedTicks"/>, having started <paramref name="started"/> items so far.</summary>
    public void NoteWoken(long parkedTicks, long started)
    {
        Debug.Assert(parkedTicks >= 0 && started >= 0);
        _wokeSoon = parkedTicks < ShortParkTicks;
        _startedAtWake = started;
        if (parkedTicks < SpinPaysParkTicks)
        {
            _futileSearches = 0;
        }
    }

    /// <summary>
    /// A search found its item <paramref name="waitedTicks"/> after it had started yielding, with <paramref name="started"/>
    /// items started so far. From <see cref="TrickleWaitTicks"/> on it was a trickle's next item, not the next of a
    /// burst: the items started so far came one at a time and no longer count towards a burst.
    /// </summary>
    public void NoteFoundAfterYielding(long waitedTicks, long started)
    {
        Debug.Assert(started >= _startedAtWake);
        if (waitedTicks >= TrickleWaitTicks)
        {
            _startedAtWake = started;
        }
    }

    /// <summary>Whether work has been arriving in back-to-back bursts, given the items started so far (see the remarks).</summary>
    public bool InBackToBackBursts(long started) => _wokeSoon && started - _startedAtWake >= BurstItems;
}
