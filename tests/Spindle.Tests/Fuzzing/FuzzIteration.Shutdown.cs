using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// Producers, the shutdown driver, and what happens once shutdown has returned.
internal sealed partial class FuzzIteration
{
    // ---- Producers and the shutdown driver --------------------------------------------------------------------

    private void Produce(int index)
    {
        s_local.Value = 100 + index;
        var producer = new ProducerState(index, new Random(ApiFuzzer.Mix(_seed, _iteration, index + 1)));
        producer.Lanes.AddRange(_sharedLanes);
        int afterShutdown = 0;
        try
        {
            while (!_stopping)
            {
                bool seen = _pool.IsShutdownStarted;
                bool refused = IssueProducerOperation(producer, seen);
                Interlocked.Increment(ref _operationsIssued);
                if (refused && _pool.IsShutdownStarted)
                {
                    break; // a refusal by a lane's own shutdown leaves the producer going
                }
                if (seen && ++afterShutdown > 5000)
                {
                    Fail($"producer {index}: 5000 operations after shutdown began and none was refused");
                    break;
                }
            }
        }
        catch (Exception exception)
        {
            Fail($"producer {index}: an operation threw unexpectedly: {exception}");
        }
        finally
        {
            Interlocked.Decrement(ref _producersRunning);
        }
    }

    private void DriveShutdown()
    {
        try
        {
            // Early when every producer still running waits (for room in a lane, or for a lane to stop): only the shutdown
            // may end that.
            Waits.Poll(() => Volatile.Read(ref _operationsIssued) >= _operationsBeforeShutdown
                || Volatile.Read(ref _producersRunning) <= Volatile.Read(ref _producersWaiting) || _stopping, Waits.MustHappen);
            List<Thread> laneShutdowns = StartLaneShutdownsDuringPoolShutdown();
            _completionTimer = new Timer(static state => ((TaskCompletionSource)state!).TrySetResult(), _timerCompletion,
                _completionTimerDueMs, Timeout.Infinite);
            switch (_form)
            {
                case ShutdownForm.Dispose:
                    _pool.Dispose();
                    break;
                case ShutdownForm.DisposeAsync:
                    if (!_pool.DisposeAsync().AsTask().Wait(Waits.MustHappen))
                    {
                        Fail($"DisposeAsync did not complete within {Waits.MustHappen.TotalSeconds} s");
                    }
                    break;
                case ShutdownForm.Drain:
                    _pool.Shutdown(ShutdownMode.Drain);
                    break;
                case ShutdownForm.CancelPending:
                    _lastCancelFigure = _pool.Shutdown(ShutdownMode.CancelPending);
                    break;
                case ShutdownForm.DrainThenCancelPending:
                    Thread drainer = StartThread(() => _pool.Shutdown(ShutdownMode.Drain), "fuzz drain");
                    Waits.Poll(() => _pool.IsShutdownStarted, Waits.MustHappen);
                    Thread.SpinWait(_cancelDelaySpins);
                    _lastCancelFigure = _pool.Shutdown(ShutdownMode.CancelPending);
                    if (!drainer.Join(Waits.MustHappen))
                    {
                        Fail($"Shutdown(Drain) did not return within {Waits.MustHappen.TotalSeconds} s after Shutdown(CancelPending) did");
                    }
                    break;
                case ShutdownForm.DisposeFromInside:
                case ShutdownForm.CancelPendingFromInside:
                    bool cancel = _form == ShutdownForm.CancelPendingFromInside;
                    _pool.UnsafeQueueUserWorkItem(new ShutdownItem(this, cancel), preferLocal: false);
                    if (!Waits.Poll(() => _pool.IsShutdownStarted, Waits.MustHappen))
                    {
                        Fail($"the work item that shuts the pool down did not run within {Waits.MustHappen.TotalSeconds} s");
                    }
                    // The call from inside does not wait for the workers; this one (from outside) does.
                    if (cancel)
                    {
                        _lastCancelFigure = _pool.Shutdown(ShutdownMode.CancelPending);
                    }
                    else
                    {
                        _pool.Dispose();
                    }
                    break;
            }
            foreach (Thread thread in laneShutdowns)
            {
                if (!thread.Join(Waits.MustHappen))
                {
                    Fail($"{thread.Name}: the lane's shutdown, racing the pool's, did not return within {Waits.MustHappen.TotalSeconds} s after {_form} returned");
                }
            }
        }
        catch (Exception exception)
        {
            Fail($"{_form} threw: {exception}");
        }
        finally
        {
            _shutdownReturned = true;
        }
    }

    private sealed class ShutdownItem(FuzzIteration iteration, bool cancel) : IWorkItem
    {
        public void Execute()
        {
            if (cancel)
            {
                iteration._insideFigure = iteration._pool.Shutdown(ShutdownMode.CancelPending);
            }
            else
            {
                iteration._pool.Dispose();
            }
        }
    }

    /// <summary>What one producer keeps between its operations (only that producer touches it).</summary>
    private sealed class ProducerState(int index, Random random)
    {
        public readonly int Index = index;
        public readonly Random Random = random;

        /// <summary>The lanes this producer queues to: the shared ones, then those it created.</summary>
        public readonly List<LaneRecord> Lanes = [];
        public int OwnLanes;

