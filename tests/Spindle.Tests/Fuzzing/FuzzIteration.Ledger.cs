using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// The exact check of the ledger once the pool has stopped, and its summary for failure reports.
internal sealed partial class FuzzIteration
{
    // ---- The ledger --------------------------------------------------------------------------------------------

    /// <summary>Whether accepted work of <paramref name="lane"/> (or of the pool's own queue) may have been cancelled.</summary>
    private bool MayBeCancelled(LaneRecord? lane) => _cancelForm || (lane is not null && Volatile.Read(ref lane.CancelRequested) != 0);

    private string Drained(LaneRecord? lane) => lane is null ? "the pool was drained" : $"{lane.Name} and the pool were drained";

    private void CheckLedger(int finalFigure)
    {
        int plainNeverRan = 0;
        var laneCancelled = _lanes.ToDictionary(lane => lane, _ => 0);
        foreach (PlainItem item in _plain)
        {
            int state = item.ResolveState();
            int hits = Volatile.Read(ref item.Hits);
            if (state == CallState.Accepted)
            {
                if (hits == 0)
                {
                    if (item.Lane is null)
                    {
                        plainNeverRan++;
                    }
                    else
                    {
                        laneCancelled[item.Lane]++;
                    }
                    if (!MayBeCancelled(item.Lane))
                    {
                        Fail($"{item.Label} was accepted but never ran, and {Drained(item.Lane)}");
                    }
                }
            }
            else if (item.Pending is { IsCompleted: false })
            {
                continue; // reported by WaitForTasks
            }
            else if (state == CallState.Issued && item.Pending is { } pending)
            {
                Fail($"{item.Label}: QueueUserWorkItemAsync ended {pending.Status}: {pending.Exception?.InnerException}");
            }
            else if (hits != 0)
            {
                Fail($"{item.Label} ran although its queueing call {CallState.Describe(state)}");
            }
            if (item.Behaviour == PlainBehaviour.Throw && item.Reports != hits)
            {
                Fail($"{item.Label} threw {hits} time(s) but UnhandledException saw it {item.Reports} time(s)");
            }
        }

        int multiNeverRan = 0;
        foreach (MultiItem multi in _multi)
        {
            if (multi.Runs > multi.Accepted)
            {
                Fail($"IWorkItem #{multi.Id} ran {multi.Runs} times for {multi.Accepted} accepted queueings");
            }
            else if (multi.Runs < multi.Accepted)
            {
                multiNeverRan += multi.Accepted - multi.Runs;
                if (!_cancelForm)
                {
                    Fail($"IWorkItem #{multi.Id} ran {multi.Runs} times for {multi.Accepted} accepted queueings, and the pool was drained");
                }
            }
        }

        int cancelledByShutdown = 0;
        int cancelledByToken = 0;
        foreach (RunRecord run in _runs)
        {
            int state = Volatile.Read(ref run.State);
            if (state != CallState.Accepted)
            {
                if (run.Starts != 0)
                {
                    Fail($"{run.Label}: its delegate ran although the Run call threw");
                }
                continue;
            }
            Task task = run.Task!;
            if (!task.IsCompleted)
            {
                continue; // reported by WaitForTasks
            }
            switch (task.Status)
            {
                case TaskStatus.RanToCompletion:
                    if (run.Starts != 1 || run.Completions != 1)
                    {
                        Fail($"{run.Label}: RanToCompletion, but its delegate started {run.Starts} and completed {run.Completions} time(s)");
                    }
                    else if (task is Task<int> typed && typed.Result != run.Id)
                    {
                        Fail($"{run.Label}: RanToCompletion with result {typed.Result}, expected {run.Id}");
                    }
                    break;
                case TaskStatus.Faulted:
                    Exception inner = task.Exception!.InnerExceptions[0];
                    if (!(run.Throws && run.Starts == 1 && task.Exception.InnerExceptions.Count == 1 && inner is FuzzException { Run: { } thrower } && thrower == run))
                    {
                        Fail($"{run.Label}: Faulted (delegate started {run.Starts} time(s), throws on purpose: {run.Throws}): {inner}");
                    }
                    break;
                case TaskStatus.Canceled:
                    (CancellationToken token, string message) = CancellationOf(task);
                    if (run.Starts != 0)
                    {
                        Fail($"{run.Label}: Canceled ({message}) although its delegate ran");
                    }
                    else if (run.Token.CanBeCanceled && token == run.Token)
                    {
                        cancelledByToken++;
                        if (!run.Token.IsCancellationRequested)
                        {
                            Fail($"{run.Label}: Canceled with its token, which was never cancelled");
                        }
                    }
                    else
                    {
                        if (run.Lane is null)
                        {
                            cancelledByShutdown++;
                        }
                        else
                        {
                            laneCancelled[run.Lane]++;
                        }
                        if (!MayBeCancelled(run.Lane))
                        {
                            Fail($"{run.Label}: cancelled by shutdown ({message}), but {Drained(run.Lane)}");
                        }
                    }
                    break;
            }
        }

        foreach (SchedRecord scheduled in _scheduled)
        {
            int state = Volatile.Read(ref scheduled.State);
            if (state != CallState.Accepted)
            {
                if (scheduled.Starts != 0)
                {
                    Fail($"{scheduled.Label} ran although StartNew threw");
                }
                continue;
            }
            Task task = scheduled.Task!;
            if (!task.IsCompleted)
            {
                continue;
            }
            if (task.Status == TaskStatus.RanToCompletion)
            {
                if (scheduled.Starts != 1 || scheduled.Completions != 1)
                {
                    Fail($"{scheduled.Label}: RanToCompletion, but its delegate started {scheduled.Starts} and completed {scheduled.Completions} time(s)");
                }
            }
            else if (scheduled.Kind.StartsWith("ContinueWith", StringComparison.Ordinal) && task.IsFaulted
                && task.Exception!.InnerException is TaskSchedulerException { InnerException: ObjectDisposedException }
                && scheduled.Starts == 0 && _pool.IsShutdownStarted)
            {
                // A continuation whose antecedent completed once the pool refused work: faulted by the task framework, not stranded.
            }
            else
            {
                Fail($"{scheduled.Label}: {task.Status} (started {scheduled.Starts} time(s)): {task.Exception?.InnerException}");
            }
        }

        foreach (PostRecord post in _posts)
        {
            int state = Volatile.Read(ref post.State);
            if (state == CallState.Accepted && post.Hits != 1)
            {
                Fail($"{post.Label} was accepted and ran {post.Hits} times (posts are never cancelled: exactly once)");
            }
            else if (state != CallState.Accepted && post.Hits != 0)
            {
                Fail($"{post.Label} ran although Post threw");
            }
        }

        foreach (TimerRecord timer in _timers.Where(t => t.State == CallState.BadInput && t.Callbacks != 0))
        {
            Fail($"{timer.Label} fired although CreateTimer rejected it");
        }
        foreach (WaitRecord wait in _waits.Where(w => w.State == CallState.BadInput && w.Callbacks != 0))
        {
            Fail($"{wait.Label} called back although its registration was rejected");
        }

        foreach (NeighbourRecord neighbour in _neighbours)
        {
            Task task = neighbour.Task!;
            if (task.IsCompleted && (task.Status != TaskStatus.RanToCompletion || neighbour.Starts != 1
                || (task is Task<int> typed && typed.Result != neighbour.Id)))
            {
                Fail($"{neighbour.Label}: {task.Status} after {neighbour.Starts} start(s) ({task.Exception?.InnerException?.Message ?? CancellationOf(task).Message})");
            }
        }

        (int byLanesAtLeast, int byLanesAtMost) = CheckLanes(laneCancelled);
        int expected = plainNeverRan + multiNeverRan + cancelledByShutdown + byLanesAtLeast;
        int expectedAtMost = expected - byLanesAtLeast + byLanesAtMost;
        string breakdown = $"the ledger expects {(expected == expectedAtMost ? expected : $"{expected} to {expectedAtMost}")}: "
            + $"{byLanesAtLeast} to {byLanesAtMost} lane items (a lane's own CancelPending may have cancelled them instead), {plainNeverRan} plain items and {multiNeverRan} IWorkItem queueings that never ran, "
            + $"and {cancelledByShutdown} Run items cancelled by shutdown. Not to be counted: {cancelledByToken} Run items cancelled by their own token, "
            + $"{_timers.Count(t => t.State == CallState.Accepted)} timers ({_timers.Count(t => t.DisposedByProducer)} disposed by producers, "
            + $"{_timers.Sum(t => t.Callbacks)} callbacks), {_waits.Count(w => w.State == CallState.Accepted)} registered waits "
            + $"({_waits.Sum(w => w.Callbacks)} callbacks), {_scheduled.Count} scheduler tasks and {_posts.Count} posts (these always run)";
        if (_cancelForm)
        {
            if (_lastCancelFigure != finalFigure)
            {
                Fail($"Shutdown(CancelPending) returned {_lastCancelFigure}, a later call {finalFigure}: the figure changed after the pool had stopped");
            }
            if (finalFigure < expected || finalFigure > expectedAtMost)
            {
                Fail($"Shutdown(CancelPending) reported {finalFigure} cancelled items; {breakdown}");
            }
        }
        else if (finalFigure != 0)
        {
            Fail($"the pool was drained, yet a later Shutdown(CancelPending) reports {finalFigure} cancelled items; {breakdown}");
        }
    }

