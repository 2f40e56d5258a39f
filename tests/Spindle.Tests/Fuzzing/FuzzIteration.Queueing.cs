using System;
using System.Threading;

namespace Spindle.Tests.Fuzzing;

// Plain work items: every QueueUserWorkItem form, IWorkItem queued several times, and what an item does when it runs.
internal sealed partial class FuzzIteration
{
    // ---- Plain work items --------------------------------------------------------------------------------------

    private bool QueuePlain(Random random, int depth, bool seen)
    {
        int form = random.Next(14);
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
            _ => ("QueueUserWorkItem(WaitCallback, null) from a closure", true),
        };
        var item = new PlainItem(this, NextId(), name, behaviour, childSeed, Flowed(safe), depth);
        _plain.Enqueue(item);
        try
        {
            switch (form)
            {
                case 0:
                    _pool.QueueUserWorkItem(_ => item.Execute());
                    break;
                case 1:
                    _pool.QueueUserWorkItem(PlainItem.WaitCallback, item);
                    break;
                case 2:
                    _pool.QueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 3:
                    _pool.QueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), preferLocal);
                    break;
                case 4:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.WaitCallback, item);
                    break;
                case 5:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.Action, item, preferLocal);
                    break;
                case 6:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), preferLocal);
                    break;
                case 7:
                    _pool.UnsafeQueueUserWorkItem(item, preferLocal);
                    break;
                case 8:
                    _pool.QueueUserWorkItem(PlainItem.Action, item, options);
                    break;
                case 9:
                    _pool.QueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), options);
                    break;
                case 10:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.Action, item, options);
                    break;
                case 11:
                    _pool.UnsafeQueueUserWorkItem(PlainItem.ValueAction, new PlainRef(item), options);
                    break;
                case 12:
                    _pool.UnsafeQueueUserWorkItem(item, options);
                    break;
                default:
                    _pool.QueueUserWorkItem(_ => item.Execute(), null);
                    break;
            }
        }
        catch (ObjectDisposedException exception)
        {
            return Refuse(ref item.State, item.Label, exception);
        }
        Accept(ref item.State, item.Label, seen);
        return false;
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
        if (SynchronizationContext.Current is { } context)
        {
            Fail($"{item.Label} ran with a SynchronizationContext installed ({context.GetType().Name})");
        }
        CheckLocal(item.Label, item.ExpectedLocal);
        switch (item.Behaviour)
        {
            case PlainBehaviour.Throw:
                throw new FuzzException(item.Label) { Plain = item };
            case PlainBehaviour.Nest:
                var random = new Random(item.ChildSeed);
                int children = random.Next(1, 4);
                for (int i = 0; i < children && !IssueFromItem(random, item.Depth + 1); i++)
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
                IssuePost(new Random(item.ChildSeed), _pool.IsShutdownStarted);
                break;
            case PlainBehaviour.StartTask:
                IssueStartNew(new Random(item.ChildSeed), producer: null, _pool.IsShutdownStarted);
                break;
            case PlainBehaviour.RunInside:
                IssueRun(new Random(item.ChildSeed), producer: null, _pool.IsShutdownStarted);
                break;
        }
    }
}
