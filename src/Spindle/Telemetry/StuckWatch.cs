namespace Spindle.Telemetry;

/// <summary>
/// The stuck-item detector's watch of one thread that runs items (a worker, or the relief thread). Only the detector
/// touches it, on the pool's timer thread, one check at a time, so it needs no synchronization.
/// </summary>
internal sealed class StuckWatch
{
    private long _count = -1;    // the completed count when the detector first saw the thread inside an item; -1: not watching
    private long _since;    // the Stopwatch timestamp of that check
    private long _reported = -1; // the completed count of the item last reported (-1: none), so each item is reported once

    /// <summary>A watch that has seen nothing yet.</summary>
    /// <summary>Since when the watched item has run at least (valid once <see cref="IsDue"/> has answered true).</summary>
    public long Since => _since;

    /// <summary>
    /// Advances the watch with the thread's counts (the completed count read before the started count): true when the
    /// item it runs has run for <paramref name="thresholdTicks"/> at least and has not been reported yet.
    /// </summary>
    public bool IsDue(long completed, long started, long now, long thresholdTicks)
    {
        if (started == completed)
        {
            _count = -1; // between items
            return false;
        }
        if (completed != _count)
        {
            // A new item (or the first look at this one): it has run at least since now.
            _count = completed;
            _since = now;
            return false;
        }
        return now - _since >= thresholdTicks && _reported != completed;
    }

    /// <summary>The item after the <paramref name="completed"/>-th is reported (or judged not to be): never again.</summary>
    public void MarkReported(long completed) => _reported = completed;
}
