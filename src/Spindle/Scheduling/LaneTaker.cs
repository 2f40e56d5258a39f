using Spindle.Lanes;
using Spindle.Queues;

namespace Spindle.Scheduling;

/// <summary>
/// A worker as the lane set's dispatch sees it (see <see cref="ILaneTaker"/>): a struct, so that the set's generic
/// methods are compiled for it and call the worker directly.
/// </summary>
internal readonly struct LaneTaker(Worker worker) : ILaneTaker
{
    /// <inheritdoc/>
    public bool SeesNoPoolWork => worker.Local.IsEmpty && worker.Scheduler.GlobalQueueIsEmpty;

    /// <inheritdoc/>
    public bool TryTakeDefault(out WorkItemEntry item) => worker.Scheduler.Sources.TakePoolQueue(worker, out item);

    /// <inheritdoc/>
    public void EnterLane(Lane lane) => worker.EnterLane(lane);
}
