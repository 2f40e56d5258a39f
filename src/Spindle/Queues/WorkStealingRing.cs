using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
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
/// <item>Growth. The ring starts with <see cref="InitialSlots"/> slots (or its capacity, if smaller) and doubles when
/// a push finds it full, up to its capacity: a worker that never queues much locally (one of a burst's threads, parked
/// most of its life) keeps a small array. Only the owner grows it: it copies the items of <c>[t, b)</c> (<c>t</c> as
/// it read it) to the same indices of a larger array, publishes the array with a release store, and only then writes
/// the new item and releases <c>_bottom</c>. A thief reads <c>_slots</c> after <c>_bottom</c>: one that saw a bottom
/// written after a growth sees the new array; one that still reads the old array reads an index in <c>[t, b)</c> of the
/// growth (anything lower has been claimed, so its CAS fails), whose slot the owner no longer writes and still holds
/// that item. Items thieves took during the copy leave stale copies below <c>_top</c> in the new array, which the
/// clearing above removes (<c>_clearedTo</c> restarts at the <c>t</c> of the copy).</item>
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

    /// <summary>
    /// The slots a ring starts with (a power of two): a worker's whole batch from the global queue (32 items at most)
    /// fits without growing.
    /// </summary>
    public const int InitialSlots = 32;

    private readonly int _capacity;
    private WorkItemEntry[] _slots; // written by the owner only (growth); thieves read it after _bottom (see the remarks)
    private PaddedInt64 _top;
    private BottomLine _bottom;
    private long _clearedTo; // owner-only

    public WorkStealingRing()
        : this(DefaultCapacity)
    {
    }

    public WorkStealingRing(int capacity)
        : this(capacity, InitialSlots)
    {
    }

    /// <summary>A ring of at most <paramref name="capacity"/> items that starts with <paramref name="initialSlots"/> slots (capped at the capacity).</summary>
    public WorkStealingRing(int capacity, int initialSlots)
    {
        if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        {
            throw new ArgumentOutOfRangeException(nameof(capacity), capacity, "Capacity must be a power of two, at least 2.");
        }
        if (initialSlots < 2 || (initialSlots & (initialSlots - 1)) != 0)
        {
            throw new ArgumentOutOfRangeException(nameof(initialSlots), initialSlots, "The initial slots must be a power of two, at least 2.");
        }
        _capacity = capacity;
        _slots = new WorkItemEntry[Math.Min(capacity, initialSlots)];
    }

    /// <summary>The most items the ring holds.</summary>
    public int Capacity => _capacity;

    /// <summary>The slots the ring has now (tests and diagnostics: it grows toward <see cref="Capacity"/>).</summary>
    public int SlotCount => Volatile.Read(ref _slots).Length;

    /// <summary>The index of the oldest item (moves when a thief or the owner takes from the bottom).</summary>
    public long Top => Volatile.Read(ref _top.Value);

    /// <summary>Items in the ring right now (a snapshot; exact only when no one is pushing, popping or stealing).</summary>
    public int Count
    {
        get
        {
            long t = Volatile.Read(ref _top.Value);
            long b = Volatile.Read(ref _bottom.Value);
            return b > t ? (int)Math.Min(b - t, _capacity) : 0;
        }
    }

    /// <summary>
    /// Owner only: the ring's bottom index now (where the next push goes), and the lowest and highest it has been since
    /// <see cref="ResetBottomRange"/>. Items below the lowest have sat in the ring since then without their owner
    /// reaching them (only thieves, and the owner's takes from the top, move them).
    /// </summary>
    public (long Now, long Lowest, long Highest) BottomRange => (_bottom.Value, _bottom.Lowest, _bottom.Highest);

    /// <summary>Owner only: starts the range of <see cref="BottomRange"/> again at the ring's current bottom.</summary>
    public void ResetBottomRange() => _bottom.Lowest = _bottom.Highest = _bottom.Value;

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
        WorkItemEntry[] slots = _slots; // only the owner writes it: a plain read of its own field is current
        if (b - t >= slots.Length)
        {
            if (b - t >= _capacity)
            {
                return false;
            }
            slots = Grow(t, b, b - t + 1);
        }
        if (_clearedTo != t)
        {
            ClearTakenSlots(t);
        }
        WorkItemEntry.Store(ref SlotAt(slots, b), item);
        Volatile.Write(ref _bottom.Value, b + 1);
        if (b >= _bottom.Highest)
        {
            _bottom.Highest = b + 1;
        }
        AssertInvariants();
        return true;
    }

    /// <summary>
    /// Owner only: the first step of a push written in place, for a producer that copies up to
    /// <paramref name="maxCount"/> items straight from where they lie (a take from the global queue) rather than through
    /// a buffer: makes the room (the caller guarantees that the capacity allows it) and returns the index of the first
    /// slot to write. The caller writes slots upwards from there with <see cref="WriteInPlace"/>, newest item first, and
    /// publishes them all with <see cref="EndPushInPlace"/>. Slots at and above the bottom are the owner's alone until
    /// then: thieves read only below <c>_bottom</c>, so the writes need no ordering of their own.
    /// </summary>
    public long BeginPushInPlace(int maxCount)
    {
        long b = _bottom.Value;
        long t = Volatile.Read(ref _top.Value);
        Debug.Assert(maxCount >= 0 && b - t + maxCount <= _capacity, "The caller checked the room; only the owner pushes.");
        if (b - t + maxCount > _slots.Length)
        {
            Grow(t, b, b - t + maxCount);
        }
        if (_clearedTo != t)
        {
            ClearTakenSlots(t);
        }
        return b;
    }

    /// <summary>Owner only, between <see cref="BeginPushInPlace"/> and <see cref="EndPushInPlace"/>: writes the slot at <paramref name="index"/>.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void WriteInPlace(long index, in WorkItemEntry item)
    {
        Debug.Assert(index >= _bottom.Value && index - Volatile.Read(ref _top.Value) < _slots.Length, "Written only in the room made for it.");
        WorkItemEntry.Store(ref SlotAt(_slots, index), item);
    }

    /// <summary>Owner only: publishes the slots written in place below <paramref name="bottom"/> (the bottom unchanged when none were).</summary>
    public void EndPushInPlace(long bottom)
    {
        Debug.Assert(bottom >= _bottom.Value);
        if (bottom == _bottom.Value)
        {
            return;
        }
        Volatile.Write(ref _bottom.Value, bottom);
        _bottom.Highest = Math.Max(_bottom.Highest, bottom);
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
        if (b < _bottom.Lowest)
        {
            _bottom.Lowest = b; // on the line the exchange has just taken: no traffic of its own
        }
        long t = Volatile.Read(ref _top.Value);
        WorkItemEntry[] slots = _slots;
        ref WorkItemEntry slot = ref SlotAt(slots, b);
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
        WorkItemEntry[] slots = _slots;
        if (!SlotAt(slots, b - 1).Holds(callback, state))
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
            // Read after _bottom: an array the owner grew before it released this bottom is the one read here.
            WorkItemEntry[] slots = Volatile.Read(ref _slots);
            item = SlotAt(slots, t);
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
        WorkItemEntry[] slots = Volatile.Read(ref _slots);
        for (long i = top; i < bottom && i - top < slots.Length; i++)
        {
            SlotAt(slots, i).VisitStateIf(callback, visit);
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
        WorkItemEntry[] slots = _slots;
        Debug.Assert(top - from <= slots.Length, "Thieves cannot take more than one lap of items between two pushes.");
        for (long i = from; i < top; i++)
        {
            SlotAt(slots, i) = default;
        }
        _clearedTo = top;
    }

    /// <summary>
    /// Owner only: replaces the array with one of at least <paramref name="needed"/> slots (doubling, at most the
    /// capacity), holding the items of <c>[<paramref name="top"/>, <paramref name="bottom"/>)</c> at the same indices,
    /// and publishes it before any later store of <c>_bottom</c> (see the remarks). Returns the new array.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private WorkItemEntry[] Grow(long top, long bottom, long needed)
    {
        WorkItemEntry[] old = _slots;
        Debug.Assert(needed > old.Length && needed <= _capacity, "Grown only when full, and never beyond the capacity.");
        int length = old.Length;
        while (length < needed)
        {
            length *= 2;
        }
        var grown = new WorkItemEntry[length];
        for (long i = top; i < bottom; i++)
        {
            WorkItemEntry.Store(ref SlotAt(grown, i), SlotAt(old, i));
        }
        // Slots below the copy's top are empty in the new array; any item taken during the copy is cleared at the next push.
        _clearedTo = top;
        Volatile.Write(ref _slots, grown);
        return grown;
    }

    /// <summary>The slot of index <paramref name="index"/> in <paramref name="slots"/> (a power-of-two array: the index masked by its length).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static ref WorkItemEntry SlotAt(WorkItemEntry[] slots, long index) => ref slots[index & (slots.Length - 1)];

    [Conditional("DEBUG")]
    private void AssertInvariants()
    {
        long t = Volatile.Read(ref _top.Value);
        long b = Volatile.Read(ref _bottom.Value);
        Debug.Assert(b - t <= _slots.Length && _slots.Length <= _capacity, "The ring never holds more than its slots, nor has more slots than its capacity.");
        Debug.Assert(_clearedTo <= t, "Only claimed slots are cleared.");
        Debug.Assert(_bottom.Lowest <= b && b <= _bottom.Highest, "The recorded range holds the bottom (only the owner moves either).");
    }

    /// <summary>
    /// The bottom index alone on its cache line (as <see cref="PaddedInt64"/>), with the owner's record of its range
    /// beside it (<see cref="BottomRange"/>): every push and pop writes the line anyway, so the record costs thieves, who
    /// read the index, no traffic of its own.
    /// </summary>
    [StructLayout(LayoutKind.Explicit, Size = 2 * CacheLine.Size)]
    private struct BottomLine
    {
        [FieldOffset(CacheLine.Size)]
        public long Value;

        [FieldOffset(CacheLine.Size + sizeof(long))]
        public long Lowest;

        [FieldOffset(CacheLine.Size + (2 * sizeof(long)))]
        public long Highest;
    }
}
