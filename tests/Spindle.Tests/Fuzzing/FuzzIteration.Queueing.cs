using System;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// Plain work items: every QueueUserWorkItem form, IWorkItem queued several times, and what an item does when it runs.
internal sealed partial class FuzzIteration
{
    // ---- Plain work items --------------------------------------------------------------------------------------

    /// <summary>
    /// Queues a plain item in one of the queueing forms: to the pool, or to a lane (a producer's pick, or, from an item
    /// of a lane, that lane). From an item only the forms that never block go to a lane: a worker blocked waiting for
    /// room could hold the only thread the lane's items need.
    /// </summary>
    private bool QueuePlain(Random random, int depth, bool seen, ProducerState? producer = null, LaneRecord? itemLane = null)
    {
        LaneRecord? lane = producer is not null ? PickLane(random, producer) : itemLane is not null && random.Next(2) == 0 ? itemLane : null;
        WorkTarget target = lane is null ? _pool : lane.Lane;
        seen = lane is null ? seen : lane.Lane.IsShutdownStarted;
        int form = random.Next(18);
        if (lane is not null && producer is null)
        {
            form = 14 + (form % 4);
        }
        PlainBehaviour behaviour = random.Next(100) switch
        {
            < 60 => PlainBehaviour.Plain,
            < 66 => PlainBehaviour.Throw,
            < 76 => depth < 2 ? PlainBehaviour.Nest : PlainBehaviour.Plain,
            < 80 => PlainBehaviour.BlockingRegion,
            < 83 => PlainBehaviour.Block,
            < 88 => PlainBehaviour.Post,
            < 93 => PlainBehaviour.StartTask,
            _ => PlainBehaviour.RunInside,
        };
        int laneRoll = random.Next(100);
        if (lane is { MayWait: true } && laneRoll < 8)
        {
            behaviour = PlainBehaviour.HoldLane;
        }
        else if (lane is not null && _options.LaneShutdowns && laneRoll == 99)
        {
            behaviour = PlainBehaviour.ShutdownOwnLane;
        }
        int childSeed = random.Next();
        bool preferLocal = random.Next(3) != 0;
        // Long-running items get a dedicated thread each (reused once idle): a few, not a flood.
        WorkItemOptions options = random.Next(8) switch
        {
            0 => WorkItemOptions.LongRunning,
            1 => WorkItemOptions.LongRunning | WorkItemOptions.PreferLocal,
            2 or 3 or 4 => WorkItemOptions.PreferLocal,
            _ => WorkItemOptions.None,
        };
        int cancelAfter = random.Next(4) == 0 ? random.Next(0, 4) : -1;
        bool waitForAsync = random.Next(2) == 0;
        (string name, bool safe) = form switch
        {
            0 => ("QueueUserWorkItem(WaitCallback) from a closure", true),
            1 => ("QueueUserWorkItem(WaitCallback, state)", true),
            2 => ($"QueueUserWorkItem<class>(preferLocal: {preferLocal})", true),
            3 => ($"QueueUserWorkItem<struct>(preferLocal: {preferLocal})", true),
            4 => ("UnsafeQueueUserWorkItem(WaitCallback, state)", false),
            5 => ($"UnsafeQueueUserWorkItem<class>(preferLocal: {preferLocal})", false),
            6 => ($"UnsafeQueueUserWorkItem<struct>(preferLocal: {preferLocal})", false),
            7 => ($"UnsafeQueueUserWorkItem(IWorkItem, preferLocal: {preferLocal})", false),
            8 => ($"QueueUserWorkItem<class>({options})", true),
            9 => ($"QueueUserWorkItem<struct>({options})", true),
            10 => ($"UnsafeQueueUserWorkItem<class>({options})", false),
            11 => ($"UnsafeQueueUserWorkItem<struct>({options})", false),
            12 => ($"UnsafeQueueUserWorkItem(IWorkItem, {options})", false),
            13 => ("QueueUserWorkItem(WaitCallback, null) from a closure", true),
            14 => ($"TryQueueUserWorkItem<class>(preferLocal: {preferLocal})", true),
            15 => ($"TryQueueUserWorkItem(IWorkItem, preferLocal: {preferLocal})", false),
            16 => ($"QueueUserWorkItemAsync<class>({(cancelAfter < 0 ? "no token" : "token cancelled later")})", true),
            _ => ($"QueueUserWorkItemAsync(IWorkItem, {(cancelAfter < 0 ? "no token" : "token cancelled later")})", false),
        };
        int id = NextId();
        OrderMark? mark = lane is { Serial: true } && producer is not null ? new OrderMark(producer.Index, ++producer.Sequence, $"plain item #{id}") : null;
        var item = new PlainItem(this, id, name, behaviour, childSeed, Flowed(safe), depth) { Lane = lane, Mark = mark };
        _plain.Enqueue(item);
        bool mayBlock = lane is { MayWait: true } && producer is not null && form < 14;
        bool async = form >= 16;
        if (mayBlock)
        {
            Interlocked.Increment(ref lane!.WaitingForRoom);
            Interlocked.Increment(ref _producersWaiting);
        }
        if (async && lane is not null)
        {
            Interlocked.Increment(ref lane.PendingAsync);
        }
        bool accepted = true;
        ValueTask pending = default;
        try
        {
            switch (form)
            {
                case 0:
                    target.QueueUserWorkItem(_ => item.Execute());
                    break;
                case 1:
                    target.QueueUserWorkItem(PlainItem.WaitCallback, item);
                    break;
                case 2:
                    target.QueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 3:
                    target.QueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), preferLocal);
                    break;
                case 4:
                    target.UnsafeQueueUserWorkItem(PlainItem.WaitCallback, item);
                    break;
                case 5:
                    target.UnsafeQueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 6:
                    target.UnsafeQueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), preferLocal);
                    break;
                case 7:
                    target.UnsafeQueueUserWorkItem(item, preferLocal);
                    break;
                case 8:
                    target.QueueUserWorkItem(PlainItem.Action, item, options);
                    break;
                case 9:
                    target.QueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), options);
                    break;
                case 10:
                    target.UnsafeQueueUserWorkItem(PlainItem.Action, item, options);
                    break;
                case 11:
                    target.UnsafeQueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), options);
                    break;
                case 12:
                    target.UnsafeQueueUserWorkItem(item, options);
                    break;
                case 13:
                    target.QueueUserWorkItem(_ => item.Execute(), null);
                    break;
                case 14:
                    accepted = target.TryQueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 15:
                    accepted = target.TryQueueUserWorkItem(item, preferLocal);
                    break;
                case 16:
                    pending = target.QueueUserWorkItemAsync(PlainItem.Action, item, TokenCancelledAfter(cancelAfter));
                    break;
                default:
                    pending = target.QueueUserWorkItemAsync(item, TokenCancelledAfter(cancelAfter));
                    break;
            }
        }
        catch (ObjectDisposedException exception)
        {
            EndPending(lane, async);
            return Refuse(ref item.State, item.Label, exception, lane);
        }
        catch (WorkRejectedException exception)
        {
            EndPending(lane, async);
            return Reject(ref item.State, item.Label, exception, lane);
        }
        finally
        {
            if (mayBlock)
            {
                Interlocked.Decrement(ref lane!.WaitingForRoom);
                Interlocked.Decrement(ref _producersWaiting);
            }
        }
        if (!accepted)
        {
            return Reject(ref item.State, item.Label, null, lane);
        }
        if (async && !pending.IsCompletedSuccessfully)
        {
            return AwaitQueueing(item, pending.AsTask(), producer is not null && waitForAsync);
        }
        EndPending(lane, async);
        Accept(ref item.State, item.Label, seen);
        mark?.Ordered = true;
        return false;
    }

    private CancellationToken TokenCancelledAfter(int milliseconds)
    {
        if (milliseconds < 0)
        {
            return CancellationToken.None;
        }
        var source = new CancellationTokenSource();
        _sources.Enqueue(source);
        source.CancelAfter(milliseconds);
        return source.Token;
    }

    private static void EndPending(LaneRecord? lane, bool async)
    {
        if (async && lane is not null)
        {
            Interlocked.Decrement(ref lane.PendingAsync);
        }
    }

    /// <summary>
    /// A QueueUserWorkItemAsync that waits for room: its task must end (queued, cancelled by its token, or refused by
    /// the shutdown), and the ledger judges the item by that outcome. A producer may wait for it (bounded).
    /// </summary>
    private bool AwaitQueueing(PlainItem item, Task task, bool wait)
    {
        item.Pending = task;
        LaneRecord? lane = item.Lane;
        _mustComplete.Enqueue(($"{item.Label}: the wait for room", task));
        task.ContinueWith(static (_, state) => EndPending((LaneRecord?)state, async: true), lane, CancellationToken.None,
            TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
        if (!wait)
        {
            return false;
        }
        Interlocked.Increment(ref _producersWaiting);
        try
        {
            if (!Task.WhenAny(task).Wait(Waits.MustHappen))
            {
                Fail($"{item.Label}: the wait for room in {lane?.Description} did not end within {Waits.MustHappen.TotalSeconds} s");
                return true;
            }
        }
        finally
        {
            Interlocked.Decrement(ref _producersWaiting);
        }
        if (task.IsCompletedSuccessfully)
        {
            item.Mark?.Ordered = true;
            return false;
        }
        return task.IsFaulted;
    }

    /// <summary>One IWorkItem object queued a few times in a row: it runs once per accepted queueing.</summary>
    private bool QueueMulti(Random random, bool seen)
    {
        var multi = new MultiItem(this, NextId());
        _multi.Enqueue(multi);
        int times = random.Next(2, 5);
        for (int i = 0; i < times; i++)
        {
            bool preferLocal = random.Next(2) == 0;
            Interlocked.Increment(ref multi.Attempts);
            try
            {
                _pool.UnsafeQueueUserWorkItem(multi, preferLocal);
            }
            catch (ObjectDisposedException exception)
            {
                Interlocked.Decrement(ref multi.Attempts);
                return RefuseCall($"IWorkItem #{multi.Id} queueing {i + 1}", exception);
            }
            Interlocked.Increment(ref multi.Accepted);
            if (seen)
            {
                Fail($"IWorkItem #{multi.Id} queueing {i + 1}: accepted although IsShutdownStarted was already true before the call");
            }
        }
        return false;
    }

    internal void RunMulti(MultiItem multi)
    {
        int runs = Interlocked.Increment(ref multi.Runs);
        if (runs > Volatile.Read(ref multi.Attempts))
        {
            Fail($"IWorkItem #{multi.Id} ran {runs} times but was queued only {multi.Attempts} times");
        }
        if (_shutdownReturned)
        {
            Fail($"IWorkItem #{multi.Id} started after {_form} had returned");
        }
        CheckOnPool($"IWorkItem #{multi.Id}");
        CheckLocal($"IWorkItem #{multi.Id}", 0);
    }

    internal void RunPlain(PlainItem item)
    {
        int hits = Interlocked.Increment(ref item.Hits);
        if (hits > 1)
        {
            Fail($"{item.Label} ran {hits} times");
        }
        if (_shutdownReturned)
        {
            Fail($"{item.Label} started after {_form} had returned");
        }
        CheckOnPool(item.Label);
        CheckCurrentLane(item.Label, item.Lane);
        if (SynchronizationContext.Current is { } context)
        {
            Fail($"{item.Label} ran with a SynchronizationContext installed ({context.GetType().Name})");
        }
        CheckLocal(item.Label, item.ExpectedLocal);
        EnterLane(item.Lane, item.Mark, item.Label, queuedItem: true);
        object? outer = EnterCallback(item);
        try
        {
            Behave(item);
        }
        finally
        {
            ExitCallback(outer);
            ExitLane(item.Lane);
        }
    }

    private void Behave(PlainItem item)
    {
        switch (item.Behaviour)
        {
            case PlainBehaviour.Throw:
                throw new FuzzException(item.Label) { Plain = item };
            case PlainBehaviour.Nest:
                var random = new Random(item.ChildSeed);
                int children = random.Next(1, 4);
                for (int i = 0; i < children && !IssueFromItem(random, item.Depth + 1, item.Lane); i++)
                {
                }
                break;
            case PlainBehaviour.BlockingRegion:
                using (BlockingRegion region = WorkerPool.EnterBlockingRegion())
                {
                    if (region.IsActive && WorkerPool.Current != _pool)
                    {
                        Fail($"{item.Label}: a blocking region is active off the pool's workers");
                    }
                    Thread.Sleep(1);
                }
                break;
            case PlainBehaviour.Block:
                if ((item.ChildSeed & 1) == 0)
                {
                    Thread.Sleep(item.ChildSeed % 3 == 0 ? 1 : 0);
                }
                else
                {
                    Thread.SpinWait(2000);
                }
                break;
            case PlainBehaviour.Post:
                IssuePost(new Random(item.ChildSeed), _pool.IsShutdownStarted, producer: null, item.Lane);
                break;
            case PlainBehaviour.StartTask:
                IssueStartNew(new Random(item.ChildSeed), producer: null, _pool.IsShutdownStarted);
                break;
            case PlainBehaviour.RunInside:
                IssueRun(new Random(item.ChildSeed), producer: null, _pool.IsShutdownStarted);
                break;
            case PlainBehaviour.HoldLane:
                HoldLane(item);
                break;
            case PlainBehaviour.ShutdownOwnLane:
                ShutdownFromLaneItem(item);
                break;
        }
    }
}
