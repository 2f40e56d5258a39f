using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// Timers on the pool and on its TimeProvider, and Task.Delay on that clock.
internal sealed partial class FuzzIteration
{
    // ---- Timers --------------------------------------------------------------------------------------------------

    private bool TimerOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(10);
        if (producer.Timers.Count == 0 || roll < 4)
        {
            if (producer.Timers.Count >= 6)
            {
                DisposeTimer(producer.Timers[0], async: random.Next(2) == 0);
                producer.Timers.RemoveAt(0);
            }
            return CreateTimer(producer, seen);
        }
        int index = random.Next(producer.Timers.Count);
        TimerRecord timer = producer.Timers[index];
        if (roll < 7)
        {
            (TimeSpan due, TimeSpan period) = TimerTimes(random);
            Arm(timer, due, period);
            bool changed = timer.Timer!.Change(due, period);
            if (!changed && !_pool.IsShutdownStarted)
            {
                Fail($"{timer.Label}: Change returned false on a live timer of a running pool");
            }
            return false;
        }
        producer.Timers.RemoveAt(index);
        DisposeTimer(timer, async: roll == 9);
        return false;
    }

    private static (TimeSpan Due, TimeSpan Period) TimerTimes(Random random)
    {
        TimeSpan due = random.Next(5) switch
        {
            0 => Timeout.InfiniteTimeSpan,
            1 or 2 => TimeSpan.FromTicks(random.Next(0, 7 * (int)TimeSpan.TicksPerMillisecond)), // with a fraction of a millisecond
            _ => TimeSpan.FromMilliseconds(random.Next(0, 7)),
        };
        TimeSpan period = random.Next(100) switch
        {
            < 40 => Timeout.InfiniteTimeSpan,
            < 55 => TimeSpan.Zero,
            _ => TimeSpan.FromMilliseconds(random.Next(1, 7)),
        };
        return (due, period);
    }

    private bool CreateTimer(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        bool viaProvider = random.Next(3) == 0;
        (TimeSpan due, TimeSpan period) = TimerTimes(random);
        var timer = new TimerRecord(this, NextId(), viaProvider, Flowed(safeForm: true)) { RearmsItself = random.Next(5) == 0 };
        _timers.Enqueue(timer);
        Arm(timer, due, period);
        try
        {
            timer.Timer = viaProvider
                ? _pool.TimeProvider.CreateTimer(s_onTimer, timer, due, period)
                : _pool.CreateTimer(s_onTimer, timer, due, period);
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref timer.State, timer.Label, exception);
        }
        Accept(ref timer.State, timer.Label, seen);
        producer.Timers.Add(timer);
        return false;
    }

    /// <summary>Records an arming before the call that makes it: the callback it may cause must find it.</summary>
    private static void Arm(TimerRecord timer, TimeSpan due, TimeSpan period)
    {
        if (period > TimeSpan.Zero)
        {
            Volatile.Write(ref timer.EverPeriodic, true);
        }
        if (due == Timeout.InfiniteTimeSpan)
        {
            return;
        }
        Interlocked.Increment(ref timer.Armings);
        long at = Stopwatch.GetTimestamp() + (long)(due.Ticks * (Stopwatch.Frequency / (double)TimeSpan.TicksPerSecond));
        long current = Volatile.Read(ref timer.EarliestDue);
        while (at < current)
        {
            long seenValue = Interlocked.CompareExchange(ref timer.EarliestDue, at, current);
            if (seenValue == current)
            {
                break;
            }
            current = seenValue;
        }
    }

    private void DisposeTimer(TimerRecord timer, bool async)
    {
        Volatile.Write(ref timer.Disposed, 1);
        timer.DisposedByProducer = true;
        if (!async)
        {
            timer.Timer!.Dispose();
            return;
        }
        if (!timer.Timer!.DisposeAsync().AsTask().Wait(Waits.MustHappen))
        {
            Fail($"{timer.Label}: DisposeAsync did not complete within 30 s");
        }
        timer.DisposeAsyncCompleted = true;
    }

    internal void OnTimer(TimerRecord timer)
    {
        long now = Stopwatch.GetTimestamp();
        bool afterDisposeAsync = timer.DisposeAsyncCompleted;
        int callbacks = Interlocked.Increment(ref timer.Callbacks);
        if (afterDisposeAsync)
        {
            Fail($"{timer.Label} fired after its DisposeAsync had completed");
        }
        long due = Volatile.Read(ref timer.EarliestDue);
        if (now < due)
        {
            Fail($"{timer.Label} fired {(due - now) * 1000.0 / Stopwatch.Frequency:F3} ms before the earliest due time of its armings");
        }
        int armings = Volatile.Read(ref timer.Armings);
        if (!Volatile.Read(ref timer.EverPeriodic) && callbacks > armings)
        {
            Fail($"one-shot {timer.Label} fired {callbacks} times for {armings} arming(s)");
        }
        CheckLocal(timer.Label, timer.ExpectedLocal);
        if (timer.RearmsItself && callbacks < 4 && Volatile.Read(ref timer.Disposed) == 0 && timer.Timer is { } live)
        {
            TimeSpan again = TimeSpan.FromMilliseconds(1);
            Arm(timer, again, Timeout.InfiniteTimeSpan);
            if (!live.Change(again, Timeout.InfiniteTimeSpan) && Volatile.Read(ref timer.Disposed) == 0 && !_pool.IsShutdownStarted)
            {
                Fail($"{timer.Label}: Change from its own callback returned false on a live timer of a running pool");
            }
        }
    }

    /// <summary>Task.Delay on the pool's TimeProvider: it may be dropped by shutdown, but never completes early.</summary>
    private bool PoolDelay(Random random, bool seen)
    {
        int milliseconds = random.Next(1, 6); // a zero delay completes at once without a timer: nothing for the pool to refuse
        var record = new DelayRecord(NextId(), milliseconds, Stopwatch.GetTimestamp());
        Task delay;
        try
        {
            delay = Task.Delay(TimeSpan.FromMilliseconds(milliseconds), _pool.TimeProvider);
        }
        catch (ObjectDisposedException exception)
        {
            return RefuseCall($"Task.Delay({milliseconds} ms, pool.TimeProvider)", exception);
        }
        if (seen)
        {
            Fail($"Task.Delay({milliseconds} ms, pool.TimeProvider): accepted although IsShutdownStarted was already true");
        }
        record.Task = delay;
        delay.ContinueWith(static (task, state) =>
        {
            var (iteration, delayed) = ((FuzzIteration, DelayRecord))state!;
            long elapsed = Stopwatch.GetTimestamp() - delayed.Start;
            if (task.Status != TaskStatus.RanToCompletion)
            {
                iteration.Fail($"Task.Delay #{delayed.Id} on pool.TimeProvider ended {task.Status}");
            }
            else if (elapsed < delayed.Milliseconds * s_ticksPerMillisecond)
            {
                iteration.Fail($"Task.Delay #{delayed.Id} ({delayed.Milliseconds} ms) on pool.TimeProvider completed after {elapsed * 1000.0 / Stopwatch.Frequency:F3} ms");
            }
        }, (this, record), CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
        return false;
    }
}
