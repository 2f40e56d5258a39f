using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// Lanes: their creation with options drawn from the whole valid range, the target a queueing operation goes to, the
// lanes' own shutdowns racing the producers and the pool's shutdown, and what a lane item checks when it runs.
internal sealed partial class FuzzIteration
{
    /// <summary>
    /// Whether a lane's QueueLimit may be int.MaxValue. A lane with that limit once made its Dispose throw
    /// SemaphoreFullException (its room semaphore overflowed when the shutdown woke the waiters) and the pool's Dispose
    /// fail the process; set to false to leave the value out should that come back and hide the other lane contracts.
    /// </summary>
    internal const bool QueueLimitOfIntMaxValue = true;

    /// <summary>How long a lane item holding its slot waits for shutdown to release the lane's waiters for room.</summary>
    private static readonly TimeSpan s_releaseBound = Waits.MustHappen / 2;

    /// <summary>How a lane is shut down on its own.</summary>
    private enum LaneShutdownForm
    {
        Dispose,
        DisposeAsync,
        Drain,
        CancelPending,
        DrainAsync,
        CancelPendingAsync,
        DrainThenCancelPending,
        AsyncWithCancelledWait,
    }

    /// <summary>When a shared lane is shut down, relative to the pool's shutdown.</summary>
    private enum LaneShutdownMoment
    {
        WithThePool,
        Before,
        During,
        After,
    }

    private readonly List<(LaneRecord Lane, LaneShutdownMoment Moment, LaneShutdownForm Form, long AtOperation)> _lanePlan = [];

    private LaneRecord CreateLaneRecord(Random random, int owner)
    {
        LaneOptions options = DrawLaneOptions(random);
        int id = NextId();
        options.Name = $"lane #{id}";
        WorkerPoolLane lane = _pool.CreateLane(options);
        var record = new LaneRecord(id, lane, options, owner);
        _lanes.Enqueue(record);
        return record;
    }

    private LaneOptions DrawLaneOptions(Random random)
    {
        var options = new LaneOptions
        {
            Priority = (LanePriority)random.Next(3),
            Share = random.Next(4) switch
            {
                0 => LaneOptions.MaxShare,
                1 => 1,
                _ => random.Next(2, 6),
            },
            MaxConcurrency = random.Next(5) switch
            {
                0 => null,
                1 when _options.SerialLanes => 1,
                1 or 2 => random.Next(2, 5),
                3 => int.MaxValue,
                _ => _options.SerialLanes ? 1 : null,
            },
            QueueLimit = random.Next(6) switch
            {
                0 or 1 => null,
                2 => 1,
                3 when QueueLimitOfIntMaxValue => int.MaxValue,
                _ => random.Next(2, 9),
            },
            FullMode = random.Next(2) == 0 && _options.LaneWaits ? LaneFullMode.Wait : LaneFullMode.Reject,
        };
        return options;
    }

    /// <summary>The seed plans a shutdown for each shared lane: with the pool only, or on its own before, during or after the pool's.</summary>
    private void PlanLaneShutdowns(Random random)
    {
        int forms = Enum.GetValues<LaneShutdownForm>().Length;
        foreach (LaneRecord lane in _sharedLanes)
        {
            var moment = (LaneShutdownMoment)random.Next(4);
            var form = (LaneShutdownForm)random.Next(forms);
            long at = random.Next(0, (int)_operationsBeforeShutdown + 1);
            if (_options.LaneShutdowns && moment != LaneShutdownMoment.WithThePool)
            {
                _lanePlan.Add((lane, moment, form, at));
            }
        }
        _lanePlan.Sort((a, b) => a.AtOperation.CompareTo(b.AtOperation));
    }

    /// <summary>The lane closer: shuts down the lanes planned before the pool's shutdown, each once its moment has come.</summary>
    private void CloseLanesBeforeShutdown()
    {
        try
        {
            foreach ((LaneRecord lane, LaneShutdownMoment moment, LaneShutdownForm form, long at) in _lanePlan)
            {
                if (moment != LaneShutdownMoment.Before)
                {
                    continue;
                }
                Waits.Poll(() => Volatile.Read(ref _operationsIssued) >= at || _pool.IsShutdownStarted
                    || Volatile.Read(ref _producersRunning) == 0 || _stopping, Waits.MustHappen);
                ShutdownLane(lane, form, "the lane closer");
            }
        }
        catch (Exception exception)
        {
            Fail($"the lane closer: a lane shutdown threw unexpectedly: {exception}");
        }
    }

