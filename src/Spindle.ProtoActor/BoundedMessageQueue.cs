using System.Threading;
using System.Threading.Channels;
using Proto.Mailbox;

namespace Spindle.ProtoActor;

/// <summary>
/// A bounded queue of user messages whose <see cref="HasMessages"/> and <see cref="Length"/> are the channel's own count,
/// so that a message pushed while the mailbox's run is ending is seen by that run's last look.
/// </summary>
/// <remarks>
/// Proto.Actor's <c>BoundedMailboxQueue</c> answers <see cref="HasMessages"/> from a flag that only its consumer writes
/// (on each pop), so a message pushed after the run's last empty pop, whose poster then found the run still holding the
/// mailbox, stays unseen until the next post; and its length counts messages a dropping mode discarded.
/// </remarks>
internal sealed class BoundedMessageQueue : IMailboxQueue
{
    private readonly Channel<object> _messages;

    public BoundedMessageQueue(int size, BoundedChannelFullMode fullMode)
    {
        _messages = Channel.CreateBounded<object>(new BoundedChannelOptions(size)
        {
            FullMode = fullMode,
            SingleReader = true, // only the mailbox's run reads
        });
    }

    public bool HasMessages => _messages.Reader.Count != 0;

    public int Length => _messages.Reader.Count;

    /// <summary>
    /// Adds a message; in <see cref="BoundedChannelFullMode.Wait"/> a full queue blocks the sender until the actor takes
    /// one (inside a blocking region on a Spindle worker, so that the pool can replace the blocked worker).
    /// </summary>
    public void Push(object message)
    {
        // Only Wait can refuse a write: the dropping modes always accept one (and drop what their mode says).
        if (_messages.Writer.TryWrite(message))
        {
            return;
        }
        using (WorkerPool.EnterBlockingRegion())
        {
            _messages.Writer.WriteAsync(message, CancellationToken.None).AsTask().GetAwaiter().GetResult();
        }
    }

    public object? Pop() => _messages.Reader.TryRead(out object? message) ? message : null;
}
