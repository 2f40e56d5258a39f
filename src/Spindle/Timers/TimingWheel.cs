using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Numerics;
using System.Threading;
using Spindle.Primitives;
using System.Runtime.CompilerServices;

namespace Spindle.Timers;

/// <summary>An entry of a <see cref="TimingWheel"/>: intrusive links, so scheduling and cancelling allocate nothing.</summary>
/// <remarks>
/// <para>The links, the due tick and the slot are owned by the wheel and written only under the lock that guards it.
/// The due tick, the slot and two flags and a small count of the entry's owner share one word (a pool keeps one timer
/// object per outstanding timeout, so each word counts): the tick in bits 0-47 (ticks are milliseconds since the pool
/// started, so 2^48 lasts 8,900 years), the slot index plus one in bits 48-56 (zero: not in the wheel), the owner's
/// flags <see cref="OwnerFlagA"/> and <see cref="OwnerFlagB"/> in bits 57 and 58, and the owner's count, 0 to
/// <see cref="OwnerCountMax"/>, in bits 59-63.</para>
/// <para>Protocol for the word: every write happens under the lock, except two kinds. Any thread may clear
/// <see cref="OwnerFlagA"/> while it is set, adding one to the count in the same atomic step unless the count is at its
/// maximum or the owner refuses (<see cref="TryClearOwnerFlagAndCount"/>); and any thread may take one from the count
/// while it is neither zero nor at its maximum (<see cref="TryUncount"/>; at the maximum only locked writes change the
/// count). So a locked write that finds flag A clear and the count zero cannot race with anything (A is set only under
/// the lock, which the writer holds, the count rises outside the lock only as A is cleared, and falls only from above
/// zero) and is a plain store; one that finds A set or the count above zero may race and uses compare-and-swap until it
/// lands on the latest value. The common paths (schedule and cancel of a timer that is neither firing nor running its
/// callback) therefore pay no atomic operation. Reads outside the lock (<see cref="ReadWord"/>) see either the value
/// before or after any write (<c>Volatile</c> makes 64-bit accesses atomic on 32-bit platforms too).</para>
/// </remarks>
internal abstract class TimerNode
{
    private const int SlotShift = 48;
    private const long WhenMask = (1L << SlotShift) - 1;
    private const long SlotMask = 0x1FFL << SlotShift;

    /// <summary>An owner flag that any thread may clear (while it is set) without the lock; set only under the lock.</summary>
    internal const long OwnerFlagA = 1L << 57;

    /// <summary>An owner flag written only under the lock.</summary>
    internal const long OwnerFlagB = 1L << 58;

    private const int CountShift = 59;

    /// <summary>One unit of the owner's count.</summary>
    internal const long OwnerCountUnit = 1L << CountShift;

    /// <summary>The owner's count bits; the count is at its maximum when all of them are set.</summary>
    internal const long OwnerCountMask = unchecked((long)(0x1FUL << CountShift));

    /// <summary>The largest count the word holds (31).</summary>
    internal const int OwnerCountMax = 31;

    private long _word;

    // The links of the wheel slot's list that holds the entry (under the timer lock; see LinkAfter and Unlink).
    private TimerNode? _previous;
    private TimerNode? _next;

    /// <summary>The next entry of the same wheel slot (under the timer lock).</summary>
    internal TimerNode? Next => _next;

    /// <summary>Under the timer lock: appends this entry to a slot's list whose last entry is <paramref name="tail"/> (null: empty).</summary>
    internal void LinkAfter(TimerNode? tail)
    {
        _next = null;
        _previous = tail;
        if (tail is not null)
        {
            tail._next = this;
        }
    }

