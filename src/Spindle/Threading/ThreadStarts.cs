using System;
using System.Diagnostics.Tracing;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Telemetry;

namespace Spindle.Threading;

/// <summary>
/// Starts every thread of one pool and counts the starts the operating system refused, by kind. A refusal is an ordinary
/// event: <see cref="Start"/> counts it, traces it and rethrows, and each caller decides how it carries on without the
/// thread (a worker backs off and retries, a dedicated item runs on the workers, the monitor and the relief thread are
/// retried or done without, a timer expires on workers between items, a registration or an I/O registration fails at its
/// call with nothing recorded). Counts are atomic; they are read by the pool's metrics and
/// <see cref="WorkerPool.GetThreadInjectionCount(ThreadInjectionReason)"/>.
/// </summary>
internal sealed class ThreadStarts
{
    private readonly string _poolName;
    private readonly Action<PoolThreadKind>? _onStarting;
    private readonly long[] _failures = new long[(int)PoolThreadKind.IO + 1];
    private ThreadController? _threads; // for the trace's thread count; set once, before any thread of the pool exists

    public ThreadStarts(WorkerPoolOptions options)
    {
        _poolName = options.Name;
        _onStarting = options.OnThreadStarting;
    }

    public void Connect(ThreadController threads) => _threads = threads;

    /// <summary>The kinds, in order, for the metrics.</summary>
    public static readonly PoolThreadKind[] Kinds = Enum.GetValues<PoolThreadKind>();

    /// <summary>
    /// Starts <paramref name="thread"/> (no ExecutionContext flows into it). Throws what the start throws, counted and
    /// traced with <paramref name="reason"/> (null: the kind's name).
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public void Start(Thread thread, PoolThreadKind kind, object? state = null, string? reason = null)
    {
        try
        {
            _onStarting?.Invoke(kind);
            if (state is null)
            {
                thread.UnsafeStart();
            }
            else
            {
                thread.UnsafeStart(state);
            }
        }
        catch (Exception)
        {
            RecordFailure(kind, reason);
            throw;
        }
    }

    /// <summary>
    /// Counts and traces a refused thread of <paramref name="kind"/> (also one whose creation failed before
    /// <see cref="Start"/>), traced with <paramref name="reason"/> (null: the kind's name). Call it outside any lock: a
    /// listener runs inline.
    /// </summary>
    public void RecordFailure(PoolThreadKind kind, string? reason = null)
    {
        Interlocked.Increment(ref _failures[(int)kind]);
        if (SpindleEventSource.Log.IsOn(EventLevel.Warning, SpindleEventSource.Keywords.Threads))
        {
            SpindleEventSource.Log.ThreadCreationFailed(_poolName, reason ?? kind.ToString(), _threads?.ThreadCount ?? 0);
        }
    }

    /// <summary>Refused starts of <paramref name="kind"/> over the pool's life.</summary>
    public long GetFailures(PoolThreadKind kind) => Interlocked.Read(ref _failures[(int)kind]);

    /// <summary>Refused starts of every kind over the pool's life.</summary>
    public long TotalFailures
    {
        get
        {
            long sum = 0;
            for (int i = 0; i < _failures.Length; i++)
            {
                sum += Interlocked.Read(ref _failures[i]);
            }
            return sum;
        }
    }
}
