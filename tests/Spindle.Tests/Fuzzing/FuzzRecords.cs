using System;
using System.Threading;
using System.Threading.Tasks;

namespace Spindle.Tests.Fuzzing;

// The ledger entries of one fuzz iteration. Every operation that can run code gets a record before the call; the call's
// outcome (accepted, refused, bad input) and every run are written into it, and FuzzIteration.CheckLedger judges the
// records once the pool has shut down. Fields are written with atomics or Volatile by whichever thread runs the code.

/// <summary>What became of the call that created a record.</summary>
internal static class CallState
{
    /// <summary>The call has not returned yet (or threw something unexpected, which is reported where it happens).</summary>
    public const int Issued = 0;

    /// <summary>The call returned normally: the work was accepted.</summary>
    public const int Accepted = 1;

    /// <summary>The call threw ObjectDisposedException (the pool was shutting down).</summary>
    public const int Refused = 2;

    /// <summary>A deliberately bad call that threw an ArgumentException: nothing may run.</summary>
    public const int BadInput = 3;

    /// <summary>A full lane refused the work (WorkRejectedException, or a TryQueue form returned false): nothing may run.</summary>
    public const int Rejected = 4;

    /// <summary>The call's token ended its wait for room in a full lane: nothing was queued, nothing may run.</summary>
    public const int WaitCancelled = 5;

    public static string Describe(int state) => state switch
    {
        Accepted => "was accepted",
        Refused => "threw ObjectDisposedException",
        BadInput => "was rejected as bad input",
        Rejected => "was rejected by a full lane",
        WaitCancelled => "had its wait for room cancelled",
        _ => "never returned",
    };
}

/// <summary>What a plain work item does when it runs.</summary>
internal enum PlainBehaviour
{
    Plain,
    Throw,
    Nest,
    BlockingRegion,
    Block,
    Post,
    StartTask,
    RunInside,

    /// <summary>A lane item that holds its slot a moment, and once shutdown has begun, until the lane's waiters for room are released.</summary>
    HoldLane,

    /// <summary>A lane item that shuts its own lane down (the call does not wait for itself).</summary>
    ShutdownOwnLane,
}

/// <summary>An await step of an async delegate (planned by the issuing thread's random sequence).</summary>
internal enum AwaitStep
{
    Yield,
    Delay,
    Other,
    LateCompletion,
    TimerCompletion,
}

/// <summary>Thrown on purpose by items and delegates; says which record threw.</summary>
internal sealed class FuzzException : Exception
{
    public FuzzException()
    {
    }

    public FuzzException(string message)
        : base(message)
    {
    }

    public FuzzException(string message, Exception inner)
        : base(message, inner)
    {
    }

    public PlainItem? Plain { get; init; }

    public RunRecord? Run { get; init; }
}

/// <summary>A plain work item (every QueueUserWorkItem form): must run exactly once, or never with CancelPending.</summary>
internal sealed class PlainItem : IWorkItem
{
    public static readonly WaitCallback WaitCallback = static state => ((PlainItem)state!).Execute();
    public static readonly Action<PlainItem> Action = static item => item.Execute();
    public static readonly Action<PlainRef> ValueAction = static reference => reference.Item.Execute();

    public PlainItem(FuzzIteration iteration, int id, string form, PlainBehaviour behaviour, int childSeed, int expectedLocal, int depth)
    {
        Iteration = iteration;
        Id = id;
        Form = form;
        Behaviour = behaviour;
        ChildSeed = childSeed;
        ExpectedLocal = expectedLocal;
        Depth = depth;
    }

    public FuzzIteration Iteration { get; }

    public int Id { get; }

    public string Form { get; }

    public PlainBehaviour Behaviour { get; }

    public int ChildSeed { get; }

    /// <summary>The AsyncLocal value the item must see (0 where no ExecutionContext flows).</summary>
    public int ExpectedLocal { get; }

    public int Depth { get; }

    /// <summary>The lane it was queued to; null for the pool's own queue.</summary>
    public LaneRecord? Lane { get; init; }

    /// <summary>Its place in its producer's sequence, for a serial lane's order check.</summary>
    public OrderMark? Mark { get; init; }

    /// <summary>A QueueUserWorkItemAsync that did not complete at once: its outcome decides the state (see <see cref="ResolveState"/>).</summary>
    public Task? Pending;

    public int State;
    public int Hits;
    public int Reports;

