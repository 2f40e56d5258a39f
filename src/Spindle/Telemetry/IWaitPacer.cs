namespace Spindle.Telemetry;

/// <summary>
/// A queueing thread's own pace of queue-wait samples: a worker keeps one in its own fields (cheaper to reach than a
/// thread-static); any other thread uses the instruments' thread-static pacer.
/// </summary>
internal interface IWaitPacer
{
    /// <summary>Counts one enqueue down; true when this one is to be sampled.</summary>
    bool ShouldSampleWait();

    /// <summary>The enqueue chosen by <see cref="ShouldSampleWait"/> was sampled at <paramref name="now"/> (timestamp ticks).</summary>
    void NoteWaitSampled(long now);
}
