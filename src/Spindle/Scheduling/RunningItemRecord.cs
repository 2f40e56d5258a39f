using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;

namespace Spindle.Scheduling;

/// <summary>
/// What one pool thread runs, published for the stuck-item detector and for thieves that ask whether a lone queued
/// item may be taken: the callback of the item it runs or last ran, the items started and completed, and the library
/// item that runs the caller's code right now. Written by its thread only; read by anyone as snapshots.
/// </summary>
/// <remarks>
/// <para>Before each item <see cref="Begin"/> stores the entry's callback, but only when it differs from the one already
/// there (a cached delegate or a re-queued work item, the common cases, cost a load and no GC write barrier), then
/// counts the item as started (a release store); <see cref="End"/> counts it as completed. So the thread is inside item
/// <c>n + 1</c> exactly while the started count is ahead of the completed count <c>n</c>, and that item's callback is
/// the one published. The callback stays published between items (nothing to clear per item); the owner drops it
/// (<see cref="DropCallback"/>) before it parks and when it exits, so an idle thread keeps nothing alive.</para>
/// <para>A reader reads the completed count, then the started count (both with acquire): if the started count is ahead,
/// item <c>n + 1</c> had started when it looked. It reads the callback and owner after the counts and keeps them only
/// if the completed count has not moved meanwhile, in which case no later item has started and they are that item's.
/// The cost per item: one load, one compare and two plain stores of counters; no fence, no clock. Each count sits on a
/// cache line of its own, so that no line written per item is shared with a neighbouring object, whatever the creating
/// thread allocated before or after the record.</para>
/// </remarks>
internal sealed class RunningItemRecord
{
    private object? _callback;
    private object? _owner;
    private PaddedInt64 _started;
    private PaddedInt64 _completed;

    /// <summary>The thread's id to the kernel (0: not started yet, or unknown here): see <see cref="KernelThreadState"/>.</summary>
    public int KernelThreadId { get; private set; }

    /// <summary>The owner's thread, first thing when it starts: publishes its id to the kernel.</summary>
    public void NoteKernelThread() => KernelThreadId = KernelThreadState.CurrentId();

    /// <summary>Items started; one ahead of <see cref="CompletedCount"/> while the thread runs one (a snapshot).</summary>
    public long StartedCount => Volatile.Read(ref _started.Value);

    /// <summary>Items completed (a snapshot).</summary>
    public long CompletedCount => Volatile.Read(ref _completed.Value);

    /// <summary>The owner's thread only: the completed count without a volatile read.</summary>
    public long CompletedByOwner => _completed.Value;

    /// <summary>The callback of the item the thread runs or last ran (a racy snapshot; see the remarks).</summary>
    public object? Callback => Volatile.Read(ref _callback);

    /// <summary>The library item running the caller's code right now, if any (a racy snapshot).</summary>
    public object? Owner => Volatile.Read(ref _owner);

    /// <summary>The owner's thread: an item with <paramref name="callback"/> starts.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void Begin(object callback)
    {
        if (!ReferenceEquals(_callback, callback))
        {
            Volatile.Write(ref _callback, callback);
        }
        Volatile.Write(ref _started.Value, _started.Value + 1);
    }

    /// <summary>The owner's thread: the item that <see cref="Begin"/> started has returned.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public void End() => Volatile.Write(ref _completed.Value, _completed.Value + 1);

    /// <summary>The owner's thread: a library item with a shared callback starts the caller's code (see <see cref="Owner"/>).</summary>
    public void EnterOwner(object owner) => Volatile.Write(ref _owner, owner);

    /// <summary>The owner's thread: the caller's code that <see cref="EnterOwner"/> published has returned.</summary>
    public void ExitOwner() => _owner = null;

    /// <summary>The owner's thread, idle or exiting: the last item's callback is no longer kept alive.</summary>
    public void DropCallback() => _callback = null;
}
