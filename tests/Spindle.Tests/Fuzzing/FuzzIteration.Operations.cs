using System;
using System.Threading;

namespace Spindle.Tests.Fuzzing;

// The operations. Each Issue* method draws everything it needs from the caller's Random before the call (so the
// sequence is the seed's), records the work in the ledger, makes the call, and returns true when the pool refused it
// with ObjectDisposedException (a producer stops at its first refusal once the pool's shutdown has begun; a lane's
// own shutdown leaves it going). `seen` says whether IsShutdownStarted was
// already true before the call: a call that must be refused then is a broken contract if it is accepted.
internal sealed partial class FuzzIteration
{
    private static readonly TimerCallback s_onTimer = static state => ((TimerRecord)state!).Iteration.OnTimer((TimerRecord)state!);
    private static readonly WaitOrTimerCallback s_onWait = static (state, timedOut) => ((WaitRecord)state!).Iteration.OnWait((WaitRecord)state!, timedOut);
    private static readonly SendOrPostCallback s_onPost = static state => ((PostRecord)state!).Iteration.RunPost((PostRecord)state!);

    private int NextId() => Interlocked.Increment(ref _nextId);

    /// <summary>The AsyncLocal value that work queued now must see: the caller's when the form and the pool flow it.</summary>
    private int Flowed(bool safeForm) => safeForm && _flows ? s_local.Value : 0;

    private bool Refuse(ref int state, string label, ObjectDisposedException exception, LaneRecord? lane = null)
    {
        Volatile.Write(ref state, CallState.Refused);
        if (!(lane?.Lane.IsShutdownStarted ?? _pool.IsShutdownStarted))
        {
            Fail($"{label}: refused with ObjectDisposedException although shutdown {(lane is null ? "" : "of the lane or the pool ")}had not begun: {exception.Message}");
        }
        return true;
    }

    /// <summary>A full lane refused the work: only a bounded lane may, and a Wait lane only through a TryQueue form.</summary>
    private bool Reject(ref int state, string label, WorkRejectedException? exception, LaneRecord? lane)
    {
        Volatile.Write(ref state, CallState.Rejected);
        if (lane is null || !lane.Bounded)
        {
            Fail($"{label}: rejected as full by {(lane is null ? "the pool" : "unbounded " + lane.Description)}");
        }
        else if (exception is not null && lane.Options.FullMode != LaneFullMode.Reject)
        {
            Fail($"{label}: {lane.Description} threw WorkRejectedException although it waits for room: {exception.Message}");
        }
        return false;
    }

    private void Accept(ref int state, string label, bool seen)
    {
        Volatile.Write(ref state, CallState.Accepted);
        if (seen)
        {
            Fail($"{label}: accepted although IsShutdownStarted was already true before the call");
        }
    }

    private bool RefuseCall(string what, ObjectDisposedException exception)
    {
        int state = 0;
        return Refuse(ref state, what, exception);
    }

