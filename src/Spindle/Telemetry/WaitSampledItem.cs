using System.Diagnostics;
using System.Threading;
using Spindle.Lanes;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Telemetry;

/// <summary>
/// An item chosen by its queueing thread's <see cref="Primitives.SamplePacer"/> while a listener has the queue-wait histogram
/// enabled: it wraps the item's entry with the time it was queued, records the wait when a worker starts it, then runs
/// the entry in its own ExecutionContext. Shutdown decides on it as on the entry it wraps.
/// </summary>
internal sealed class WaitSampledItem(WorkItemEntry entry, long queuedAt, PoolMetrics metrics, Lane? lane) : IWorkItem, IShutdownAware, IEntryWrapper
{
    private readonly WorkItemEntry _entry = entry;

    WorkItemEntry IEntryWrapper.WrappedEntry => _entry;

    object? IShutdownAware.QueuedCallback => null;

    ShutdownOutcome IShutdownAware.OnCancelPending() => _entry.FindShutdownOwner()?.OnCancelPending() ?? ShutdownOutcome.Cancelled;

    public void Execute()
    {
        metrics.RecordWait(queuedAt, Stopwatch.GetTimestamp(), lane);
        if (_entry.Context is ExecutionContext context && !DefaultContext.Is(context))
        {
            ExecutionContext.Run(context, static state => ((WaitSampledItem)state!)._entry.Invoke(), this);
        }
        else
        {
            _entry.Invoke();
        }
    }
}
