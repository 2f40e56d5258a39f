using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Threading;

namespace Spindle.Queues;

/// <summary>A consumer's looks ahead of its producer: whether items past the head are published, and a short wait for a gap.</summary>
internal sealed partial class GlobalQueue
{
    /// <summary>
    /// Whether the item <paramref name="distance"/> positions past the head (0: the oldest) has been published, reading
    /// the head and that one slot (never the tail). A hint only: it may read a segment that has just been retired, and it
    /// answers true for a position past the end of the head segment. Consumers use it to keep a distance from a producer
    /// that is writing the slots right at the head.
    /// </summary>
    public bool IsPublishedAhead(int distance)
    {
        Debug.Assert(distance is >= 0 and < SegmentSize);
        Segment segment = Volatile.Read(ref _headSegment);
        long position = Volatile.Read(ref segment.Head.Value) + distance;
        if ((position & Mask) < distance)
        {
            return true; // in the next segment: not looked for (the answer only spares the caller a wait)
        }
        return Volatile.Read(ref segment.Slots[position & Mask].Sequence) == position + 1;
    }

    /// <summary>
    /// Consumer side: waits until the item <paramref name="gap"/> positions past the head is published, for at most
    /// <paramref name="maxWaits"/> short spins (<c>Thread.SpinWait(8)</c>, about 0.3 µs each on the 2-core VM), and
    /// gives up at once when a spin saw no new item published: then nobody is queueing right now (a burst of a few items
    /// has ended), and waiting for more would only delay the ones there. <paramref name="published"/>: a distance the
    /// caller has already seen published without a hole before it (0 when it has not looked), where the count resumes.
    /// </summary>
    /// <remarks>
    /// Why a consumer waits at all: one that has caught up with a producer takes each item just after it is published,
    /// reading the slot's cache line and freeing the slot, so the producer's next write into that line (two slots share
    /// one) has to fetch it back, and the two threads pass lines back and forth for every item or two. Given a moment,
    /// a producer at work gets far enough ahead that the lines the consumer takes are ones it has finished with. The
    /// looks read slots near the head (never the tail), and spinning touches nothing shared.
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public void WaitForGap(int gap, int maxWaits, int published = 0)
    {
        Debug.Assert(gap is > 1 and < SegmentSize);
        Debug.Assert(published >= 0 && published < gap);
        published = FurthestPublished(gap, published);
        for (int i = 0; i < maxWaits; i++)
        {
            Thread.SpinWait(8);
            if (IsPublishedAhead(gap))
            {
                return;
            }
            int now = FurthestPublished(gap, published);
            if (now == published)
            {
                return;
            }
            published = now;
        }
    }

    /// <summary>
    /// Tests only: the first half of an enqueue, as a producer stopped between its claim and its publish would leave it.
    /// Claims the next position of the tail segment (which must have room) and returns it for
    /// <see cref="PublishClaimedForTests"/>; until then consumers stop at it and <see cref="IsEmpty"/> is false.
    /// </summary>
    internal (object Segment, long Position) ClaimForTests()
    {
        while (true)
        {
            Segment segment = Volatile.Read(ref _tailSegment);
            long position = Volatile.Read(ref segment.Tail.Value);
            if (Volatile.Read(ref segment.Slots[position & Mask].Sequence) != position)
            {
                throw new InvalidOperationException("The tail segment has no free slot to claim.");
            }
            if (Interlocked.CompareExchange(ref segment.Tail.Value, position + 1, position) == position)
            {
                return (segment, position);
            }
        }
    }

    /// <summary>Tests only: the second half of the enqueue that <see cref="ClaimForTests"/> began.</summary>
    internal static void PublishClaimedForTests((object Segment, long Position) claim, in WorkItemEntry item)
    {
        ref Slot slot = ref ((Segment)claim.Segment).Slots[claim.Position & Mask];
        slot.Item = item;
        Volatile.Write(ref slot.Sequence, claim.Position + 1);
    }

    /// <summary>
    /// The furthest distance past the head, below <paramref name="gap"/>, up to which items are published without a
    /// hole, starting from <paramref name="known"/> (already seen published).
    /// </summary>
    private int FurthestPublished(int gap, int known)
    {
        while (known + 1 < gap && IsPublishedAhead(known + 1))
        {
            known++;
        }
        return known;
    }
}