    private bool IssueProducerOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(100);
        return roll switch
        {
            < 30 => QueuePlain(random, depth: 0, seen, producer),
            < 32 => QueueMulti(random, seen),
            < 50 => IssueRun(random, producer, seen),
            < 53 => IssueNeighbour(random),
            < 58 => IssueStartNew(random, producer, seen),
            < 61 => IssueContinueWith(random, producer),
            < 65 => IssuePost(random, seen, producer),
            < 68 => CancelSome(producer),
            < 77 => _timerFirings ? TimerOperation(producer, seen) : QueuePlain(random, 0, seen, producer),
            < 78 => _timerFirings ? PoolDelay(random, seen) : QueuePlain(random, 0, seen, producer),
            < 88 => WaitOperation(producer, seen),
            < 90 => SetThreadLimits(random, seen),
            < 92 => ReadProperties(random),
            < 94 => BadCall(random),
            < 97 => LaneOperation(producer, seen),
            _ => QueuePlain(random, 0, seen, producer),
        };
    }

    /// <summary>What a work item issues from inside (local queueing when it prefers local).</summary>
    private bool IssueFromItem(Random random, int depth, LaneRecord? itemLane)
    {
        bool seen = _pool.IsShutdownStarted;
        int roll = random.Next(100);
        return roll switch
        {
            < 65 => QueuePlain(random, depth, seen, producer: null, itemLane),
            < 85 => IssueRun(random, producer: null, seen),
            < 93 => IssuePost(random, seen, producer: null, itemLane),
            _ => IssueStartNew(random, producer: null, seen),
        };
    }

    // ---- Thread limits, properties, bad input --------------------------------------------------------------------

    private bool SetThreadLimits(Random random, bool seen)
    {
        int min = random.Next(0, 4);
        int max = Math.Max(1, min) + random.Next(0, 5);
        try
        {
            _pool.SetThreadLimits(min, max);
        }
        catch (ObjectDisposedException exception)
        {
            return RefuseCall($"SetThreadLimits({min}, {max})", exception);
        }
        if (seen)
        {
            Fail($"SetThreadLimits({min}, {max}): accepted although IsShutdownStarted was already true before the call");
        }
        return false;
    }

    private bool ReadProperties(Random random)
    {
        _ = _pool.ThreadCount + _pool.DedicatedThreadCount + _pool.PendingWorkItemCount + _pool.CompletedWorkItemCount
            + _pool.ScheduledTimerCount + _pool.WaitThreadCount + _pool.RegisteredWaitCount + _pool.MinThreads + _pool.MaxThreads
            + _pool.GetThreadInjectionCount((ThreadInjectionReason)random.Next(8));
        _ = _pool.ToString();
        using BlockingRegion region = WorkerPool.EnterBlockingRegion();
        if (region.IsActive)
        {
            Fail("EnterBlockingRegion on a producer thread (no pool's worker) returned an active region");
        }
        return false;
    }

    private bool BadCall(Random random)
    {
        int which = random.Next(15);
        var item = new PlainItem(this, NextId(), "bad input", PlainBehaviour.Plain, 0, 0, 0);
        var timer = new TimerRecord(this, item.Id, viaProvider: false, 0);
        var wait = new WaitRecord(this, item.Id, "bad input", TimeSpan.FromMilliseconds(-2), once: false, 0);
        (string what, Type expected, Action call) = which switch
        {
            0 => ("QueueUserWorkItem(null)", typeof(ArgumentNullException), (Action)(() => _pool.QueueUserWorkItem(null!))),
            1 => ("QueueUserWorkItem(null, state)", typeof(ArgumentNullException), () => _pool.QueueUserWorkItem(null!, item)),
            2 => ("QueueUserWorkItem<T>(null, state, true)", typeof(ArgumentNullException), () => _pool.QueueUserWorkItem<PlainItem>(null!, item, true)),
            3 => ("UnsafeQueueUserWorkItem((IWorkItem)null, false)", typeof(ArgumentNullException), () => _pool.UnsafeQueueUserWorkItem((IWorkItem)null!, false)),
            4 => ("QueueUserWorkItem<T>(callback, state, (WorkItemOptions)4)", typeof(ArgumentOutOfRangeException), () => _pool.QueueUserWorkItem(PlainItem.Action, item, (WorkItemOptions)4)),
            5 => ("UnsafeQueueUserWorkItem(IWorkItem, (WorkItemOptions)8)", typeof(ArgumentOutOfRangeException), () => _pool.UnsafeQueueUserWorkItem(item, (WorkItemOptions)8)),
            6 => ("Run((Action)null)", typeof(ArgumentNullException), () => _pool.Run((Action)null!)),
            7 => ("RunAsValueTask((Func<int>)null)", typeof(ArgumentNullException), () => _pool.RunAsValueTask((Func<int>)null!)),
            8 => ("CreateTimer(due -2 ms)", typeof(ArgumentOutOfRangeException), () => _pool.CreateTimer(s_onTimer, timer, TimeSpan.FromMilliseconds(-2), Timeout.InfiniteTimeSpan)),
            9 => ("CreateTimer(null callback)", typeof(ArgumentNullException), () => _pool.CreateTimer(null!, timer, TimeSpan.Zero, Timeout.InfiniteTimeSpan)),
            10 => ("RegisterWait(timeout -2 ms)", typeof(ArgumentOutOfRangeException), () => _pool.RegisterWait(_signals[0], s_onWait, wait, TimeSpan.FromMilliseconds(-2), false)),
            11 => ("RegisterWaitForSingleObject(timeout -2)", typeof(ArgumentOutOfRangeException), () => _pool.RegisterWaitForSingleObject(_autoEvents[0], s_onWait, wait, -2, false)),
            12 => ("SetThreadLimits(3, 1)", typeof(ArgumentOutOfRangeException), () => _pool.SetThreadLimits(3, 1)),
            13 => ("Shutdown((ShutdownMode)9)", typeof(ArgumentOutOfRangeException), () => _pool.Shutdown((ShutdownMode)9)),
            _ => ("SynchronizationContext.Post(null)", typeof(ArgumentNullException), () => _pool.SynchronizationContext.Post(null!, null)),
        };
        item.State = CallState.BadInput;
        timer.State = CallState.BadInput;
        wait.State = CallState.BadInput;
        _plain.Enqueue(item);
        _timers.Enqueue(timer);
        _waits.Enqueue(wait);
        try
        {
            call();
            Fail($"bad call {what} was accepted");
        }
        catch (Exception exception) when (expected.IsInstanceOfType(exception))
        {
            // The documented exception; the ledger checks that nothing ran.
        }
        catch (ObjectDisposedException) when (_pool.IsShutdownStarted)
        {
            // Refused for shutdown before the argument was looked at: acceptable too.
        }
        catch (Exception exception)
        {
            Fail($"bad call {what} threw {exception.GetType().Name}, expected {expected.Name}: {exception.Message}");
        }
        return false;
    }
}
