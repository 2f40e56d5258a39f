using System;
using System.Diagnostics;
using System.Threading;

namespace Spindle.Queues;

/// <summary>A producer's release of what one of its recent entries holds, for an entry that has become pointless.</summary>
internal sealed partial class GlobalQueue
{
    /// <summary>
    /// Looks at the last <paramref name="window"/> positions of the tail segment for a published entry
    /// (<paramref name="callback"/>, <paramref name="state"/>) and replaces its state with <paramref name="replacement"/>,
    /// so the queue no longer keeps <paramref name="state"/> reachable; the entry itself stays and is taken as usual, and
    /// its callback must treat <paramref name="replacement"/> as nothing to do. Returns whether it replaced a state.
    /// </summary>
    /// <remarks>
    /// <para>For an entry that can have been queued only once (a task is queued to its scheduler once): a
    /// compare-and-swap of the state from <paramref name="state"/> succeeds only while the slot still holds that entry.
    /// A consumer that claimed the slot meanwhile copies either state (each reference is read whole), and its
    /// callback runs either the replacement (nothing) or the original, which must then be harmless to run after the
    /// caller's own handling (a task whose start was won elsewhere does nothing). Once a consumer has cleared the slot,
    /// or a producer has reused it for another entry, the state is not <paramref name="state"/> and nothing is written.</para>
    /// <para>Best effort: an entry in an earlier segment, further back than the window, or inside a wrapper (a queue-wait
    /// sample) keeps its state until it is taken.</para>
    /// </remarks>
    public bool TryReplaceRecentState(object callback, object state, object replacement, int window)
    {
        Debug.Assert(window is > 0 and <= SegmentSize);
        Segment segment = Volatile.Read(ref _tailSegment);
        long head = Volatile.Read(ref segment.Head.Value);
        long tail = segment.EffectiveTail(head);
        for (long position = tail - 1; position >= Math.Max(head, tail - window); position--)
        {
            ref Slot slot = ref segment.Slots[position & Mask];
            if (Volatile.Read(ref slot.Sequence) != position + 1)
            {
                continue; // not published yet, or taken already
            }
            if (ReferenceEquals(Volatile.Read(ref slot.Item.State), state) && ReferenceEquals(slot.Item.Callback, callback))
            {
                return Interlocked.CompareExchange(ref slot.Item.State, replacement, state) == state;
            }
        }
        return false;
    }
}