    /// <summary>
    /// Under the timer lock: takes this entry out of its slot's list, joining its neighbours; returns them, so that the
    /// wheel can fix the list's head (<paramref name="previous"/> null) and tail (<paramref name="next"/> null).
    /// </summary>
    internal void Unlink(out TimerNode? previous, out TimerNode? next)
    {
        previous = _previous;
        next = _next;
        if (previous is not null)
        {
            previous._next = next;
        }
        if (next is not null)
        {
            next._previous = previous;
        }
        Detach();
    }

    /// <summary>Under the timer lock, while the wheel empties the entry's whole list: forgets its links.</summary>
    internal void Detach()
    {
        _previous = null;
        _next = null;
    }

    /// <summary>The tick (wheel milliseconds) at or after which the entry expires.</summary>
    internal long When
    {
        get => Volatile.Read(ref _word) & WhenMask;
        set
        {
            Debug.Assert(value is >= 0 and <= WhenMask, "A wheel tick fits in 48 bits.");
            StoreLocked(~WhenMask, value);
        }
    }

    /// <summary>Level × 64 + slot of the list holding the entry; -1 when it is not in the wheel.</summary>
    internal int SlotIndex
    {
        get => (int)((Volatile.Read(ref _word) & SlotMask) >> SlotShift) - 1;
        set
        {
            Debug.Assert(value is >= -1 and < TimingWheel.Levels * TimingWheel.SlotsPerLevel, "A slot index is -1 or a slot of the wheel.");
            StoreLocked(~SlotMask, (long)(value + 1) << SlotShift);
        }
    }

    internal bool IsScheduled => (Volatile.Read(ref _word) & SlotMask) != 0;

    /// <summary>The whole word, for the owner's flags (any thread).</summary>
    internal long ReadWord() => Volatile.Read(ref _word);

    /// <summary>Under the lock: sets owner flags (<see cref="OwnerFlagA"/>, <see cref="OwnerFlagB"/>).</summary>
    internal void SetOwnerFlagsLocked(long flags)
    {
        Debug.Assert((flags & ~(OwnerFlagA | OwnerFlagB)) == 0, "Only owner flags.");
        StoreLocked(~0L, flags);
    }

    /// <summary>Under the lock: clears owner flags (<see cref="OwnerFlagA"/>, <see cref="OwnerFlagB"/>).</summary>
    internal void ClearOwnerFlagsLocked(long flags)
    {
        Debug.Assert((flags & ~(OwnerFlagA | OwnerFlagB)) == 0, "Only owner flags.");
        StoreLocked(~flags, 0);
    }

    /// <summary>The owner's count in a word read with <see cref="ReadWord"/>.</summary>
    internal static int OwnerCount(long word) => (int)((ulong)word >> CountShift);

    /// <summary>
    /// Any thread, while <see cref="OwnerFlagA"/> is set: clears it and, in the same atomic step, adds one to the
    /// owner's count unless the word has any of <paramref name="refuseFlags"/> or the count is at its maximum. Returns
    /// whether it counted; <paramref name="before"/> is the word as it was.
    /// </summary>
    internal bool TryClearOwnerFlagAndCount(long refuseFlags, out long before)
    {
        long old = Volatile.Read(ref _word);
        while (true)
        {
            bool count = (old & refuseFlags) == 0 && (old & OwnerCountMask) != OwnerCountMask;
            long next = (old & ~OwnerFlagA) + (count ? OwnerCountUnit : 0);
            long seen = Interlocked.CompareExchange(ref _word, next, old);
            if (seen == old)
            {
                before = old;
                return count;
            }
            old = seen;
        }
    }

    /// <summary>
    /// Any thread, while the owner's count is above zero: takes one from it, unless it is at its maximum (then only a
    /// locked write, <see cref="UncountLocked"/>, may change it). Returns whether it did; <paramref name="before"/> is the
    /// word as it was.
    /// </summary>
    internal bool TryUncount(out long before)
    {
        long old = Volatile.Read(ref _word);
        while (true)
        {
            Debug.Assert((old & OwnerCountMask) != 0, "Only a counted owner uncounts.");
            if ((old & OwnerCountMask) == OwnerCountMask)
            {
                before = old;
                return false;
            }
            long seen = Interlocked.CompareExchange(ref _word, old - OwnerCountUnit, old);
            if (seen == old)
            {
                before = old;
                return true;
            }
            old = seen;
        }
    }

