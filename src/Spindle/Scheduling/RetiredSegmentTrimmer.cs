using System;
using System.Runtime.InteropServices;

namespace Spindle.Scheduling;

/// <summary>
/// Trims the free lists of retired segments of one pool's queues (its global queue and its lanes') after each full
/// (generation 2) collection, so that a backlog that happened once does not pin its segments for the life of the pool.
/// See <see cref="Queues.GlobalQueue.TrimRetired"/> for what a trim keeps.
/// </summary>
/// <remarks>
/// <para>Driven by its own finalizer, as the runtime's internal callbacks of this kind are: the object is unreachable
/// from the start, and its finalizer re-registers it each time it runs. Having survived that way it is promoted, and once
/// in generation 2 it is finalized only by full collections; the first few runs, after younger collections, are passed
/// over by comparing <see cref="GC.CollectionCount(int)"/> for generation 2.</para>
/// <para>It holds the scheduler through a weak <see cref="GCHandle"/>, so it never keeps a pool alive. Not through a
/// <see cref="WeakReference{T}"/>: that object would become unreachable together with this one, and its own finalizer,
/// which may run first, frees its handle. The handle is freed here once the pool is gone or its shutdown has begun, and
/// the object then stops re-registering. It runs on the finalizer thread: the trim takes each queue's segment lock,
/// which producers and consumers hold only for a grow or a head move, and it throws nothing.</para>
/// </remarks>
internal sealed class RetiredSegmentTrimmer
{
    private GCHandle _scheduler;
    private int _lastFullCollection;

    private RetiredSegmentTrimmer(Scheduler scheduler)
    {
        _scheduler = GCHandle.Alloc(scheduler, GCHandleType.Weak);
        _lastFullCollection = GC.CollectionCount(2);
    }

    /// <summary>Starts trimming <paramref name="scheduler"/>'s queues after every full collection from now on.</summary>
    public static void Start(Scheduler scheduler) => _ = new RetiredSegmentTrimmer(scheduler);

    ~RetiredSegmentTrimmer()
    {
        if (_scheduler.Target is not Scheduler scheduler || scheduler.IsShutdownStarted)
        {
            _scheduler.Free();
            return;
        }
        int fullCollections = GC.CollectionCount(2);
        if (fullCollections != _lastFullCollection)
        {
            _lastFullCollection = fullCollections;
            scheduler.TrimRetiredSegments();
        }
        GC.ReRegisterForFinalize(this);
    }
}
