using System;

namespace Spindle;

/// <summary>
/// Thrown by a queueing call on a bounded <see cref="WorkerPoolLane"/> whose <see cref="LaneOptions.FullMode"/> is
/// <see cref="LaneFullMode.Reject"/> when the lane holds <see cref="LaneOptions.QueueLimit"/> items: the item was not
/// queued and will not run.
/// </summary>
public sealed class WorkRejectedException : InvalidOperationException
{
    /// <summary>Creates the exception with a default message.</summary>
    public WorkRejectedException()
        : base("The lane is full and rejects new work.")
    {
    }

    /// <summary>Creates the exception with <paramref name="message"/>.</summary>
    public WorkRejectedException(string message)
        : base(message)
    {
    }

    /// <summary>Creates the exception with <paramref name="message"/> and the exception that caused it.</summary>
    public WorkRejectedException(string message, Exception innerException)
        : base(message, innerException)
    {
    }

    /// <summary>The exception a full lane that rejects throws, naming the lane and its limit.</summary>
    internal static WorkRejectedException ForFullLane(LaneOptions options) =>
        new($"The lane '{options.Name}' holds {options.QueueLimit} queued items, its limit, and rejects new work.");
}