    /// <summary>Under the lock: adds one to the owner's count unless it is at its maximum; returns whether it did.</summary>
    internal bool TryCountLocked()
    {
        long old = Volatile.Read(ref _word);
        while ((old & OwnerCountMask) != OwnerCountMask)
        {
            long seen = Interlocked.CompareExchange(ref _word, old + OwnerCountUnit, old); // races with unlocked writes
            if (seen == old)
            {
                return true;
            }
            old = seen;
        }
        return false;
    }

    /// <summary>Under the lock, while the owner's count is above zero: takes one from it, returning the word as it was.</summary>
    internal long UncountLocked()
    {
        long old = Volatile.Read(ref _word);
        while (true)
        {
            Debug.Assert((old & OwnerCountMask) != 0, "Only a counted owner uncounts.");
            long seen = Interlocked.CompareExchange(ref _word, old - OwnerCountUnit, old); // races with unlocked writes
            if (seen == old)
            {
                return old;
            }
            old = seen;
        }
    }

    /// <summary>Under the lock: keeps the bits of <paramref name="keep"/>, then sets those of <paramref name="bits"/>.</summary>
    private void StoreLocked(long keep, long bits)
    {
        long old = _word;
        if ((old & (OwnerFlagA | OwnerCountMask)) == 0)
        {
            Volatile.Write(ref _word, (old & keep) | bits); // nothing else writes the word now: see the remarks
            return;
        }
        while (true)
        {
            long seen = Interlocked.CompareExchange(ref _word, (old & keep) | bits, old);
            if (seen == old)
            {
                return;
            }
            old = seen; // flag A was cleared or the count changed meanwhile
        }
    }
}

/// <summary>
/// A hierarchical timing wheel with millisecond ticks: 6 levels of 64 slots, so level <c>L</c> slots span
/// <c>64^L</c> ms and the wheel covers 2^36 ms (about 2.2 years). An entry may be due any time later: see
/// <see cref="MaxPlacementDelay"/>.
/// </summary>
/// <remarks>
/// <para>Not thread-safe: the owner serializes every call (the pool does it under its timer lock).</para>
/// <para>Placement (the scheme Tokio's driver uses): an entry due at <c>when</c> goes to the level of the highest 6-bit
/// group in which <c>when</c> differs from <see cref="Elapsed"/>, in the slot given by that group of <c>when</c>. So every
/// level-0 entry lies in the current 64 ms block, every level-1 entry in a later 64 ms block of the current 4,096 ms
/// block, and so on: a non-empty lower level always expires before any higher one, and the slots of a level below the
/// top are always ahead of the current slot (the top level wraps around, which the rotation below accounts for).</para>
/// <para>Schedule and cancel are O(1): link or unlink in a doubly linked slot list and set or clear one bit of the
/// level's occupancy word. Finding the next deadline is one rotate and one trailing-zero count per level. When time
/// reaches a slot above level 0, its entries are re-placed relative to the new elapsed tick (they cascade to lower
/// levels); each entry cascades at most 5 times in its life, or a few more if it is due beyond
/// <see cref="MaxPlacementDelay"/>.</para>
/// <para>An entry's due tick (<see cref="TimerNode.When"/>) is never changed to fit the wheel: an entry due more than
/// <see cref="MaxPlacementDelay"/> after <see cref="Elapsed"/> is placed at that distance, and placed again from there
/// when time reaches its slot, as any cascading entry is. <see cref="Elapsed"/> may trail the caller's clock by a long
/// way (it moves only when the wheel is advanced, and the owner advances at deadlines), so a delay that fits from the
/// caller's present may not fit from <see cref="Elapsed"/>: clamping the due tick instead would make the entry expire
/// early by up to that lag.</para>
/// </remarks>
internal sealed class TimingWheel
{
    internal const int LevelBits = 6;
    internal const int SlotsPerLevel = 1 << LevelBits;
    internal const int Levels = 6;

