using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;
using Xunit;
using static Spindle.Tests.Queues.Entries;

namespace Spindle.Tests;

/// <summary>
/// The owner takes back an entry it queued last from its LIFO slot (where an entry wrapped as a work item goes) or from
/// its ring's newest end, and nothing else.
/// </summary>
public sealed class WorkerLocalQueueTakeBackTests
{
    private static WorkerLocalQueue NewQueue() => new(new WorkStealingRing(8), new RunningItemRecord());

    [Fact]
    public void AWrappedEntryInTheLifoSlot_IsTakenBack_AndTheRingIsLeftAlone()
    {
        WorkerLocalQueue queue = NewQueue();
        WorkItemEntry inRing = Numbered(1);
        queue.Ring.TryPush(inRing);
        WorkItemEntry wrapped = Numbered(2);
        queue.PushToLifoSlot(new LongRunningLaneItem(wrapped), scheduler: null!); // an empty slot: nothing is displaced

        Assert.True(queue.TryTakeBackNewest(wrapped.Callback, wrapped.State!));

        Assert.False(queue.HoldsLifoItem);
        Assert.Equal(1, queue.Ring.Count);
        Assert.False(queue.TryTakeBackNewest(wrapped.Callback, wrapped.State!)); // once only
    }

    [Fact]
    public void TheRingsNewestEntry_IsTakenBack_WhileTheLifoSlotHoldsSomethingElse()
    {
        WorkerLocalQueue queue = NewQueue();
        queue.PushToLifoSlot(new LongRunningLaneItem(Numbered(0)), scheduler: null!);
        WorkItemEntry newest = Numbered(3);
        queue.Ring.TryPush(newest);

        Assert.True(queue.TryTakeBackNewest(newest.Callback, newest.State!));

        Assert.True(queue.HoldsLifoItem);
        Assert.True(queue.Ring.IsEmpty);
    }

    [Fact]
    public void AnEntryAThiefTookFromTheLifoSlot_IsNotTakenBack()
    {
        WorkerLocalQueue queue = NewQueue();
        WorkItemEntry wrapped = Numbered(5);
        queue.PushToLifoSlot(new LongRunningLaneItem(wrapped), scheduler: null!);
        Assert.True(queue.TryTakeLifoSlot(out WorkItemEntry stolen));
        Assert.True(stolen.Holds(wrapped.Callback, wrapped.State));

        Assert.False(queue.TryTakeBackNewest(wrapped.Callback, wrapped.State!));
        Assert.True(queue.IsEmpty);
    }
}
