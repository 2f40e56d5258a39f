using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using Spindle.Scheduling;

namespace Spindle.Threading;

/// <summary>
/// One pool's worker threads whose worker retired as surplus, kept parked for the pool's idle timeout so that a later
/// ramp hands a new worker to one of them instead of starting a thread. Only the thread is reused: each worker is new,
/// with its own queues, counts and hooks (its start and stop hooks run on the reused thread as on a new one).
/// </summary>
/// <remarks>
/// <para>Why: a pool whose items block in waves (a stall, the threads added for it retire as surplus once it ends, the
/// next stall) started every thread of every wave anew. On the 2-core development VM, starting 100 threads that block at
/// once took 40-117 ms of the process's CPU and 33-410 ms of wall time (beside two busy loops: 71-100 ms and 283-410 ms);
/// waking 100 parked threads took 3-9 ms of CPU and 2.5-8 ms. The starter pays in the middle of the ramp, and so do the
/// producers that share the cores with it. The built-in pool keeps its idle threads for 20 s for the same reason.</para>
/// <para>The protocol. Each thread runs <see cref="Spare.Run"/>: its first worker, then, if that worker retired as surplus
/// (<see cref="NoteRetiredAsSurplus"/>, called by the controller on the worker's own thread), it lingers: it joins
/// <see cref="_parked"/> under <see cref="_lock"/> and waits on its own monitor. The controller takes a spare under its
/// own lock (<see cref="TryTake"/>: the most recently parked, under <see cref="_lock"/>), and hands it the worker after
/// releasing that lock (<see cref="Hand"/>: under the spare's monitor, sets the worker and pulses). A spare whose wait
/// ends without a worker takes <see cref="_lock"/>: if it is still in the list nobody can take it any more, and it
/// leaves the list and ends; if it is not, a taker has it and the hand-off is on its way, so it waits for it without a
/// timeout. <see cref="Close"/> (the pool has stopped: no worker will be added again) empties the list and releases every
/// parked spare, and a thread that finishes its worker after the close ends at once.</para>
/// <para>Lock order: the controller's lock, then <see cref="_lock"/>; a spare's monitor is taken with neither held.
/// A lingering thread is a background thread whatever the pool's option (it must not keep the process alive while it
/// waits for work that may never come); it takes the option back with its next worker.</para>
/// </remarks>
internal sealed class SpareThreads
{
    [ThreadStatic]
    private static Spare? t_current; // the spare this thread is, while it runs

    private readonly Lock _lock = new();
    private readonly List<Spare> _parked = []; // under _lock; the most recently parked last
    private readonly HashSet<Thread> _threads = []; // under _lock: every thread of this set that has not ended
    private readonly int _lingerMs;
    private readonly bool _background;
    private bool _closed; // under _lock

    public SpareThreads(WorkerPoolOptions options)
    {
        _lingerMs = options.IdleTimeoutMilliseconds;
        _background = options.UseBackgroundThreads;
    }

    /// <summary>Threads parked right now (a snapshot, for tests and diagnostics).</summary>
    public int ParkedCount
    {
        get
        {
            lock (_lock)
            {
                return _parked.Count;
            }
        }
    }

    /// <summary>A new thread, not started, that runs <paramref name="worker"/> first (via <see cref="PoolThread.Create"/>).</summary>
    public Spare CreateThread(WorkerPoolOptions options, Worker worker, string name)
    {
        var spare = new Spare(this, worker);
        spare.Attach(PoolThread.Create(options, spare.Run, name));
        return spare;
    }

    /// <summary>
    /// Takes the most recently parked spare, or null when none is parked (or the set is closed). The caller hands it a
    /// worker with <see cref="Hand"/>, outside its own lock.
    /// </summary>
    public Spare? TryTake()
    {
        lock (_lock)
        {
            if (_closed || _parked.Count == 0)
            {
                return null;
            }
            Spare spare = _parked[^1];
            _parked.RemoveAt(_parked.Count - 1);
            return spare;
        }
    }

    /// <summary>Hands <paramref name="worker"/>, named <paramref name="name"/>, to a spare taken by <see cref="TryTake"/>.</summary>
    public static void Hand(Spare spare, Worker worker, string name) => spare.Receive(worker, name);

    /// <summary>
    /// On a worker's own thread, when it retires as surplus: once the worker has run its exit path, the thread lingers
    /// for the next worker instead of ending.
    /// </summary>
    public void NoteRetiredAsSurplus()
    {
        if (t_current is { } spare && spare.Owner == this)
        {
            spare.LingerAfterWorker();
        }
    }

