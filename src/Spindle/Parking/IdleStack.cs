using System.Diagnostics;
using System.Threading;
using System.Runtime.CompilerServices;
using Spindle.Primitives;

namespace Spindle.Parking;

/// <summary>
/// The pool's parked workers, woken in LIFO order: the most recently parked worker has the warmest caches and the
/// others stay asleep long enough to be worth retiring later.
/// </summary>
/// <remarks>
/// Pushes and pops take a small lock: parking and waking are already the slow path (they precede or follow a system
/// call), and a lock keeps removal of an arbitrary entry (a worker that changes its mind) simple and ABA-free.
/// <see cref="Count"/> is written under the lock and read without it by enqueuers deciding whether to wake anyone;
/// a stale read is tolerated because a parking worker re-checks the queues after it has pushed itself here (see
/// <see cref="Scheduling.IdleCoordinator"/>).
/// </remarks>
internal sealed class IdleStack<T> where T : class
{
    private readonly Lock _lock = new();
    private T[] _items = new T[8];
    private volatile int _count;

    public int Count => _count;

    public void Push(T item)
    {
        lock (_lock)
        {
            if (_count == _items.Length)
            {
                System.Array.Resize(ref _items, _items.Length * 2);
            }
            _items[_count] = item;
            _count++; // volatile write: publishes the entry to lock-free readers of Count
            AssertInvariantsLocked();
        }
    }

    public T? TryPop()
    {
        if (_count == 0)
        {
            return null;
        }
        lock (_lock)
        {
            int count = _count;
            if (count == 0)
            {
                return null;
            }
            T item = _items[count - 1];
            _items[count - 1] = null!;
            _count = count - 1;
            AssertInvariantsLocked();
            return item;
        }
    }

    /// <summary>Removes <paramref name="item"/> if it is still here; false if a waker popped it first.</summary>
    [MethodImpl(RarePath.Compile)]
    public bool TryRemove(T item)
    {
        lock (_lock)
        {
            int count = _count;
            for (int i = count - 1; i >= 0; i--)
            {
                if (ReferenceEquals(_items[i], item))
                {
                    System.Array.Copy(_items, i + 1, _items, i, count - i - 1);
                    _items[count - 1] = null!;
                    _count = count - 1;
                    AssertInvariantsLocked();
                    return true;
                }
            }
            return false;
        }
    }

    [Conditional("DEBUG")]
    private void AssertInvariantsLocked()
    {
        Debug.Assert(_lock.IsHeldByCurrentThread, "The idle stack's lock must be held.");
        Debug.Assert(_count >= 0 && _count <= _items.Length);
        for (int i = 0; i < _count; i++)
        {
            Debug.Assert(_items[i] is not null, "Live entries are never null.");
        }
    }
}