    /// <summary>
    /// The farthest from <see cref="Elapsed"/> an entry is placed (2^32 ms, four top-level slots): the top level wraps,
    /// so a placement must stay within 63 of its slots ahead (see <see cref="TryFindNextSlot"/>).
    /// </summary>
    internal const long MaxPlacementDelay = 1L << 32;

    // Each slot's list, head and tail side by side (an array of structs: storing a node needs no covariance check, which
    // an array of the abstract node type would cost on every link and unlink).
    private readonly SlotList[] _slots = new SlotList[Levels * SlotsPerLevel];
    private readonly ulong[] _occupied = new ulong[Levels];
    private long _elapsed;
    private int _count;

    /// <summary>The wheel's current tick: every entry due before it has been expired.</summary>
    public long Elapsed => _elapsed;

    /// <summary>Entries in the wheel.</summary>
    public int Count => _count;

    /// <summary>
    /// Moves the wheel's notion of now forward when it holds nothing, so that entries are placed relative to the
    /// present (an idle wheel is not advanced tick by tick).
    /// </summary>
    public void CatchUpIfEmpty(long now)
    {
        if (_count == 0 && now > _elapsed)
        {
            _elapsed = now;
        }
    }

    /// <summary>Schedules <paramref name="node"/> (which must not be scheduled) to expire at tick <paramref name="when"/>.</summary>
    public void Insert(TimerNode node, long when)
    {
        Debug.Assert(!node.IsScheduled, "A node is in the wheel at most once.");
        if (when < _elapsed)
        {
            when = _elapsed; // already due: it expires on the next advance
        }
        node.When = when;
        Link(node, SlotIndexFor(PlacementTick(when)));
        _count++;
    }

    /// <summary>Takes <paramref name="node"/> out of the wheel; false if it was not in it.</summary>
    public bool Remove(TimerNode node)
    {
        if (!node.IsScheduled)
        {
            return false;
        }
        Unlink(node);
        _count--;
        return true;
    }

    /// <summary>The tick of the earliest non-empty slot, or <see cref="long.MaxValue"/> when the wheel is empty.</summary>
    /// <remarks>
    /// The earliest slot may be above level 0, in which case its deadline is the start of the slot (when its entries
    /// cascade), at or before the earliest entry's own tick: a sleeper that wakes then simply finds nothing expired yet.
    /// </remarks>
    public long NextDeadline() => TryFindNextSlot(out _, out long deadline) ? deadline : long.MaxValue;

    /// <summary>
    /// Advances the wheel to tick <paramref name="now"/>: every entry due at or before it leaves the wheel and is added
    /// to <paramref name="expired"/> in due order (entries due in the same millisecond in the order they were placed).
    /// </summary>
    /// <remarks>
    /// If <paramref name="expired"/> cannot grow (out of memory), the exception leaves every entry either still in the
    /// wheel or in <paramref name="expired"/>, and <see cref="Count"/> right: entries leave their slot one at a time, each
    /// only once it is in the list or linked elsewhere. A later call goes on from there.
    /// </remarks>
    [MethodImpl(RarePath.Compile)]
    public void Advance(long now, List<TimerNode> expired)
    {
        while (TryFindNextSlot(out int slotIndex, out long deadline) && deadline <= now)
        {
            Debug.Assert(deadline >= _elapsed, "The wheel never moves backwards.");
            _elapsed = deadline;
            // Unlink clears the slot's occupancy bit with its last entry. A re-placed entry never lands in this slot
            // again: it is due after the slot's start, which is now Elapsed, so it goes to a slot that starts later.
            while (_slots[slotIndex].Head is TimerNode node)
            {
                if (node.When <= deadline)
                {
                    expired.Add(node);
                    Unlink(node);
                    _count--;
                }
                else
                {
                    Unlink(node);
                    Link(node, SlotIndexFor(PlacementTick(node.When))); // cascades to a lower level, or moves on
                }
            }
        }
        if (now > _elapsed)
        {
            _elapsed = now;
        }
    }