    /// <summary>Threads that shut lanes down while the pool's shutdown runs (started just before it).</summary>
    private List<Thread> StartLaneShutdownsDuringPoolShutdown() =>
        _lanePlan.Where(entry => entry.Moment == LaneShutdownMoment.During)
            .Select(entry => StartThread(() => ShutdownLaneGuarded(entry.Lane, entry.Form, "a thread racing the pool's shutdown"), $"fuzz lane shutdown {entry.Lane.Id}"))
            .ToList();

    private void ShutdownLanesAfterPoolShutdown()
    {
        foreach ((LaneRecord lane, LaneShutdownMoment moment, LaneShutdownForm form, long _) in _lanePlan)
        {
            if (moment == LaneShutdownMoment.After)
            {
                ShutdownLaneGuarded(lane, form, "after the pool's shutdown returned");
            }
        }
    }

    private void ShutdownLaneGuarded(LaneRecord lane, LaneShutdownForm form, string by)
    {
        try
        {
            ShutdownLane(lane, form, by);
        }
        catch (Exception exception)
        {
            Fail($"{lane.Description}: {form} by {by} threw: {exception}");
        }
    }

    /// <summary>
    /// Shuts a lane down in <paramref name="form"/>. A form that waits for the stop (any, called outside the lane's own
    /// items) is followed by checks: the lane is no longer listed in pool.Lanes, and none of its queued items starts
    /// from now on (continuations posted later still run, under the lane's cap). The asynchronous forms' tasks must end
    /// (they are judged with the other tasks).
    /// </summary>
    private void ShutdownLane(LaneRecord lane, LaneShutdownForm form, string by)
    {
        WorkerPoolLane target = lane.Lane;
        bool cancels = form is LaneShutdownForm.CancelPending or LaneShutdownForm.CancelPendingAsync or LaneShutdownForm.DrainThenCancelPending
            or LaneShutdownForm.AsyncWithCancelledWait;
        if (cancels)
        {
            Volatile.Write(ref lane.CancelRequested, 1);
        }
        lane.Shutdowns.Enqueue($"{form} by {by}");
        bool own = WorkerPoolLane.Current == target;
        switch (form)
        {
            case LaneShutdownForm.Dispose:
                target.Dispose();
                break;
            case LaneShutdownForm.Drain:
                lane.RecordFigure(target.Shutdown(ShutdownMode.Drain));
                break;
            case LaneShutdownForm.CancelPending:
                lane.RecordFigure(target.Shutdown(ShutdownMode.CancelPending));
                break;
            case LaneShutdownForm.DrainThenCancelPending:
                Task<int> drain = target.ShutdownAsync(ShutdownMode.Drain);
                lane.RecordFigure(target.Shutdown(ShutdownMode.CancelPending));
                MustComplete($"{lane.Name}: ShutdownAsync(Drain) before a Shutdown(CancelPending)", drain, lane);
                break;
            case LaneShutdownForm.DisposeAsync:
                MustComplete($"{lane.Name}: DisposeAsync", target.DisposeAsync().AsTask(), lane);
                return;
            case LaneShutdownForm.DrainAsync:
                MustComplete($"{lane.Name}: ShutdownAsync(Drain)", target.ShutdownAsync(ShutdownMode.Drain), lane);
                return;
            case LaneShutdownForm.CancelPendingAsync:
                MustComplete($"{lane.Name}: ShutdownAsync(CancelPending)", target.ShutdownAsync(ShutdownMode.CancelPending), lane);
                return;
            default:
                // The token ends only the wait: the lane goes on shutting down, and its task is cancelled or completes.
                var source = new CancellationTokenSource();
                _sources.Enqueue(source);
                source.CancelAfter(lane.Id % 2);
                MustComplete($"{lane.Name}: ShutdownAsync(CancelPending) with a wait cancelled", target.ShutdownAsync(ShutdownMode.CancelPending, source.Token), lane);
                return;
        }
        if (own)
        {
            return; // from the lane's own item the call does not wait for the stop
        }
        lane.StopSeen = true;
        if (_options.LaneList && _pool.Lanes.Contains(target))
        {
            Fail($"{lane.Description}: still listed in pool.Lanes after its {form} returned (the lane has stopped)");
        }
    }

