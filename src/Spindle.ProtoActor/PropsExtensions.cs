using System;
using Proto;

namespace Spindle.ProtoActor;

/// <summary>Puts an actor's props on a Spindle pool or lane.</summary>
public static class PropsExtensions
{
    /// <summary>
    /// Runs the actor on <paramref name="dispatcher"/>'s pool or lane, with a <see cref="WorkerPoolMailbox"/> (unbounded)
    /// so that its messages cost no allocation of their own: the same as
    /// <c>props.WithDispatcher(dispatcher).WithMailbox(WorkerPoolMailbox.Create)</c>. This replaces a mailbox the props
    /// already had; to keep a bounded mailbox or statistics hooks, set the dispatcher and a
    /// <see cref="WorkerPoolMailbox"/> made with them yourself.
    /// </summary>
    /// <param name="props">The actor's props.</param>
    /// <param name="dispatcher">The dispatcher; one may serve any number of actors.</param>
    /// <returns>New props (Proto.Actor's props are immutable).</returns>
    /// <exception cref="ArgumentNullException">An argument is null.</exception>
    public static Props WithWorkerPool(this Props props, WorkerPoolDispatcher dispatcher)
    {
        ArgumentNullException.ThrowIfNull(props);
        ArgumentNullException.ThrowIfNull(dispatcher);
        return props.WithDispatcher(dispatcher).WithMailbox(WorkerPoolMailbox.Create);
    }
}
