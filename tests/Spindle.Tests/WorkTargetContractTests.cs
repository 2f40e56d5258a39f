using System;
using System.Collections.Concurrent;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The behaviour every kind of <see cref="WorkTarget"/> must have, run against each kind: the pool itself, a lane of
/// each priority class, a serial lane and a bounded lane. Every accepted item runs exactly once, on its target, through
/// every queueing form; ExecutionContext flows through the safe forms only; <c>Run</c> and <c>RunAsValueTask</c> give
/// results, exceptions and cancellation; the target's scheduler and context keep work on it; the counters add up; a
/// serial target keeps its order; shutdown runs or cancels each accepted item once and refuses new work. Capability
/// flags (<see cref="IsLane"/>, <see cref="IsSerial"/>, <see cref="IsBounded"/>) say which contracts apply, as the
/// channel test base's do. Split by concern: <c>.Queueing.cs</c>, <c>.Context.cs</c>, <c>.Tasks.cs</c>,
/// <c>.Counters.cs</c>, <c>.Serial.cs</c>, <c>.Bounded.cs</c>, <c>.Shutdown.cs</c>.
/// </summary>
public abstract partial class WorkTargetContractTests : IDisposable
{
    /// <summary>The pool's worker count (its minimum and its maximum): enough for two items of the target at once.</summary>
    protected const int Threads = 2;

    // Work items cannot fail a test by throwing (the Report policy swallows the exception), so the pool reports them here
    // and the test fails at its end if any arrived; a test that throws on purpose counts its own.
    private readonly ConcurrentQueue<Exception> _unexpected = new();
    private readonly ConcurrentQueue<Exception> _expected = new();
    private volatile bool _exceptionsExpected;
    private readonly Lazy<WorkTarget> _target;

    // Items that ran somewhere else than on the target (checked by the ledger items that are told to).
    private int _misplaced;
    private string? _firstMisplaced;

    protected WorkTargetContractTests()
    {
        Pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = GetType().Name,
            MinThreads = Threads,
            MaxThreads = Threads,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            // Holding every worker must keep the target's queued items queued: no relief thread runs them meanwhile.
            OutsideWorkReliefDelay = Timeout.InfiniteTimeSpan,
        });
        Pool.UnhandledException += (_, e) => (_exceptionsExpected ? _expected : _unexpected).Enqueue(e.Exception);
        // Made once, whichever thread asks first (producer threads may).
        _target = new Lazy<WorkTarget>(() => CreateTarget(Pool), LazyThreadSafetyMode.ExecutionAndPublication);
    }

    /// <summary>The pool this test owns: the target, or the pool the target lane belongs to.</summary>
    protected WorkerPool Pool { get; }

    /// <summary>The target under test, made on first use.</summary>
    protected WorkTarget Target => _target.Value;

    /// <summary>The lane the target is, or null for the pool itself.</summary>
    protected WorkerPoolLane? TargetLane => Target as WorkerPoolLane;

    // ---- What each kind of target says about itself --------------------------------------------------------------

    /// <summary>Makes the target under test on <paramref name="pool"/>.</summary>
    protected abstract WorkTarget CreateTarget(WorkerPool pool);

    /// <summary>Whether the target is a lane (the pool's own work is not its work, and it can shut down alone).</summary>
    protected abstract bool IsLane { get; }

    /// <summary>Whether the target runs one item at a time, in the order they were queued.</summary>
    protected virtual bool IsSerial => false;

    /// <summary>The most items the target holds queued, or null when it has no bound.</summary>
    protected virtual int? QueueLimit => null;

    /// <summary>Whether the target holds a bounded number of queued items.</summary>
    protected bool IsBounded => QueueLimit is not null;

    /// <summary>Items of the target that have finished running.</summary>
    protected abstract long CompletedCount { get; }

    /// <summary>Items of the target queued and not started.</summary>
    protected abstract long PendingCount { get; }

    /// <summary>Items of the target cancelled by a shutdown.</summary>
    protected abstract long CancelledCount { get; }

    /// <summary>Whether the target's shutdown has begun.</summary>
    protected abstract bool IsShutdownStarted { get; }

    /// <summary>Shuts the target down and waits for it to stop; returns the number of its items cancelled.</summary>
    protected abstract int Shutdown(ShutdownMode mode);

    /// <summary>Shuts the target down; the task completes with the number of its items cancelled once it has stopped.</summary>
    protected abstract Task<int> ShutdownAsync(ShutdownMode mode);

    /// <summary>Disposes the target (a drain) and waits for it to stop.</summary>
    protected abstract void DisposeTarget();

    /// <summary>Disposes the target (a drain) without blocking.</summary>
    protected abstract ValueTask DisposeTargetAsync();

    /// <summary>Items of the pool's own queue that the target counts as its own (the pool does, a lane does not).</summary>
    protected int PoolItemsCounted(int poolItems) => IsLane ? 0 : poolItems;

    // ---- Test lifetime ------------------------------------------------------------------------------------------

    public void Dispose()
    {
        try
        {
            Waits.RunBounded(Pool.Dispose, "disposing the test's pool");
        }
        catch (Exception e)
        {
            _unexpected.Enqueue(e);
        }
        GC.SuppressFinalize(this);
        Assert.True(_unexpected.IsEmpty,
            "Work items threw: " + string.Join(" | ", _unexpected.Select(e => $"{e.GetType().Name}: {e.Message}")));
    }

    /// <summary>From now on, exceptions that reach the pool's policy are the test's to count (<see cref="ExpectedExceptions"/>).</summary>
    private protected void ExpectExceptions() => _exceptionsExpected = true;

    /// <summary>The exceptions that reached the pool's policy since <see cref="ExpectExceptions"/>.</summary>
    private protected Exception[] ExpectedExceptions => [.. _expected];

    // ---- Where work runs ------------------------------------------------------------------------------------------

    /// <summary>Whether the calling thread runs an item of the target: a thread of its pool, in the target lane's item for a lane.</summary>
    protected bool IsOnTarget() => WorkerPool.Current == Pool && WorkerPoolLane.Current == TargetLane;

    /// <summary>Notes a run that was not on the target; <see cref="AssertEveryItemRanOnTarget"/> fails on it.</summary>
    private protected void NotePlace()
    {
        if (!IsOnTarget() && Interlocked.Increment(ref _misplaced) == 1)
        {
            _firstMisplaced = $"pool {WorkerPool.Current?.Name ?? "none"}, lane {WorkerPoolLane.Current?.Name ?? "none"}, " +
                $"thread '{Thread.CurrentThread.Name}'";
        }
    }

    private protected void AssertEveryItemRanOnTarget() =>
        Assert.True(Volatile.Read(ref _misplaced) == 0, $"{_misplaced} items ran off the target; the first on {_firstMisplaced}.");

    /// <summary>
    /// Holds every worker of the pool in an item of the pool's own queue until the hold is disposed: nothing else runs
    /// meanwhile, so the target's queued items stay queued and the counters stand still.
    /// </summary>
    private protected WorkerHold HoldWorkers() => new(Pool);

    private protected sealed class WorkerHold : IDisposable
    {
        private readonly ManualResetEventSlim _release = new();

        public WorkerHold(WorkerPool pool)
        {
            using var started = new CountdownEvent(Threads);
            for (int i = 0; i < Threads; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    started.Signal();
                    _release.Wait(Waits.MustHappen);
                });
            }
            Waits.For(started, "every worker held");
        }

        /// <summary>The items of the pool's own queue that hold the workers.</summary>
        public static int ItemCount => Threads;

        public void Dispose() => _release.Set();
    }
}