    private void MustComplete(string label, Task task, LaneRecord lane)
    {
        _mustComplete.Enqueue((label, task));
        task.ContinueWith(static (done, state) =>
        {
            var (iteration, lane, label) = ((FuzzIteration, LaneRecord, string))state!;
            if (done.IsFaulted)
            {
                iteration.Fail($"{label} faulted: {done.Exception!.InnerException}");
            }
            else if (done is Task<int> { IsCompletedSuccessfully: true } figure)
            {
                lane.RecordFigure(figure.Result);
            }
        }, (this, lane, label), CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
    }

    // ---- Producers' lane operations ----------------------------------------------------------------------------

    /// <summary>Where a producer's queueing operation goes: the pool's own queue (null) or one of the producer's lanes.</summary>
    private static LaneRecord? PickLane(Random random, ProducerState? producer) =>
        producer is null || producer.Lanes.Count == 0 || random.Next(2) == 0 ? null : producer.Lanes[random.Next(producer.Lanes.Count)];

    private bool LaneOperation(ProducerState producer, bool seen)
    {
        Random random = producer.Random;
        int roll = random.Next(20);
        if (!_options.Lanes)
        {
            return QueuePlain(random, 0, seen);
        }
        switch (roll)
        {
            case < 6:
                return producer.OwnLanes >= 3 ? ReadLanes(producer) : CreateOwnLane(producer, seen);
            case < 10 when _options.LaneShutdowns:
                return ShutdownOwnLane(producer);
            case < 17:
                return ReadLanes(producer);
            default:
                return BadLaneOptions(random);
        }
    }

    private bool CreateOwnLane(ProducerState producer, bool seen)
    {
        LaneRecord lane;
        try
        {
            lane = CreateLaneRecord(producer.Random, producer.Index);
        }
        catch (ObjectDisposedException exception)
        {
            return RefuseCall("CreateLane", exception);
        }
        if (seen)
        {
            Fail($"CreateLane: {lane.Description} was created although IsShutdownStarted was already true before the call");
        }
        producer.Lanes.Add(lane);
        producer.OwnLanes++;
        return false;
    }

    /// <summary>Shuts down one of the producer's own lanes (a shared lane follows the seed's plan), in any form.</summary>
    private bool ShutdownOwnLane(ProducerState producer)
    {
        Random random = producer.Random;
        LaneRecord? lane = producer.Lanes.FirstOrDefault(l => l.Owner == producer.Index && l.Shutdowns.IsEmpty);
        var form = (LaneShutdownForm)random.Next(Enum.GetValues<LaneShutdownForm>().Length);
        if (lane is null)
        {
            return false;
        }
        // A form that waits for the stop may wait for work that waits for the pool's shutdown: count it as waiting, so
        // that the pool's shutdown does not wait for this producer.
        Interlocked.Increment(ref _producersWaiting);
        try
        {
            ShutdownLane(lane, form, $"producer {producer.Index}");
        }
        finally
        {
            Interlocked.Decrement(ref _producersWaiting);
        }
        return false;
    }

    /// <summary>The lanes' properties, and pool.Lanes: it lists every lane that has not begun to shut down.</summary>
    private bool ReadLanes(ProducerState producer)
    {
        IReadOnlyList<WorkerPoolLane> listed = _options.LaneList ? _pool.Lanes : [];
        foreach (LaneRecord lane in producer.Lanes)
        {
            WorkerPoolLane target = lane.Lane;
            if (_options.LaneList && !listed.Contains(target) && !target.IsShutdownStarted)
            {
                Fail($"{lane.Description}: missing from pool.Lanes although it has not begun to shut down");
            }
            if (target.Pool != _pool || target.Name != lane.Name || target.Priority != lane.Options.Priority || target.Share != lane.Options.Share
                || target.MaxConcurrency != lane.Options.MaxConcurrency || target.QueueLimit != lane.Options.QueueLimit || target.FullMode != lane.Options.FullMode)
            {
                Fail($"{lane.Description}: its properties differ from the options it was created with ({target})");
            }
            _ = target.RunningWorkItemCount + target.CompletedWorkItemCount + target.CancelledWorkItemCount;
            _ = target.ToString();
        }
        return false;
    }

    private bool BadLaneOptions(Random random)
    {
        (string what, LaneOptions? options) = random.Next(7) switch
        {
            0 => ("Share 0", new LaneOptions { Share = 0 }),
            1 => ("Share MaxShare + 1", new LaneOptions { Share = LaneOptions.MaxShare + 1 }),
            2 => ("MaxConcurrency 0", new LaneOptions { MaxConcurrency = 0 }),
            3 => ("QueueLimit 0", new LaneOptions { QueueLimit = 0 }),
            4 => ("Priority 7", new LaneOptions { Priority = (LanePriority)7 }),
            5 => ("FullMode 5", new LaneOptions { FullMode = (LaneFullMode)5 }),
            _ => ("null options", null),
        };
        try
        {
            WorkerPoolLane lane = _pool.CreateLane(options!);
            Fail($"CreateLane({what}) was accepted");
            lane.Dispose();
        }
        catch (ArgumentException)
        {
            // The documented exception.
        }
        catch (ObjectDisposedException) when (_pool.IsShutdownStarted)
        {
            // Refused for shutdown: acceptable too.
        }
        return false;
    }

    // ---- What a lane item checks when it runs ------------------------------------------------------------------

    /// <summary>
    /// Marks the start of code of <paramref name="lane"/>: a serial lane's never overlaps, and an item queued to the
    /// lane never starts after a lane shutdown that waits for the stop returned (<paramref name="queuedItem"/>: not a
    /// post or scheduler task, which run even then).
    /// </summary>
    private void EnterLane(LaneRecord? lane, OrderMark? mark, string label, bool queuedItem)
    {
        if (lane is null)
        {
            return;
        }
        if (queuedItem && lane.StopSeen)
        {
            Fail($"{label} started after a shutdown of its lane that waits for the stop had returned");
        }
        if (!lane.Serial)
        {
            return;
        }
        int inside = Interlocked.Increment(ref lane.Inside);
        if (inside > 1)
        {
            Fail($"{label}: {inside} pieces of work of serial lane {lane.Description} run at once");
        }
        if (mark is not null)
        {
            mark.Where = WorkerPool.Current != _pool ? "off the pool's workers"
                : WorkerPoolLane.Current == lane.Lane ? "in its lane" : "on a worker, outside its lane";
            mark.Where += $"; lane {(lane.Lane.IsShutdownStarted ? "shutting down" : "running")}, pool {(_pool.IsShutdownStarted ? "shutting down" : "running")}";
            lane.Starts.Enqueue(mark);
        }
    }

    private static void ExitLane(LaneRecord? lane)
    {
        if (lane is { Serial: true })
        {
            Interlocked.Decrement(ref lane.Inside);
        }
    }

    /// <summary>A lane item on one of the pool's workers sees its lane as the current one; the pool's own items see none.</summary>
    private void CheckCurrentLane(string label, LaneRecord? lane)
    {
        if (WorkerPool.Current != _pool)
        {
            return;
        }
        WorkerPoolLane? current = WorkerPoolLane.Current;
        if (current != lane?.Lane)
        {
            Fail($"{label}: WorkerPoolLane.Current is {(current is null ? "null" : current.Name)}, expected {(lane is null ? "null" : lane.Name)}");
        }
    }

    /// <summary>
    /// A lane item that holds its slot for a moment. If the lane's or the pool's shutdown begins meanwhile, every
    /// producer waiting for room in the lane must be released by that shutdown (refused), although this item still holds
    /// the slot and nothing is dequeued: it waits for that (bounded) before it ends.
    /// </summary>
    private void HoldLane(PlainItem item)
    {
        LaneRecord lane = item.Lane!;
        if (WorkerPoolLane.Current != lane.Lane)
        {
            return; // not holding a slot of the lane (a leftover run by the shutdown)
        }
        long until = Environment.TickCount64 + 20;
        while (Environment.TickCount64 < until && !lane.Lane.IsShutdownStarted && !_stopping)
        {
            Thread.Sleep(1);
        }
        if (!lane.Lane.IsShutdownStarted)
        {
            return;
        }
        if (!Waits.Poll(() => Volatile.Read(ref lane.WaitingForRoom) == 0 && Volatile.Read(ref lane.PendingAsync) == 0, s_releaseBound))
        {
            Fail($"{item.Label}: {lane.WaitingForRoom} producer(s) blocked and {lane.PendingAsync} QueueUserWorkItemAsync call(s) still waiting for room in "
                + $"{lane.Description} {s_releaseBound.TotalSeconds} s after shutdown of the lane or the pool ({(_pool.IsShutdownStarted ? _form.ToString() : string.Join("; ", lane.Shutdowns))}) began "
                + "while an item held the lane's slot");
        }
    }

    /// <summary>A lane item shuts its own lane down: the call returns at once, and the lane stops once this item ends.</summary>
    private void ShutdownFromLaneItem(PlainItem item)
    {
        LaneRecord lane = item.Lane!;
        if (WorkerPoolLane.Current != lane.Lane)
        {
            return; // a leftover run by the shutdown: the call would wait for the lane's stop
        }
        bool cancel = (item.ChildSeed & 1) == 0;
        if (cancel)
        {
            Volatile.Write(ref lane.CancelRequested, 1);
        }
        lane.Shutdowns.Enqueue($"Shutdown({(cancel ? "CancelPending" : "Drain")}) from {item.Label}");
        lane.RecordFigure(lane.Lane.Shutdown(cancel ? ShutdownMode.CancelPending : ShutdownMode.Drain));
    }
}
