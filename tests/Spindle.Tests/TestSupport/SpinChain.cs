using System;
using System.Diagnostics;
using System.Threading;

namespace Spindle.Tests;

/// <summary>
/// A chain of items that each spin for their length and then queue the next to the running worker: through the LIFO
/// slot (an <see cref="IWorkItem"/>) or through the ring (a delegate with a state). Keeps one worker busy with local
/// work for as long as it runs; <see cref="Dispose"/> stops it after the item in progress. On a lane the next item goes
/// to the lane's queue (a lane has no local queues), and the chain keeps a worker busy with the lane's items.
/// </summary>
internal sealed class SpinChain(WorkTarget pool, TimeSpan length, bool viaSlot, ConcurrencyMeter? meter = null) : IWorkItem, IDisposable
{
    private readonly long _ticks = (long)(length.TotalSeconds * Stopwatch.Frequency);
    private readonly ManualResetEventSlim _stopped = new();
    private volatile bool _stopping;
    private long _ran;

    public bool Faulted { get; private set; }

    public void Start() => pool.UnsafeQueueUserWorkItem(this, preferLocal: false);

    public bool WaitForItems(long count, TimeSpan timeout) => Waits.Poll(() => Interlocked.Read(ref _ran) >= count, timeout);

    public void Execute()
    {
        try
        {
            using (meter?.Enter())
            {
                long until = Stopwatch.GetTimestamp() + _ticks;
                while (Stopwatch.GetTimestamp() < until)
                {
                    Thread.SpinWait(8);
                }
            }
            Interlocked.Increment(ref _ran);
            if (_stopping)
            {
                _stopped.Set();
                return;
            }
            if (viaSlot)
            {
                pool.UnsafeQueueUserWorkItem(this, preferLocal: true);
            }
            else
            {
                pool.UnsafeQueueUserWorkItem(static self => self.Execute(), this, preferLocal: true);
            }
        }
        catch (Exception)
        {
            Faulted = true;
            _stopped.Set();
            throw;
        }
    }

    /// <summary>
    /// Stops the chain after the item in progress and waits for it; on a pool that has been shut down (and has stopped:
    /// call it after <c>Shutdown</c> returns) nothing runs any more, and a next item the shutdown cancelled never will.
    /// </summary>
    public void Dispose()
    {
        _stopping = true;
        if (!(pool is WorkerPoolLane lane ? lane.IsShutdownStarted : ((WorkerPool)pool).IsShutdownStarted))
        {
            _stopped.Wait(Waits.MustHappen);
        }
        _stopped.Dispose();
    }
}

/// <summary>Counts the items inside a region at once, and the most there ever were.</summary>
internal sealed class ConcurrencyMeter
{
    private int _inside;
    private int _most;

    /// <summary>The most items that were inside at once.</summary>
    public int Most => Volatile.Read(ref _most);

    /// <summary>Enters the region; dispose the result to leave it.</summary>
    public Region Enter()
    {
        int inside = Interlocked.Increment(ref _inside);
        int most;
        while (inside > (most = Volatile.Read(ref _most)) && Interlocked.CompareExchange(ref _most, inside, most) != most)
        {
        }
        return new Region(this);
    }

    /// <summary>A stay inside the meter's region.</summary>
    public readonly struct Region(ConcurrencyMeter meter) : IDisposable
    {
        public void Dispose() => Interlocked.Decrement(ref meter._inside);
    }
}
