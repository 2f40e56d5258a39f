using Spindle.Queues;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests.Queues;

/// <summary>
/// A producer replaces the state of one of its recent entries: only a published entry with that callback and state,
/// within the window, and only once; the entry keeps its place in the queue.
/// </summary>
public sealed class GlobalQueueReplaceStateTests
{
    private static readonly object s_replacement = new();

    [Fact]
    public void ARecentEntry_KeepsItsPlace_WithTheReplacementAsItsState()
    {
        var queue = new GlobalQueue();
        queue.TryEnqueue(Numbered(0));
        WorkItemEntry target = Numbered(1);
        queue.TryEnqueue(target);
        queue.TryEnqueue(Numbered(2));

        Assert.True(queue.TryReplaceRecentState(target.Callback, target.State!, s_replacement, window: 4));
        Assert.False(queue.TryReplaceRecentState(target.Callback, target.State!, s_replacement, window: 4)); // once only

        Assert.Equal(3, queue.Count);
        var batch = new WorkItemEntry[3];
        Assert.Equal(3, queue.TryDequeueBatch(batch));
        Assert.Equal(0, NumberOf(batch[0]));
        Assert.Same(target.Callback, batch[1].Callback);
        Assert.Same(s_replacement, batch[1].State);
        Assert.Equal(2, NumberOf(batch[2]));
    }

    [Fact]
    public void AnEntryBeyondTheWindow_OrWithAnotherCallback_IsLeftAlone()
    {
        var queue = new GlobalQueue();
        WorkItemEntry old = Numbered(0);
        queue.TryEnqueue(old);
        queue.TryEnqueue(Numbered(1));
        queue.TryEnqueue(Numbered(2));

        Assert.False(queue.TryReplaceRecentState(old.Callback, old.State!, s_replacement, window: 2));
        Assert.False(queue.TryReplaceRecentState(new System.Action<object?>(static _ => { }), old.State!, s_replacement, window: 4));

        var batch = new WorkItemEntry[1];
        Assert.Equal(1, queue.TryDequeueBatch(batch));
        Assert.Same(old.State, batch[0].State);
    }

    [Fact]
    public void ATakenEntry_IsNotFound()
    {
        var queue = new GlobalQueue();
        WorkItemEntry entry = Numbered(5);
        queue.TryEnqueue(entry);
        var batch = new WorkItemEntry[1];
        Assert.Equal(1, queue.TryDequeueBatch(batch));

        Assert.False(queue.TryReplaceRecentState(entry.Callback, entry.State!, s_replacement, window: 4));
        Assert.True(queue.IsEmpty);
        Assert.Same(entry.State, batch[0].State);
    }
}
