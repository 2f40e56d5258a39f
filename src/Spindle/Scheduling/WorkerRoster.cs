using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;

namespace Spindle.Scheduling;

/// <summary>
/// The pool's live workers, their count and the count the pool aims for: the state the thread controller decides about
/// and every worker reads on every item (am I surplus?), every enqueue that finds nobody searching (is a thread
/// missing?) and every search (whom can I steal from?). A sealed class of the scheduling layer, so that those reads are
/// plain loads, not calls into the thread layer.
/// </summary>
/// <remarks>
/// Protocol: only the thread controller changes it, under its own lock (the <c>…Locked</c> methods), so changes never
/// race; readers read without a lock. The list is copy-on-write (a reader's array never changes), published before the
/// count, so a reader that sees the count also sees the worker in the list; the count and the target are each one
/// aligned word, read with acquire semantics, and a stale read costs a later retirement or wake, never a lost item (the
/// controller decides again under its lock before it acts).
/// </remarks>
internal sealed class WorkerRoster
{
    private Worker[] _workers = [];
    private int _count;
    private volatile int _target;
    private volatile int _demandTarget;

    /// <summary>The workers (a snapshot of the copy-on-write list: read it once per use).</summary>
    public Worker[] Workers => Volatile.Read(ref _workers);

    /// <summary>Workers listed and not yet exited.</summary>
    public int Count => Volatile.Read(ref _count);

    /// <summary>The number of workers the pool aims for.</summary>
    public int Target => _target;

    /// <summary>The target without the starvation boost (see <see cref="IsBelowDemandTarget"/>).</summary>
    public int DemandTarget => _demandTarget;

    /// <summary>Whether the pool has more workers than it aims for (two plain loads; checked after every item).</summary>
    public bool IsAboveTarget => Volatile.Read(ref _count) > _target;

    /// <summary>Whether the pool has fewer workers than it aims for.</summary>
    public bool IsBelowTarget => Volatile.Read(ref _count) < _target;

    /// <summary>
    /// Whether the pool has fewer workers than an enqueue that finds nobody free starts itself: the target without the
    /// threads a starvation ramp adds, which only the ramp starts (the stall monitor and the workers it adds), so that
    /// the thread queueing work never waits for thread starts on the ramp's behalf.
    /// </summary>
    public bool IsBelowDemandTarget => Volatile.Read(ref _count) < _demandTarget;

    /// <summary>The thread controller, under its lock: the targets change (<paramref name="demandTarget"/> is at most <paramref name="target"/>).</summary>
    public void SetTargetLocked(int target, int demandTarget)
    {
        Debug.Assert(target >= 0 && demandTarget >= 0 && demandTarget <= target);
        _target = target;
        _demandTarget = demandTarget;
    }

    /// <summary>The thread controller, under its lock: a new worker is listed (before its thread starts) and counted.</summary>
    [MethodImpl(RarePath.Compile)]
    public void AddLocked(Worker worker)
    {
        Worker[] current = _workers;
        var next = new Worker[current.Length + 1];
        Array.Copy(current, next, current.Length);
        next[^1] = worker;
        Volatile.Write(ref _workers, next);
        Volatile.Write(ref _count, _count + 1);
    }

    /// <summary>The thread controller, under its lock: a leaving worker is unlisted and uncounted.</summary>
    [MethodImpl(RarePath.Compile)]
    public void RemoveLocked(Worker worker)
    {
        Worker[] current = _workers;
        int index = Array.IndexOf(current, worker);
        Debug.Assert(index >= 0, "Only a listed worker leaves the list.");
        var next = new Worker[current.Length - 1];
        Array.Copy(current, 0, next, 0, index);
        Array.Copy(current, index + 1, next, index, current.Length - index - 1);
        Volatile.Write(ref _workers, next);
        Volatile.Write(ref _count, _count - 1);
        Debug.Assert(_count == next.Length, "Each listed worker is counted once.");
    }
}