    /// <summary>
    /// The pool has stopped: no spare is taken any more, every parked one ends, and so does every thread when its worker
    /// is done. Returns every thread of the set that may still be running (shutdown joins them).
    /// </summary>
    public Thread[] Close()
    {
        Spare[] parked;
        Thread[] threads;
        lock (_lock)
        {
            _closed = true;
            parked = [.. _parked];
            _parked.Clear();
            threads = [.. _threads];
        }
        foreach (Spare spare in parked)
        {
            spare.Release();
        }
        return threads;
    }

    /// <summary>Parks <paramref name="spare"/> (the calling thread): its next worker, or null when it should end.</summary>
    private Worker? Linger(Spare spare)
    {
        lock (_lock)
        {
            if (_closed)
            {
                return null;
            }
            _parked.Add(spare);
        }
        Thread.CurrentThread.IsBackground = true;
        if (spare.WaitForWorker(_lingerMs) is { } worker)
        {
            return worker;
        }
        lock (_lock)
        {
            if (_parked.Remove(spare))
            {
                return null; // timed out (or released) while nobody had taken it: nobody can now
            }
        }
        // A taker removed it from the list just as its wait ended: the hand-off is on its way (or the set was closed,
        // which releases it).
        return spare.WaitForWorker(Timeout.Infinite);
    }

    private void OnStarted(Thread thread)
    {
        lock (_lock)
        {
            _threads.Add(thread);
        }
    }

    private void OnEnded(Thread thread)
    {
        lock (_lock)
        {
            _threads.Remove(thread);
            Debug.Assert(!_parked.Exists(spare => spare.Thread == thread), "An ending thread is not parked.");
        }
    }

    /// <summary>One thread of the set; its monitor guards the hand-off.</summary>
    internal sealed class Spare
    {
        private Worker? _next;     // under this object's monitor: the worker handed over, until the thread takes it
        private string? _nextName; // the same: its thread name
        private bool _released;    // the same: the set was closed while it was parked

        public Spare(SpareThreads owner, Worker first)
        {
            Owner = owner;
            _next = first;
        }

        public SpareThreads Owner { get; }

        public Thread Thread { get; private set; } = null!;

        private bool _linger; // this thread only: the worker it runs retired as surplus

        /// <summary>This thread only: the worker it runs retired as surplus (see <see cref="NoteRetiredAsSurplus"/>).</summary>
        public void LingerAfterWorker() => _linger = true;

        public void Attach(Thread thread) => Thread = thread;

        /// <summary>The thread's body: its workers, one after another, until one does not retire as surplus or no next one comes.</summary>
        public void Run()
        {
            Owner.OnStarted(Thread);
            t_current = this;
            try
            {
                Worker? worker;
                lock (this)
                {
                    worker = _next;
                    _next = null;
                }
                while (worker is not null)
                {
                    _linger = false;
                    worker.Main();
                    worker = _linger ? Owner.Linger(this) : null;
                }
            }
            finally
            {
                t_current = null;
                Owner.OnEnded(Thread);
            }
        }

        public void Receive(Worker worker, string name)
        {
            lock (this)
            {
                Debug.Assert(_next is null && !_released, "A spare is handed one worker at a time, and only while parked.");
                _next = worker;
                _nextName = name;
                Monitor.Pulse(this);
            }
        }

        public void Release()
        {
            lock (this)
            {
                _released = true;
                Monitor.Pulse(this);
            }
        }

        /// <summary>Waits up to <paramref name="timeoutMs"/> for a worker; on one, takes its name and the pool's background option.</summary>
        public Worker? WaitForWorker(int timeoutMs)
        {
            Worker? worker;
            string? name;
            lock (this)
            {
                if (timeoutMs == Timeout.Infinite)
                {
                    while (_next is null && !_released)
                    {
                        Monitor.Wait(this);
                    }
                }
                else
                {
                    long deadline = Environment.TickCount64 + timeoutMs;
                    while (_next is null && !_released)
                    {
                        long left = deadline - Environment.TickCount64;
                        if (left <= 0)
                        {
                            break;
                        }
                        Monitor.Wait(this, (int)Math.Min(left, int.MaxValue));
                    }
                }
                worker = _next;
                name = _nextName;
                _next = null;
                _nextName = null;
            }
            if (worker is not null)
            {
                Thread thread = Thread.CurrentThread;
                thread.Name = name;
                thread.IsBackground = Owner._background;
            }
            return worker;
        }
    }
}
