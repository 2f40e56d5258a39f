using System;
using System.Runtime.CompilerServices;
using Spindle.Queues;

namespace Spindle.Tests.Queues;

/// <summary>Queue entries that carry a number (as their boxed state), for tests of the queues alone.</summary>
internal static class Entries
{
    private static readonly Action<object?> s_callback = static _ => { };

    public static WorkItemEntry Numbered(int number) => new(s_callback, number, null);

    public static int NumberOf(in WorkItemEntry entry) => (int)entry.State!;

    /// <summary>An entry whose state is a fresh object that only the entry references; returns a weak reference to it.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static WorkItemEntry Tracked(out WeakReference state)
    {
        object payload = new byte[64];
        state = new WeakReference(payload);
        return new WorkItemEntry(s_callback, payload, null);
    }

    /// <summary>
    /// Owner side: pushes <paramref name="items"/> last to first through the ring's in-place push (as a take from the
    /// global queue does), so that LIFO pops return them first to last, and clears the span.
    /// </summary>
    public static void PushRangeReversed(this WorkStealingRing ring, Span<WorkItemEntry> items)
    {
        long bottom = ring.BeginPushInPlace(items.Length);
        for (int i = items.Length - 1; i >= 0; i--)
        {
            ring.WriteInPlace(bottom++, items[i]);
            items[i] = default;
        }
        ring.EndPushInPlace(bottom);
    }

    /// <summary>Queues a <see cref="Tracked"/> entry on <paramref name="queue"/>; returns the weak reference to its state.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static WeakReference EnqueueTracked(GlobalQueue queue)
    {
        if (!queue.TryEnqueue(Tracked(out WeakReference weak)))
        {
            throw new InvalidOperationException("The queue refused a tracked entry.");
        }
        return weak;
    }
}
