using System;
using System.Diagnostics;
using System.Threading;

namespace Spindle.Tests.Fuzzing;

// Registered waits on PoolSignals and WaitHandles.
internal sealed partial class FuzzIteration
{
    // ---- Registered waits ----------------------------------------------------------------------------------------

    private bool WaitOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(20);
        switch (roll)
        {
            case < 3:
                _signals[random.Next(_signals.Length)].Set();
                return false;
            case < 4:
                _signals[random.Next(_signals.Length)].Reset();
                return false;
            case < 6:
                _autoEvents[random.Next(_autoEvents.Length)].Set();
                return false;
            case < 7:
                _manualEvent.Set();
                _manualEvent.Reset();
                return false;
        }
        if (!_waitFirings)
        {
            return QueuePlain(random, 0, seen);
        }
        if (producer.Waits.Count >= 4 || (roll >= 16 && producer.Waits.Count > 0))
        {
            int index = producer.Waits.Count >= 4 ? 0 : random.Next(producer.Waits.Count);
            WaitRecord wait = producer.Waits[index];
            producer.Waits.RemoveAt(index);
            Unregister(wait, withWaitObject: random.Next(2) == 0);
            return false;
        }
        return roll switch
        {
            < 11 => RegisterOnSignal(producer, seen),
            < 15 => RegisterOnHandle(producer, seen),
            _ => _options.DisposedWaitHandles ? RegisterOnDisposedHandle(random, seen) : RegisterOnSignal(producer, seen),
        };
    }

    /// <summary>
    /// A wait timeout: none, zero (run-once only: a repeating zero timeout fires every millisecond), or 2-10 ms, half the
    /// time with a fraction of a millisecond (unless the call takes whole milliseconds).
    /// </summary>
    private static TimeSpan WaitTimeout(Random random, bool once, bool wholeMilliseconds) => random.Next(10) switch
    {
        < 5 => Timeout.InfiniteTimeSpan,
        5 => once ? TimeSpan.Zero : TimeSpan.FromMilliseconds(3),
        _ when wholeMilliseconds || random.Next(2) == 0 => TimeSpan.FromMilliseconds(random.Next(2, 11)),
        _ => TimeSpan.FromTicks(random.Next(2 * (int)TimeSpan.TicksPerMillisecond, 10 * (int)TimeSpan.TicksPerMillisecond)),
    };

    private bool RegisterOnSignal(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int index = random.Next(_signals.Length);
        bool once = random.Next(2) == 0;
        TimeSpan timeout = WaitTimeout(random, once, wholeMilliseconds: false);
        PoolSignal signal = _signals[index];
        var wait = new WaitRecord(this, NextId(), $"PoolSignal {index} ({signal.Mode})", timeout, once, Flowed(safeForm: true));
        _waits.Enqueue(wait);
        wait.Start = Stopwatch.GetTimestamp();
        try
        {
            wait.Registration = _pool.RegisterWait(signal, s_onWait, wait, timeout, once);
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref wait.State, wait.Label, exception);
        }
        Accept(ref wait.State, wait.Label, seen);
        producer.Waits.Add(wait);
        return false;
    }

    private bool RegisterOnHandle(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int index = random.Next(_autoEvents.Length + 1);
        bool manual = index == _autoEvents.Length;
        WaitHandle handle = manual ? _manualEvent : _autoEvents[index];
        bool once = manual || random.Next(2) == 0; // a repeating wait on a set ManualResetEvent fires without pause
        bool milliseconds = random.Next(2) == 0;
        TimeSpan timeout = WaitTimeout(random, once, wholeMilliseconds: milliseconds);
        var wait = new WaitRecord(this, NextId(), manual ? "ManualResetEvent" : $"AutoResetEvent {index}", timeout, once, Flowed(safeForm: true));
        _waits.Enqueue(wait);
        wait.Start = Stopwatch.GetTimestamp();
        try
        {
            wait.Registration = milliseconds
                ? _pool.RegisterWaitForSingleObject(handle, s_onWait, wait, (int)timeout.TotalMilliseconds, once)
                : _pool.RegisterWaitForSingleObject(handle, s_onWait, wait, timeout, once);
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref wait.State, wait.Label, exception);
        }
        Accept(ref wait.State, wait.Label, seen);
        producer.Waits.Add(wait);
        return false;
    }

    /// <summary>A disposed handle is bad input: the registration must be refused and nothing may call back.</summary>
    private bool RegisterOnDisposedHandle(Random random, bool seen)
    {
        var handle = new AutoResetEvent(false);
        handle.Dispose();
        bool once = random.Next(2) == 0;
        TimeSpan timeout = WaitTimeout(random, once, wholeMilliseconds: false);
        var wait = new WaitRecord(this, NextId(), "a disposed AutoResetEvent", timeout, once, Flowed(safeForm: true));
        _waits.Enqueue(wait);
        try
        {
            RegisteredWait registration = _pool.RegisterWaitForSingleObject(handle, s_onWait, wait, timeout, once);
            Volatile.Write(ref wait.State, CallState.BadInput); // nothing may call back even so
            Fail($"RegisterWaitForSingleObject accepted a disposed wait handle (registration #{wait.Id})");
            registration.Unregister(null);
        }
        catch (ObjectDisposedException)
        {
            Volatile.Write(ref wait.State, CallState.BadInput);
        }
        catch (ArgumentException)
        {
            Volatile.Write(ref wait.State, CallState.BadInput);
        }
        _ = seen;
        return false;
    }

    private void Unregister(WaitRecord wait, bool withWaitObject)
    {
        if (Interlocked.Increment(ref wait.UnregisterCalls) != 1)
        {
            return;
        }
        RegisteredWait registration = wait.Registration!;
        if (!withWaitObject)
        {
            if (!registration.Unregister(null) && !_pool.IsShutdownStarted)
            {
                Fail($"{wait.Label}: the first Unregister returned false on a running pool");
            }
            return;
        }
        using var done = new ManualResetEvent(false);
        if (registration.Unregister(done))
        {
            if (done.WaitOne(Waits.MustHappen))
            {
                wait.UnregisterSettled = true;
            }
            else
            {
                Fail($"{wait.Label}: the wait object given to Unregister was not signalled within 30 s");
            }
        }
        else if (!_pool.IsShutdownStarted)
        {
            Fail($"{wait.Label}: the first Unregister returned false on a running pool");
        }
    }

    internal void OnWait(WaitRecord wait, bool timedOut)
    {
        long now = Stopwatch.GetTimestamp();
        bool settled = wait.UnregisterSettled;
        if (Interlocked.Increment(ref wait.Inside) > 1)
        {
            Fail($"{wait.Label}: two callbacks of the registration overlap");
        }
        int callbacks = Interlocked.Increment(ref wait.Callbacks);
        if (settled)
        {
            Fail($"{wait.Label}: a callback started after the wait object given to Unregister was signalled");
        }
        if (wait.Once && callbacks > 1)
        {
            Fail($"{wait.Label}: a run-once registration called back {callbacks} times");
        }
        if (timedOut)
        {
            int timeouts = Interlocked.Increment(ref wait.TimedOutCallbacks);
            if (wait.TimeoutTicks < 0)
            {
                Fail($"{wait.Label}: called back as timed out although it has no timeout");
            }
            else
            {
                long earliest = wait.Start + timeouts * wait.TimeoutTicks;
                if (now < earliest)
                {
                    Fail($"{wait.Label}: timeout callback {timeouts} came {(earliest - now) * 1000.0 / Stopwatch.Frequency:F3} ms early "
                        + $"({timeouts} timeouts take at least {timeouts * wait.Timeout.TotalMilliseconds:F3} ms from the registration)");
                }
            }
        }
        CheckLocal(wait.Label, wait.ExpectedLocal);
        Interlocked.Decrement(ref wait.Inside);
    }
}
