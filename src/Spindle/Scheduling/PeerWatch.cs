using System;
using System.Runtime.CompilerServices;
using Spindle.Queues;
using Spindle.Primitives;

namespace Spindle.Scheduling;

/// <summary>
/// A worker's watch of one peer at a time (owner only: the worker's order in <see cref="WorkSources"/>): it takes half of a peer's ring when the
/// peer has started nothing for a whole watch while its ring holds items.
/// </summary>
/// <remarks>
/// <para>Why: a worker takes up to <see cref="WorkerLocalQueue.GlobalBatchSize"/> items from the global queue at once and keeps
/// the rest in its ring. If the operating system deschedules it (a time slice of several milliseconds when the cores
/// have more runnable threads than cores), those items wait. A searching worker would steal them, but a busy one under a
/// steady inflow from outside (socket completions) always finds the global queue first, so they waited the whole
/// slice: round trips of 4-6 ms among round trips of under 1 ms.</para>
/// <para>The watch costs one read of a peer's started count per <see cref="PeerWatchTakes"/> takes from the
/// global queue: at the start of a watch the worker notes the peer's count; at its end, a peer that has started nothing
/// meanwhile while its ring holds items (through <see cref="WorkerLocalQueue.MayStealFrom"/>, so a lone item is left to a running
/// owner) gives half of them, and stays watched; otherwise the watch moves on to the next worker. Every peer is thus
/// looked at within <see cref="PeerWatchTakes"/> takes times the number of workers. A peer that runs one long
/// item loses ring items that waited behind it, which is what a thief would do anyway.</para>
/// </remarks>
internal sealed class PeerWatch
{
    /// <summary>How many of a worker's takes from the global queue one watch of a peer lasts (see <see cref="PeerWatch"/>).</summary>
    internal const int PeerWatchTakes = 16;

    private int _countdown = PeerWatchTakes;
    private Worker? _peer;
    private long _peerStarted;

    /// <summary>Counts one take from the global queue down; true when the watch ends with this take.</summary>
    public bool CountTake() => --_countdown <= 0;

    /// <summary>
    /// The end of a watch: steals half of the watched peer's ring into <paramref name="into"/> if the peer stalled (the
    /// same peer then stays watched, from the same count: if it is still stalled, the next watch takes more); else
    /// watches the next worker after it in <paramref name="workers"/>.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public bool TryEnd(Worker self, Worker[] workers, WorkStealingRing into, out WorkItemEntry item)
    {
        _countdown = PeerWatchTakes;
        Worker? peer = _peer;
        if (peer is not null
            && peer.Record.StartedCount == _peerStarted
            && !peer.Local.Ring.IsEmpty
            && peer.Local.MayStealFrom()
            && peer.Local.Ring.StealHalfInto(into, out item) != 0)
        {
            return true;
        }
        Worker? next = null;
        if (workers.Length > 1)
        {
            int index = IndexOf(workers, peer) + 1; // -1 (none yet, or it left the list) starts at the first
            next = workers[index % workers.Length];
            if (next == self)
            {
                next = workers[(index + 1) % workers.Length];
            }
        }
        _peer = next;
        _peerStarted = next is null ? 0 : next.Record.StartedCount;
        item = default;
        return false;
    }

    /// <summary>Where <paramref name="peer"/> is in <paramref name="workers"/>, by reference, or -1.</summary>
    /// <remarks>A loop of its own rather than <see cref="Array.IndexOf{T}(T[], T)"/>: the shared generic method would be
    /// one more framework method tiered up on this rare path (see <see cref="RarePath"/>).</remarks>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static int IndexOf(Worker[] workers, Worker? peer)
    {
        for (int i = 0; i < workers.Length; i++)
        {
            if (ReferenceEquals(workers[i], peer))
            {
                return i;
            }
        }
        return -1;
    }
}