    public string Label => $"plain item #{Id} ({Form}, {Behaviour}{(Lane is null ? "" : ", " + Lane.Name)})";

    /// <summary>The final state: for an asynchronous queueing, what its task says once it has ended.</summary>
    public int ResolveState()
    {
        if (Pending is not { IsCompleted: true } task || Volatile.Read(ref State) != CallState.Issued)
        {
            return Volatile.Read(ref State);
        }
        return task.Status switch
        {
            TaskStatus.RanToCompletion => CallState.Accepted,
            TaskStatus.Canceled => CallState.WaitCancelled,
            _ when task.Exception!.InnerException is ObjectDisposedException => CallState.Refused,
            _ => CallState.Issued,
        };
    }

    public void Execute() => Iteration.RunPlain(this);
}

/// <summary>A value-typed state for the generic queueing forms (never boxed by the pool).</summary>
internal readonly struct PlainRef(PlainItem item)
{
    public readonly PlainItem Item = item;
}

/// <summary>One <see cref="IWorkItem"/> object queued several times: it runs once per accepted queueing.</summary>
internal sealed class MultiItem(FuzzIteration iteration, int id) : IWorkItem
{
    public int Id { get; } = id;

    public int Attempts;
    public int Accepted;
    public int Runs;

    public void Execute() => iteration.RunMulti(this);
}

/// <summary>Which Run method.</summary>
internal enum RunForm
{
    RunAction,
    RunFunc,
    RunAsync,
    RunAsyncFunc,
    ValueTaskAction,
    ValueTaskFunc,
}

/// <summary>What token a Run call gets.</summary>
internal enum TokenKind
{
    None,
    NeverCancelled,
    CancelledLater,
    AlreadyCancelled,
}

/// <summary>A Run or RunAsValueTask call: its delegate runs at most once; its task says whether it ran.</summary>
internal sealed class RunRecord
{
    public RunRecord(int id, RunForm form, TokenKind tokenKind, CancellationTokenSource? source, bool throws,
        AwaitStep[] steps, Task? other, int expectedLocal, bool inside)
    {
        Id = id;
        Form = form;
        TokenKind = tokenKind;
        Source = source;
        Token = source?.Token ?? default;
        Throws = throws;
        Steps = steps;
        Other = other;
        ExpectedLocal = expectedLocal;
        Inside = inside;
    }

    public int Id { get; }

    public RunForm Form { get; }

    public TokenKind TokenKind { get; }

    public CancellationTokenSource? Source { get; }

    public CancellationToken Token { get; }

    public bool Throws { get; }

    public AwaitStep[] Steps { get; }

    /// <summary>An earlier task the async delegate awaits (for <see cref="AwaitStep.Other"/>).</summary>
    public Task? Other { get; }

    public int ExpectedLocal { get; }

    /// <summary>Issued from inside a work item.</summary>
    public bool Inside { get; }

    public bool IsValueTask => Form is RunForm.ValueTaskAction or RunForm.ValueTaskFunc;

    public bool IsAsync => Form is RunForm.RunAsync or RunForm.RunAsyncFunc;

    /// <summary>Whether the item is a task-completion item of the pool (cancellable token or ValueTask), not a scheduler task.</summary>
    public bool IsQueuedItem => IsValueTask || Token.CanBeCanceled;

    /// <summary>Where it was queued: the pool, or a lane.</summary>
    public WorkTarget Target { get; init; } = null!;

    public LaneRecord? Lane { get; init; }

    public OrderMark? Mark { get; init; }

    public int State;
    public int Starts;
    public int Completions;
    public Task? Task;

    public string Label => $"Run #{Id} ({Form}, token {TokenKind}{(Inside ? ", from an item" : "")}{(IsAsync ? ", awaits " + string.Join('/', Steps) : "")}{(Lane is null ? "" : ", " + Lane.Name)})";
}

/// <summary>A task started on pool.TaskScheduler (StartNew or ContinueWith): it runs exactly once once accepted.</summary>
internal sealed class SchedRecord(FuzzIteration iteration, int id, string kind, int expectedLocal, AwaitStep[] steps, Task? other)
{
    public FuzzIteration Iteration { get; } = iteration;

    public int Id { get; } = id;

    public string Kind { get; } = kind;

    public int ExpectedLocal { get; } = expectedLocal;

    public AwaitStep[] Steps { get; } = steps;

    public Task? Other { get; } = other;

    public WorkTarget Target { get; init; } = null!;

