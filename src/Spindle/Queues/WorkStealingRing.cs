using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Threading;

namespace Spindle.Queues;

/// <summary>
/// A worker's bounded local queue: the owner pushes and pops at the bottom (LIFO) without atomic read-modify-write
/// except on the last item; any other thread steals from the top (FIFO) with one compare-and-swap per item.
/// </summary>
/// <remarks>
/// <para>
/// Protocol (Chase and Lev's deque over a fixed power-of-two ring; indices are 64-bit and never wrap):
/// </para>
/// <list type="bullet">
/// <item><c>_bottom</c> is written only by the owner. A push writes the slot, then publishes it with a release store of
/// <c>_bottom</c>, so a thief that reads the new <c>_bottom</c> also reads the slot's contents.</item>
/// <item><c>_top</c> only ever grows, and only by a successful CAS (by a thief, or by the owner when it takes the last
/// item or takes the oldest item for fairness). Whoever wins the CAS from <c>t</c> to <c>t + 1</c> owns item <c>t</c>.</item>
/// <item>A pop stores <c>_bottom = b - 1</c>, then issues a full fence, then reads <c>_top</c>. A thief reads
/// <c>_top</c>, fences, then reads <c>_bottom</c>. The two fences make the pair sequentially consistent (the
/// store-buffering case): either the thief sees the decremented bottom and leaves item <c>b - 1</c> alone, or the owner
/// sees the thief's <c>_top</c>. When only one item is left (<c>t == b - 1</c>) both sides CAS <c>_top</c>, so exactly one
/// wins.</item>
/// <item>A thief copies the slot before its CAS. The copy may be torn if the owner reused the slot meanwhile, but then
/// <c>_top</c> has moved and the CAS fails, so the torn copy is discarded.</item>
/// <item>Slots taken by thieves still reference their item. The owner clears them (<c>_clearedTo</c>, owner-only) before
/// each push, so a completed item's state is not kept alive by the ring. This is safe because a push never reaches a
/// slot whose index is more than one lap beyond <c>_top</c>, and every slot below <c>_top</c> belongs to an item that
/// has been claimed.</item>
/// </list>
/// <para>
/// Stealing "half" is a loop of single-item steals (each a CAS), because a Chase–Lev thief cannot claim a range with one
/// CAS without racing the owner's fence-only pop. Steals are rare next to local pushes and pops, so the owner's path is
/// what is kept cheap.
/// </para>
/// </remarks>
internal sealed class WorkStealingRing
{
    /// <summary>Default number of slots (a power of two).</summary>
    public const int DefaultCapacity = 256;

    private readonly WorkItemEntry[] _slots;
    private readonly long _mask;
    private PaddedInt64 _top;
    private PaddedInt64 _bottom;
    private long _clearedTo; // owner-only

    public WorkStealingRing()
        : this(DefaultCapacity)
    {
    }

    public WorkStealingRing(int capacity)
    {
        if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        {
            throw new ArgumentOutOfRangeException(nameof(capacity), capacity, "Capacity must be a power of two, at least 2.");
        }
        _slots = new WorkItemEntry[capacity];
        _mask = capacity - 1;
    }

    public int Capacity => _slots.Length;

    /// <summary>The index of the oldest item (moves when a thief or the owner takes from the bottom).</summary>
    public long Top => Volatile.Read(ref _top.Value);

    /// <summary>Items in the ring right now (a snapshot; exact only when no one is pushing, popping or stealing).</summary>
    public int Count
    {
        get
        {
            long t = Volatile.Read(ref _top.Value);
            long b = Volatile.Read(ref _bottom.Value);
            return b > t ? (int)Math.Min(b - t, _slots.Length) : 0;
        }
    }

    /// <summary>Whether a thief would find nothing to take right now.</summary>
    public bool IsEmpty => Volatile.Read(ref _bottom.Value) <= Volatile.Read(ref _top.Value);

    /// <summary>Owner only: adds an item at the bottom. Returns false when the ring is full.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryPush(in WorkItemEntry item) => TryPush(item, out _);

    /// <summary>
    /// Owner only: adds an item at the bottom. Returns false when the ring is full. <paramref name="hadItems"/> tells
    /// whether the ring held anything before the push (a snapshot, like <see cref="IsEmpty"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryPush(in WorkItemEntry item, out bool hadItems)
    {
        long b = _bottom.Value;
        long t = Volatile.Read(ref _top.Value);
        hadItems = b > t;
        if (b - t >= _slots.Length)
        {
            return false;
        }
        if (_clearedTo != t)
        {
            ClearTakenSlots(t);
        }
        _slots[b & _mask] = item;
        Volatile.Write(ref _bottom.Value, b + 1);
        AssertInvariants();
        return true;
    }

    /// <summary>
    /// Owner only: pushes <paramref name="items"/> last to first (so that LIFO pops return them first to last) with one
    /// publication of <c>_bottom</c>, and clears the span. The caller guarantees the room (see <see cref="Count"/>).
    /// </summary>
    public void PushRangeReversed(Span<WorkItemEntry> items)
    {
        long b = _bottom.Value;
        long t = Volatile.Read(ref _top.Value);
        Debug.Assert(b - t + items.Length <= _slots.Length, "The caller checked the room; only the owner pushes.");
        if (_clearedTo != t)
        {
            ClearTakenSlots(t);
        }
        for (int i = items.Length - 1; i >= 0; i--)
        {
            _slots[b & _mask] = items[i];
            items[i] = default;
            b++;
        }
        Volatile.Write(ref _bottom.Value, b);
        AssertInvariants();
    }

