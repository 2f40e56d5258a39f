using Spindle.Queues;

namespace Spindle.Lanes;

/// <summary>
/// The worker a lane set hands items to, as the set sees it: whether it sees any of the pool's own work, the pool's own
/// queue as the Normal class's default member, and the note of the lane an item came from. Implemented by a struct over
/// the worker, so that the set's generic dispatch methods are compiled for it with direct calls.
/// </summary>
internal interface ILaneTaker
{
    /// <summary>Whether the worker sees none of the pool's own work: its local queues and the pool's queue are empty.</summary>
    bool SeesNoPoolWork { get; }

    /// <summary>Takes from the pool's own queues (the default lane of the Normal class).</summary>
    bool TryTakeDefault(out WorkItemEntry item);

    /// <summary>The item handed to the worker belongs to <paramref name="lane"/>.</summary>
    void EnterLane(Lane lane);
}
