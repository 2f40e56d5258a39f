using System;

namespace Spindle.Compare.Infrastructure;

/// <summary>Allocation and collection counters at one moment; subtract two to measure a region.</summary>
internal readonly record struct GcSnapshot(long AllocatedBytes, int Gen0, int Gen1, int Gen2)
{
    /// <summary>Precise total of bytes allocated by all threads so far, and the collection counts.</summary>
    public static GcSnapshot Take() =>
        new(GC.GetTotalAllocatedBytes(precise: true), GC.CollectionCount(0), GC.CollectionCount(1), GC.CollectionCount(2));

    public static GcSnapshot operator -(GcSnapshot end, GcSnapshot start) =>
        new(end.AllocatedBytes - start.AllocatedBytes, end.Gen0 - start.Gen0, end.Gen1 - start.Gen1, end.Gen2 - start.Gen2);

    /// <summary>
    /// Full blocking collection, so a timed region starts from a clean heap. The process meter's measured part restarts
    /// after it, so that these forced collections are not counted as the workload's.
    /// </summary>
    public static void CollectFully()
    {
        GC.Collect(GC.MaxGeneration, GCCollectionMode.Forced, blocking: true, compacting: true);
        GC.WaitForPendingFinalizers();
        GC.Collect(GC.MaxGeneration, GCCollectionMode.Forced, blocking: true, compacting: true);
        ProcessMeter.MarkMeasuredStart();
    }
}