    /// <summary>
    /// Each lane's figure against the ledger (exact), and a serial lane's order; returns how many of the lanes' cancelled
    /// items the pool's figure must include: all of those of lanes never shut down with CancelPending when the pool
    /// cancelled, and up to all of the others (whichever shutdown reached an item first cancelled it).
    /// </summary>
    private (int AtLeast, int AtMost) CheckLanes(Dictionary<LaneRecord, int> cancelled)
    {
        int atLeast = 0;
        int atMost = 0;
        foreach (LaneRecord lane in _lanes)
        {
            int ledger = cancelled[lane];
            long figure = lane.Lane.CancelledWorkItemCount;
            if (figure != ledger)
            {
                Fail($"{lane.Description}: CancelledWorkItemCount is {figure}, but {ledger} of its accepted items never ran or were cancelled by shutdown "
                    + $"(shut down by: {(lane.Shutdowns.IsEmpty ? "the pool only" : string.Join("; ", lane.Shutdowns))})");
            }
            if (lane.LastFigure > figure)
            {
                Fail($"{lane.Description}: a Shutdown returned {lane.LastFigure}, more than its final CancelledWorkItemCount {figure}");
            }
            if (_cancelForm)
            {
                atMost += ledger;
                atLeast += lane.CancelRequested == 0 ? ledger : 0;
            }
            // Order holds for serial lanes in every shutdown form, cancel sweeps included (a sweep holds the lane's slot).
            if (lane.Serial && _options.SerialOrder)
            {
                CheckOrder(lane);
            }
        }
        return (atLeast, atMost);
    }

