using System.Threading;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Telemetry;

namespace Spindle.Lanes;

/// <summary>
/// A long-running item of a lane (<see cref="WorkItemOptions.LongRunning"/>, or a task created with
/// <see cref="System.Threading.Tasks.TaskCreationOptions.LongRunning"/>): it waits in the lane's queue like any other
/// item, so the lane's priority and cap hold, and runs inside a blocking region, so the pool adds a thread for the
/// others while it runs instead of losing a worker to it. Shutdown decides on it as on the entry it wraps.
/// </summary>
internal sealed class LongRunningLaneItem(WorkItemEntry entry) : IWorkItem, IShutdownAware, IEntryWrapper
{
    private readonly WorkItemEntry _entry = entry;

    WorkItemEntry IEntryWrapper.WrappedEntry => _entry;

    object? IShutdownAware.QueuedCallback => null;

    ShutdownOutcome IShutdownAware.OnCancelPending() => _entry.FindShutdownOwner()?.OnCancelPending() ?? ShutdownOutcome.Cancelled;

    public void Execute()
    {
        using (BlockingRegion.Enter())
        {
            if (_entry.Context is ExecutionContext context)
            {
                ExecutionContext.Run(context, static state => ((LongRunningLaneItem)state!)._entry.Invoke(), this);
            }
            else
            {
                _entry.Invoke();
            }
        }
    }
}