        /// <summary>The last place given in this producer's sequence of queueings to serial lanes.</summary>
        public long Sequence;
        public readonly List<TimerRecord> Timers = [];
        public readonly List<WaitRecord> Waits = [];
        public readonly List<CancellationTokenSource> Sources = [];

        /// <summary>Recent tasks of every kind (awaited by scheduler tasks, antecedents of ContinueWith).</summary>
        public readonly RecentTasks Any = new();

        /// <summary>
        /// Recent Run tasks only: what a Run delegate may await. An async Run item may hold the drain until its task
        /// completes, so it must never wait, even through another task, for a completion that comes only after shutdown
        /// returned; Run tasks never do.
        /// </summary>
        public readonly RecentTasks Runs = new();
    }

    private sealed class RecentTasks
    {
        private readonly Task?[] _recent = new Task?[8];
        private int _count;

        public void Add(Task task) => _recent[_count++ % _recent.Length] = task;

        public Task? Pick(Random random) => _count == 0 ? null : _recent[random.Next(Math.Min(_count, _recent.Length))];
    }

    // ---- After shutdown ----------------------------------------------------------------------------------------

    private void AfterShutdown()
    {
        ShutdownLanesAfterPoolShutdown();
        if (_options.LaneList && _pool.Lanes.Count != 0)
        {
            Fail($"pool.Lanes lists {_pool.Lanes.Count} lane(s) after {_form} returned (the pool and its lanes have stopped)");
        }
        foreach (LaneRecord lane in _lanes)
        {
            if (!lane.Lane.IsShutdownStarted)
            {
                Fail($"{lane.Description}: IsShutdownStarted is false after the pool's {_form} returned");
            }
        }
        // Tasks awaited under the pool's context complete now, from a thread that is not the pool's, after shutdown returned.
        Thread completer = StartThread(() =>
        {
            foreach (TaskCompletionSource late in _late)
            {
                late.TrySetResult();
            }
        }, "fuzz late completions");
        if (!completer.Join(Waits.MustHappen))
        {
            Fail("completing the late tasks (their continuations run inline) did not return within 30 s");
        }
        WaitForTasks("tasks the fuzzer started (Run, scheduler tasks, async flows)", _mustComplete);
        WaitForTasks("neighbour RunAsValueTask tasks", new ConcurrentQueue<(string, Task)>(_neighbours.Select(n => (n.Label, n.Task!))));
        Thread neighbourDisposer = StartThread(_neighbour.Dispose, "fuzz neighbour dispose");
        if (!neighbourDisposer.Join(Waits.MustHappen))
        {
            Fail("the neighbour pool's Dispose did not return within 30 s");
        }

        // Whatever is still registered goes now; a DisposeAsync that completed forbids every later callback.
        foreach (TimerRecord timer in _timers)
        {
            if (timer.Timer is { } live && Interlocked.Exchange(ref timer.Disposed, 1) == 0)
            {
                if (!live.DisposeAsync().AsTask().Wait(Waits.MustHappen))
                {
                    Fail($"{timer.Label}: DisposeAsync after shutdown did not complete within 30 s");
                }
                timer.DisposeAsyncCompleted = true;
            }
        }
        foreach (WaitRecord wait in _waits)
        {
            if (wait.Registration is { } registration && Interlocked.Increment(ref wait.UnregisterCalls) == 1)
            {
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
            }
        }
        // Late arrivals (a plain item after shutdown returned, a timer after DisposeAsync) would show up now.
        Thread.Sleep(50);

        int final = _pool.Shutdown(ShutdownMode.CancelPending);
        CheckLedger(final);

        _completionTimer?.Dispose();
        foreach (CancellationTokenSource source in _sources)
        {
            source.Dispose();
        }
        foreach (AutoResetEvent handle in _autoEvents)
        {
            handle.Dispose();
        }
        _manualEvent.Dispose();
    }

    private void WaitForTasks(string what, ConcurrentQueue<(string Label, Task Task)> tasks)
    {
        long deadline = Environment.TickCount64 + Waits.MustHappenMilliseconds;
        while (true)
        {
            (string Label, Task Task)[] all = tasks.ToArray();
            foreach ((string _, Task task) in all)
            {
                long left = deadline - Environment.TickCount64;
                if (left <= 0)
                {
                    break;
                }
                if (!task.IsCompleted)
                {
                    // WhenAny never throws: a faulted or cancelled task is judged by the ledger, not here.
                    Task.WhenAny(task).Wait((int)left);
                }
            }
            bool allDone = all.All(entry => entry.Task.IsCompleted);
            if (allDone && tasks.Count == all.Length)
            {
                return;
            }
            if (Environment.TickCount64 >= deadline)
            {
                (string Label, Task Task)[] stuck = all.Where(entry => !entry.Task.IsCompleted).ToArray();
                Fail($"{stuck.Length} of {all.Length} {what} did not complete within {Waits.MustHappen.TotalSeconds} s after {_form} returned: "
                    + string.Join("; ", stuck.Take(12).Select(entry => $"{entry.Label} [{entry.Task.Status}]")) + "; " + DescribeStall());
                return;
            }
        }
    }
}