    /// <summary>A serial lane starts the items of one producer in the order that producer queued them.</summary>
    private void CheckOrder(LaneRecord lane)
    {
        var last = new Dictionary<int, OrderMark>();
        foreach (OrderMark mark in lane.Starts)
        {
            if (!mark.Ordered)
            {
                continue;
            }
            if (last.TryGetValue(mark.Producer, out OrderMark? previous) && previous.Sequence > mark.Sequence)
            {
                Fail($"serial {lane.Description}: {mark.Label} started ({mark.Where}) after {previous.Label} ({previous.Where}), which producer {mark.Producer} queued later");
            }
            last[mark.Producer] = mark;
        }
    }

    /// <summary>The token and message of a cancelled task's exception.</summary>
    private static (CancellationToken Token, string Message) CancellationOf(Task task)
    {
        try
        {
            task.GetAwaiter().GetResult();
        }
        catch (OperationCanceledException exception)
        {
            return (exception.CancellationToken, exception.Message);
        }
        catch (Exception)
        {
            return (default, "not cancelled");
        }
        return (default, "not cancelled");
    }

    private string LedgerSummary()
    {
        PlainItem[] accepted = _plain.Where(p => p.State == CallState.Accepted).ToArray();
        int[] neverRan = accepted.Where(p => p.Hits == 0).Select(p => p.Id).ToArray();
        RunRecord[] runs = _runs.Where(r => r.State == CallState.Accepted).ToArray();
        RunRecord[] pendingRuns = runs.Where(r => !r.Task!.IsCompleted).ToArray();
        SchedRecord[] scheduled = _scheduled.Where(s => s.State == CallState.Accepted).ToArray();
        PostRecord[] posts = _posts.Where(p => p.State == CallState.Accepted).ToArray();
        return $"plain items: {_plain.Count} issued, {accepted.Length} accepted, {accepted.Count(p => p.Hits == 1)} ran once, "
            + $"{neverRan.Length} never ran{Ids(neverRan)}, {_plain.Count(p => p.State == CallState.Refused)} refused, "
            + $"{_plain.Count(p => p.State == CallState.BadInput)} bad input; "
            + $"IWorkItem queueings: {_multi.Sum(m => m.Accepted)} accepted, {_multi.Sum(m => m.Runs)} runs; "
            + $"Run items: {runs.Length} accepted, {runs.Count(r => r.Task!.Status == TaskStatus.RanToCompletion)} ran to completion, "
            + $"{runs.Count(r => r.Task!.IsFaulted)} faulted, {runs.Count(r => r.Task!.IsCanceled)} cancelled, "
            + $"{pendingRuns.Length} not complete{Ids(pendingRuns.Select(r => r.Id))}; "
            + $"scheduler tasks: {scheduled.Length} accepted, {scheduled.Count(s => s.Starts == 1)} ran, "
            + $"{scheduled.Count(s => !s.Task!.IsCompleted)} not complete{Ids(scheduled.Where(s => !s.Task!.IsCompleted).Select(s => s.Id))}; "
            + $"posts: {posts.Length} accepted, {posts.Count(p => p.Hits == 1)} ran{Ids(posts.Where(p => p.Hits != 1).Select(p => p.Id))}; "
            + $"timers: {_timers.Count} ({_timers.Sum(t => t.Callbacks)} callbacks); registered waits: {_waits.Count} ({_waits.Sum(w => w.Callbacks)} callbacks); "
            + $"neighbour tasks: {_neighbours.Count} ({_neighbours.Count(n => n.Task is { IsCompleted: false })} not complete); "
            + $"CancelPending figures: outside {_lastCancelFigure}, inside {_insideFigure}; "
            + $"lanes: {(_lanes.IsEmpty ? "none" : string.Join("; ", _lanes.Select(LaneSummary)))}";
    }