    public LaneRecord? Lane { get; init; }

    public int State;
    public int Starts;
    public int Completions;
    public Task? Task;

    public string Label => $"scheduler task #{Id} ({Kind}{(Lane is null ? "" : ", " + Lane.Name)})";
}

/// <summary>A post to pool.SynchronizationContext: never cancelled, so it runs exactly once once accepted.</summary>
internal sealed class PostRecord(FuzzIteration iteration, int id, AwaitStep[]? flow)
{
    public FuzzIteration Iteration { get; } = iteration;

    public int Id { get; } = id;

    /// <summary>When not null, the posted callback starts an async flow with these awaits under the pool's context.</summary>
    public AwaitStep[]? Flow { get; } = flow;

    public WorkTarget Target { get; init; } = null!;

    public LaneRecord? Lane { get; init; }

    public OrderMark? Mark { get; init; }

    public int State;
    public int Hits;

    public string Label => $"post #{Id}{(Flow is null ? "" : " (awaits " + string.Join('/', Flow) + ")")}{(Lane is null ? "" : " to " + Lane.Name)}";
}

/// <summary>A timer from pool.CreateTimer or pool.TimeProvider.</summary>
internal sealed class TimerRecord(FuzzIteration iteration, int id, bool viaProvider, int expectedLocal)
{
    public FuzzIteration Iteration { get; } = iteration;

    public int Id { get; } = id;

    public bool ViaProvider { get; } = viaProvider;

    public int ExpectedLocal { get; } = expectedLocal;

    public ITimer? Timer;
    public int State;
    public int Armings;
    public int Callbacks;
    public bool EverPeriodic;
    public bool RearmsItself;

    /// <summary>The earliest Stopwatch timestamp at which any arming so far may fire (long.MaxValue: never armed).</summary>
    public long EarliestDue = long.MaxValue;

    public int Disposed;
    public bool DisposedByProducer;
    public volatile bool DisposeAsyncCompleted;

    public string Label => $"timer #{Id}{(ViaProvider ? " (TimeProvider)" : "")}";
}

/// <summary>A registered wait on a PoolSignal or a WaitHandle.</summary>
internal sealed class WaitRecord(FuzzIteration iteration, int id, string target, TimeSpan timeout, bool once, int expectedLocal)
{
    public FuzzIteration Iteration { get; } = iteration;

    public int Id { get; } = id;

    public string Target { get; } = target;

    /// <summary>The timeout as given (possibly with a fraction of a millisecond), or Timeout.InfiniteTimeSpan.</summary>
    public TimeSpan Timeout { get; } = timeout;

    /// <summary>The timeout in Stopwatch ticks, rounded down; -1 for none.</summary>
    public long TimeoutTicks { get; } = timeout < TimeSpan.Zero ? -1 : (long)(timeout.Ticks * (System.Diagnostics.Stopwatch.Frequency / (double)TimeSpan.TicksPerSecond));

    public bool Once { get; } = once;

    public int ExpectedLocal { get; } = expectedLocal;

    /// <summary>Stopwatch timestamp taken just before the registering call.</summary>
    public long Start;

    public RegisteredWait? Registration;
    public int State;
    public int Callbacks;
    public int TimedOutCallbacks;
    public int Inside;
    public int UnregisterCalls;

    /// <summary>Set once an Unregister(waitObject) returned true and the wait object was seen signalled.</summary>
    public volatile bool UnregisterSettled;

    public string Label => $"registered wait #{Id} ({Target}, timeout {(TimeoutTicks < 0 ? "none" : Timeout.TotalMilliseconds.ToString("0.###", System.Globalization.CultureInfo.InvariantCulture) + " ms")}{(Once ? ", once" : "")})";
}

/// <summary>A Task.Delay on pool.TimeProvider.</summary>
internal sealed class DelayRecord(int id, int milliseconds, long start)
{
    public int Id { get; } = id;

    public int Milliseconds { get; } = milliseconds;

    public long Start { get; } = start;

    public Task? Task;
}

/// <summary>A RunAsValueTask on the neighbour pool, which stays up while the fuzzed pool shuts down.</summary>
internal sealed class NeighbourRecord(int id, bool func)
{
    public int Id { get; } = id;

    public bool Func { get; } = func;

    public int Starts;
    public Task? Task;

    public string Label => $"neighbour RunAsValueTask #{Id} ({(Func ? "Func<int>" : "Action")})";
}
