using System;

namespace Spindle;

/// <summary>
/// Settings for a <see cref="WorkerPoolLane"/>, passed to <see cref="WorkerPool.CreateLane(LaneOptions)"/>. The pool
/// validates them and keeps its own copy.
/// </summary>
public sealed class LaneOptions
{
    /// <summary>The largest <see cref="Share"/> a lane accepts.</summary>
    public const int MaxShare = 1000;

    /// <summary>Name of the lane, used in diagnostics. Defaults to "lane".</summary>
    public string Name { get; set; } = "lane";

    /// <summary>The lane's priority class. Defaults to <see cref="LanePriority.Normal"/>.</summary>
    public LanePriority Priority { get; set; } = LanePriority.Normal;

    /// <summary>
    /// The lane's weight among the runnable lanes of its class: a lane with share 3 starts three items for every one
    /// of a lane with share 1 while both have work (shares divide dispatches, so they divide time when items are of
    /// similar length). The pool's own queue takes part in the Normal class with share 1. Between 1 and
    /// <see cref="MaxShare"/>; defaults to 1.
    /// </summary>
    public int Share { get; set; } = 1;

    /// <summary>
    /// The most items of the lane that run at once, blocked ones included; null (the default) for no cap beyond the
    /// pool's threads. 1 makes a serial lane: its items run one at a time, in the order they were queued (a strand or an
    /// actor's mailbox). Items waiting for a slot stay queued and hold no worker. Must be at least 1.
    /// </summary>
    public int? MaxConcurrency { get; set; }

    /// <summary>
    /// The most items the lane holds queued (not yet started); null (the default) for no bound. Continuations of work
    /// the lane already accepted (posts to its <see cref="WorkTarget.SynchronizationContext"/>, tasks queued to its
    /// <see cref="WorkTarget.TaskScheduler"/>) are never refused or delayed by the bound. Must be at least 1.
    /// </summary>
    public int? QueueLimit { get; set; }

    /// <summary>What a queueing call does when the lane is full. Defaults to <see cref="LaneFullMode.Wait"/>.</summary>
    public LaneFullMode FullMode { get; set; } = LaneFullMode.Wait;

    internal LaneOptions Validate()
    {
        ArgumentNullException.ThrowIfNull(Name, nameof(Name));
        if (Name.Length == 0)
        {
            throw new ArgumentException("The lane name must not be empty.", nameof(Name));
        }
        if (!Enum.IsDefined(Priority))
        {
            throw new ArgumentOutOfRangeException(nameof(Priority), Priority, "Unknown lane priority.");
        }
        if (Share < 1 || Share > MaxShare)
        {
            throw new ArgumentOutOfRangeException(nameof(Share), Share, $"The share must be between 1 and {MaxShare}.");
        }
        if (MaxConcurrency is int cap && cap < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(MaxConcurrency), cap, "The concurrency cap must be at least 1, or null for no cap.");
        }
        if (QueueLimit is int limit && limit < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(QueueLimit), limit, "The queue limit must be at least 1, or null for no bound.");
        }
        if (!Enum.IsDefined(FullMode))
        {
            throw new ArgumentOutOfRangeException(nameof(FullMode), FullMode, "Unknown full mode.");
        }
        return (LaneOptions)MemberwiseClone();
    }
}