    /// <summary>Owner only: removes the newest item.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryPop(out WorkItemEntry item)
    {
        long b = _bottom.Value - 1;
        if (b < Volatile.Read(ref _top.Value))
        {
            // Empty (a stale _top can only be lower than the real one, so this never hides an item).
            item = default;
            return false;
        }
        // The store must be visible before _top is read (see the class remarks); the exchange is both the store (atomic
        // also on 32-bit platforms) and the full fence.
        Interlocked.Exchange(ref _bottom.Value, b);
        long t = Volatile.Read(ref _top.Value);
        ref WorkItemEntry slot = ref _slots[b & _mask];
        if (t < b)
        {
            item = slot;
            slot = default;
            return true;
        }
        if (t == b)
        {
            item = slot;
            bool won = Interlocked.CompareExchange(ref _top.Value, t + 1, t) == t;
            Volatile.Write(ref _bottom.Value, t + 1);
            if (won)
            {
                slot = default;
                return true;
            }
            item = default;
            return false;
        }
        // A thief emptied the ring between our first check and the fence.
        Volatile.Write(ref _bottom.Value, t);
        item = default;
        return false;
    }

    /// <summary>
    /// Owner only: removes the newest item if it is the entry (<paramref name="callback"/>, <paramref name="state"/>),
    /// directly or inside one of the library's entry wrappers (<see cref="WorkItemEntry.Holds"/>), and no thief has
    /// claimed it; otherwise changes nothing and returns false.
    /// </summary>
    /// <remarks>
    /// Only the owner writes slots, so its read of the newest slot is current; the pop that follows takes exactly that
    /// slot, or fails when a thief has claimed it meanwhile (then the thief has it, as it would have anyway).
    /// </remarks>
    public bool TryPopIfNewest(object callback, object? state)
    {
        long b = _bottom.Value;
        if (b <= Volatile.Read(ref _top.Value))
        {
            return false;
        }
        if (!_slots[(b - 1) & _mask].Holds(callback, state))
        {
            return false;
        }
        if (!TryPop(out WorkItemEntry popped))
        {
            return false;
        }
        Debug.Assert(popped.Holds(callback, state), "Only the owner pushes, so the newest slot it read is the one its pop takes.");
        return true;
    }

    /// <summary>Any thread: takes the oldest item. Returns false when the ring looked empty.</summary>
    public bool TrySteal(out WorkItemEntry item)
    {
        var spinner = new SpinWait();
        while (true)
        {
            long t = Volatile.Read(ref _top.Value);
            Interlocked.MemoryBarrier(); // pairs with the fence in TryPop
            long b = Volatile.Read(ref _bottom.Value);
            if (t >= b)
            {
                item = default;
                return false;
            }
            item = _slots[t & _mask];
            if (Interlocked.CompareExchange(ref _top.Value, t + 1, t) == t)
            {
                Debug.Assert(item.Callback is not null, "A claimed slot must hold an item.");
                return true;
            }
            spinner.SpinOnce(sleep1Threshold: -1);
        }
    }

    /// <summary>
    /// Steals about half of the items (at least one). The first is returned in <paramref name="first"/>; the others are
    /// pushed into <paramref name="destination"/>, which the caller must own and which must have room for them.
    /// Returns the number of items taken.
    /// </summary>
    public int StealHalfInto(WorkStealingRing destination, out WorkItemEntry first)
    {
        if (!TrySteal(out first))
        {
            return 0;
        }
        int want = Count / 2; // what is left after the first item; half of the original, rounded down
        int room = destination.Capacity - destination.Count;
        if (want > room)
        {
            want = room;
        }
        int taken = 1;
        while (want-- > 0 && TrySteal(out WorkItemEntry extra))
        {
            bool pushed = destination.TryPush(extra);
            Debug.Assert(pushed, "The destination was checked for room and only its owner pushes to it.");
            taken++;
        }
        return taken;
    }

    /// <summary>Debugger support: the states of queued items whose callback is <paramref name="callback"/>; racy, see GlobalQueue.VisitStates.</summary>
    public void VisitStates(object callback, Action<object?> visit)
    {
        long top = Volatile.Read(ref _top.Value);
        long bottom = Volatile.Read(ref _bottom.Value);
        for (long i = top; i < bottom && i - top < _slots.Length; i++)
        {
            _slots[i & _mask].VisitStateIf(callback, visit);
        }
    }

    /// <summary>
    /// Owner only: clears the slots of items thieves have taken since the last push, so they do not keep those items'
    /// state alive while the owner is idle.
    /// </summary>
    public void ReleaseTakenSlots()
    {
        long t = Volatile.Read(ref _top.Value);
        if (_clearedTo != t)
        {
            ClearTakenSlots(t);
        }
    }

    private void ClearTakenSlots(long top)
    {
        // Owner only. Every index in [_clearedTo, top) was claimed through _top and its slot has not been reused yet.
        // At the previous push bottom - _clearedTo was below the capacity and nothing was pushed since, so no live item
        // (index in [top, bottom)) shares a slot with an index in [_clearedTo, top).
        long from = _clearedTo;
        Debug.Assert(top - from <= _slots.Length, "Thieves cannot take more than one lap of items between two pushes.");
        for (long i = from; i < top; i++)
        {
            _slots[i & _mask] = default;
        }
        _clearedTo = top;
    }

    [Conditional("DEBUG")]
    private void AssertInvariants()
    {
        long t = Volatile.Read(ref _top.Value);
        long b = Volatile.Read(ref _bottom.Value);
        Debug.Assert(b - t <= _slots.Length, "The ring never holds more than its capacity.");
        Debug.Assert(_clearedTo <= t, "Only claimed slots are cleared.");
    }
}