    /// <summary>Empties the wheel, adding every entry to <paramref name="removed"/> (in no particular order).</summary>
    public void RemoveAll(List<TimerNode> removed)
    {
        for (int slotIndex = 0; slotIndex < _slots.Length; slotIndex++)
        {
            TimerNode? node = _slots[slotIndex].Head;
            while (node is not null)
            {
                TimerNode? next = node.Next;
                node.Detach();
                node.SlotIndex = -1;
                removed.Add(node);
                node = next;
            }
            _slots[slotIndex].Head = null;
            _slots[slotIndex].Tail = null;
        }
        Array.Clear(_occupied);
        _count = 0;
    }

    [MethodImpl(RarePath.Compile)]
    private bool TryFindNextSlot(out int slotIndex, out long deadline)
    {
        for (int level = 0; level < Levels; level++)
        {
            ulong occupied = _occupied[level];
            if (occupied == 0)
            {
                continue;
            }
            int shift = level * LevelBits;
            int current = (int)((_elapsed >> shift) & (SlotsPerLevel - 1));
            int distance = BitOperations.TrailingZeroCount(BitOperations.RotateRight(occupied, current));
            long slotSpan = 1L << shift;
            long levelStart = _elapsed & ~((slotSpan << LevelBits) - 1);
            deadline = levelStart + (current + distance) * slotSpan;
            slotIndex = level * SlotsPerLevel + ((current + distance) & (SlotsPerLevel - 1));
            return true;
        }
        slotIndex = -1;
        deadline = long.MaxValue;
        return false;
    }

    /// <summary>Where an entry due at <paramref name="when"/> is placed now: its tick, or the farthest placement if that is sooner.</summary>
    private long PlacementTick(long when) => Math.Min(when, _elapsed + MaxPlacementDelay);

    private int SlotIndexFor(long when)
    {
        ulong differing = (ulong)(_elapsed ^ when) | (SlotsPerLevel - 1);
        int level = (63 - BitOperations.LeadingZeroCount(differing)) / LevelBits;
        if (level >= Levels)
        {
            level = Levels - 1; // crossing a 2^36 boundary: the top level wraps, see TryFindNextSlot
        }
        int slot = (int)((when >> (level * LevelBits)) & (SlotsPerLevel - 1));
        return level * SlotsPerLevel + slot;
    }

    private void Link(TimerNode node, int slotIndex)
    {
        node.SlotIndex = slotIndex;
        ref SlotList slot = ref _slots[slotIndex];
        TimerNode? tail = slot.Tail;
        node.LinkAfter(tail);
        if (tail is null)
        {
            slot.Head = node;
            _occupied[slotIndex >> LevelBits] |= 1UL << (slotIndex & (SlotsPerLevel - 1));
        }
        slot.Tail = node;
    }

    private void Unlink(TimerNode node)
    {
        int slotIndex = node.SlotIndex;
        ref SlotList slot = ref _slots[slotIndex];
        node.Unlink(out TimerNode? previous, out TimerNode? next);
        if (previous is null)
        {
            slot.Head = next;
        }
        if (next is null)
        {
            slot.Tail = previous;
        }
        if (slot.Head is null)
        {
            _occupied[slotIndex >> LevelBits] &= ~(1UL << (slotIndex & (SlotsPerLevel - 1)));
        }
        node.SlotIndex = -1;
    }

    private struct SlotList
    {
        public TimerNode? Head;
        public TimerNode? Tail;
    }
}
