using System;
using System.Threading;
using Spindle.Queues;
using Xunit;

namespace Spindle.Tests.Queues;

/// <summary>
/// The queues copy entries into their arrays field by field (<see cref="WorkItemEntry.Store"/>): every field arrives,
/// and an entry without a context leaves none behind from what the slot held before.
/// </summary>
public sealed class WorkItemEntryStoreTests
{
    private static readonly Action<object?> s_callback = static _ => { };

    private static ExecutionContext CapturedContext()
    {
        var local = new AsyncLocal<int> { Value = 7 };
        ExecutionContext context = ExecutionContext.Capture()!;
        local.Value = 0;
        return context;
    }

    [Fact]
    public void Store_CopiesTheCallbackTheStateAndTheContext()
    {
        object state = new();
        ExecutionContext context = CapturedContext();
        WorkItemEntry slot = default;

        WorkItemEntry.Store(ref slot, new WorkItemEntry(s_callback, state, context));

        Assert.Same(s_callback, slot.Callback);
        Assert.Same(state, slot.State);
        Assert.Same(context, slot.Context);
    }

    [Fact]
    public void Store_OfAnEntryWithoutContext_ClearsTheContextTheSlotHeld()
    {
        var slot = new WorkItemEntry(s_callback, new object(), CapturedContext());

        WorkItemEntry.Store(ref slot, new WorkItemEntry(s_callback, null, null));

        Assert.Null(slot.State);
        Assert.Null(slot.Context);
    }

    [Fact]
    public void TheRingAndTheGlobalQueue_CarryEachEntrysContext_WhetherItHasOneOrNot()
    {
        ExecutionContext context = CapturedContext();
        var queue = new GlobalQueue();
        var ring = new WorkStealingRing(capacity: 64);
        for (int i = 0; i < 40; i++) // past the ring's first slots: the growth copies them too
        {
            Assert.True(ring.TryPush(new WorkItemEntry(s_callback, i, i % 2 == 0 ? context : null)));
            Assert.True(queue.TryEnqueue(new WorkItemEntry(s_callback, 100 + i, i % 3 == 0 ? context : null)));
        }
        for (int i = 39; i >= 0; i--)
        {
            Assert.True(ring.TryPop(out WorkItemEntry popped));
            Assert.Equal(i, (int)popped.State!);
            Assert.Same(i % 2 == 0 ? context : null, popped.Context);
        }
        int taken = queue.TryDequeueIntoRing(ring, 32, gapWaits: 0, out WorkItemEntry first);
        Assert.Equal(32, taken);
        Assert.Equal(100, (int)first.State!);
        Assert.Same(context, first.Context);
        for (int i = 1; i < 32; i++)
        {
            Assert.True(ring.TryPop(out WorkItemEntry popped));
            Assert.Equal(100 + i, (int)popped.State!);
            Assert.Same(i % 3 == 0 ? context : null, popped.Context);
        }
    }
}