    private string LaneSummary(LaneRecord lane)
    {
        PlainItem[] items = _plain.Where(p => p.Lane == lane).ToArray();
        return $"{lane.Description}{(lane.Owner < 0 ? "" : $" of producer {lane.Owner}")}: {items.Length} plain items, "
            + $"{items.Count(p => p.ResolveState() == CallState.Accepted)} accepted, {items.Count(p => p.Hits == 1)} ran, "
            + $"{items.Count(p => p.ResolveState() == CallState.Rejected)} rejected, {items.Count(p => p.ResolveState() == CallState.Refused)} refused, "
            + $"{items.Count(p => p.ResolveState() == CallState.WaitCancelled)} waits cancelled, {_runs.Count(r => r.Lane == lane)} Run items; "
            + $"cancelled {lane.Lane.CancelledWorkItemCount}, completed {lane.Lane.CompletedWorkItemCount}; "
            + $"shut down by {(lane.Shutdowns.IsEmpty ? "the pool only" : string.Join(", ", lane.Shutdowns))}";
    }

    private static string Ids(IEnumerable<int> ids)
    {
        int[] list = ids.Take(16).ToArray();
        return list.Length == 0 ? "" : $" (#{string.Join(", #", list)}{(ids.Skip(16).Any() ? ", ..." : "")})";
    }
}
