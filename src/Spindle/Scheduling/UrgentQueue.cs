using System;
using System.Diagnostics;
using System.Numerics;
using System.Threading;
using Spindle.Primitives;
using Spindle.Queues;
using Spindle.Threading;

namespace Spindle.Scheduling;

/// <summary>
/// Ready callbacks that go ahead of all ordinary work: timer firings. Workers look here before any other queue
/// (<see cref="Worker"/>'s dispatch and the search), so a firing waits for at most the items running when it came due,
/// never behind a backlog.
/// </summary>
/// <remarks>
/// <para>State and protocol (owned here, guarded by <see cref="_lock"/>): a growable ring of entries, oldest first. The
/// timer service appends a whole batch per lock (<see cref="TryAppend"/>), workers take one entry at a time. A timer is
/// in the ring at most once (its fire-pending flag, see PoolTimer), so once grown the ring never grows again and
/// firing allocates nothing.</para>
/// <para><see cref="_pending"/> is raised before a batch becomes visible and lowered after an entry is taken, so it is
/// never below the ring's length: a worker that reads zero may skip the ring. Written only when timers fire; read
/// before every item, hence alone on its cache line.</para>
/// <para>Once the pool has stopped the ring is closed: <see cref="TryAppend"/> refuses, and the caller runs the firings
/// elsewhere. What is already in it is swept with the other leftovers.</para>
/// </remarks>
internal sealed class UrgentQueue
{
    private readonly Lock _lock = new();
    private WorkItemEntry[] _ring = new WorkItemEntry[16];
    private int _start;
    private int _count;
    private bool _closed;
    private PaddedInt32 _pending;

    /// <summary>Whether an entry may be waiting (one plain load; see the remarks).</summary>
    public bool MayBeWaiting => Volatile.Read(ref _pending.Value) != 0;

    /// <summary>Entries waiting (a snapshot).</summary>
    public long Count => Math.Max(0, Volatile.Read(ref _pending.Value));

    /// <summary>Appends <paramref name="entries"/> in order; false, having appended nothing, once the queue is closed.</summary>
    public bool TryAppend(ReadOnlySpan<WorkItemEntry> entries)
    {
        lock (_lock)
        {
            if (!_closed)
            {
                if (_count + entries.Length > _ring.Length)
                {
                    GrowLocked(_count + entries.Length); // may throw (out of memory): nothing appended, nothing counted
                }
                // Before the entries become visible (a taker needs the lock to see them): never below the length.
                Interlocked.Add(ref _pending.Value, entries.Length);
                int mask = _ring.Length - 1;
                for (int i = 0; i < entries.Length; i++)
                {
                    _ring[(_start + _count + i) & mask] = entries[i];
                }
                _count += entries.Length;
                return true;
            }
        }
        return false;
    }

    /// <summary>Takes the oldest entry.</summary>
    public bool TryTake(out WorkItemEntry item)
    {
        lock (_lock)
        {
            if (_count == 0)
            {
                item = default;
                return false;
            }
            ref WorkItemEntry slot = ref _ring[_start];
            item = slot;
            slot = default; // the ring keeps no fired timer alive
            _start = (_start + 1) & (_ring.Length - 1);
            _count--;
        }
        Interlocked.Decrement(ref _pending.Value);
        return true;
    }

    /// <summary>The pool has stopped: no more appends (see the remarks).</summary>
    public void Close()
    {
        lock (_lock)
        {
            _closed = true;
        }
    }

    private void GrowLocked(int needed)
    {
        Debug.Assert(_lock.IsHeldByCurrentThread);
        var grown = new WorkItemEntry[(int)BitOperations.RoundUpToPowerOf2((uint)needed)];
        int mask = _ring.Length - 1;
        for (int i = 0; i < _count; i++)
        {
            grown[i] = _ring[(_start + i) & mask];
        }
        _ring = grown;
        _start = 0;
    }
}
