using System;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;
using Spindle.Tasks;
using Spindle.Telemetry;

namespace Spindle;

/// <summary>
/// A <see cref="SynchronizationContext"/> whose <see cref="Post"/> queues to a <see cref="WorkerPool"/>. Get it from
/// <see cref="WorkTarget.SynchronizationContext"/>. Install it (<see cref="SynchronizationContext.SetSynchronizationContext"/>)
/// in code that should come back to the pool after an <c>await</c>; the pool installs it itself while it runs posted
/// callbacks and the delegates of every <c>Run</c> and <c>RunAsValueTask</c> overload (with a token or without), so an
/// <c>await</c> inside them (on a socket, a file, a timer or another task) resumes on the pool, or on the lane the
/// context belongs to. <c>ConfigureAwait(false)</c> opts out, as usual. (Tasks on <see cref="WorkTarget.TaskScheduler"/>
/// need no context: their awaits come back through the scheduler.)
/// </summary>
/// <remarks>
/// A post is never refused, not even after the pool has stopped: a post is how an <c>await</c> comes back, and the
/// context cannot tell an awaiter's post from new work. After the stop it runs on the built-in
/// <see cref="ThreadPool"/> (a serial lane's posts still one at a time, in order), counted by
/// <see cref="WorkerPool.RedirectedCallbackCount"/> and reported by the <c>Spindle</c> event source's
/// <c>CallbackRedirected</c> warning.
/// </remarks>
public sealed class WorkerPoolSynchronizationContext : SynchronizationContext
{
    private readonly WorkTarget _target;
    private readonly TaskBridge _bridge;

    internal WorkerPoolSynchronizationContext(WorkTarget target)
    {
        _target = target;
        _bridge = target.Bridge;
    }

    /// <summary>The pool this context posts to.</summary>
    public WorkerPool Pool => _target.OwningPool;

    /// <summary>The lane this context posts to, or null for the pool's own queue.</summary>
    public WorkerPoolLane? Lane => _target as WorkerPoolLane;

    /// <summary>
    /// Queues <paramref name="d"/> to the pool (to the calling worker's local queue when called on one of the pool's
    /// workers, where an <c>await</c>'s continuation finds its data still in the core's cache). It runs with this
    /// context installed. The caller's <see cref="ExecutionContext"/> is not captured: awaiters that post here have
    /// already captured what they need. The exception is <c>await Task.Yield()</c>, which asks to let queued work run
    /// first: its continuation goes behind the pool's shared queue, from a worker too (a worker's own queue is newest
    /// first, so the yielding method would have run again at once, and under load the oldest yields would wait longest).
    /// </summary>
    /// <remarks>
    /// Never throws because of shutdown: a post is how an <c>await</c> comes back, and a post refused by the thread that
    /// completed the awaited task would fail that thread and strand the awaiter. During the drain it runs on the pool
    /// (in both shutdown modes); after the pool has stopped it runs on the built-in <see cref="ThreadPool"/>, counted by
    /// <see cref="WorkerPool.RedirectedCallbackCount"/> and reported by the <c>CallbackRedirected</c> event. A lane's
    /// post after the lane has stopped runs as the pool's work; a capped lane's keep its cap (a serial lane's run one at a
    /// time, in order), wherever they run.
    /// </remarks>
    /// <exception cref="ArgumentNullException"><paramref name="d"/> is null.</exception>
    public override void Post(SendOrPostCallback d, object? state)
    {
        ArgumentNullException.ThrowIfNull(d);
        bool yielding = ReferenceEquals(d, s_yieldCallbacks.Await) || ReferenceEquals(d, s_yieldCallbacks.OnCompleted);
        _bridge.EnqueueContinuation(new WorkItemEntry(RunnerFor(d).Run, state, null), preferLocal: !yielding);
    }

    /// <summary>The callbacks <c>Task.Yield</c>'s awaiter posts, learned once (see <see cref="YieldProbe"/>).</summary>
    private static readonly (SendOrPostCallback? Await, SendOrPostCallback? OnCompleted) s_yieldCallbacks = YieldProbe.Find();

    /// <summary>
    /// Learns which callbacks the runtime's <c>Task.Yield</c> awaiter posts to a <see cref="SynchronizationContext"/>, so
    /// that <see cref="Post"/> can tell a yield from an <c>await</c>'s continuation: both are the runtime's own cached
    /// delegates, one for the <c>await</c> path and one for <c>OnCompleted</c>. The probe installs itself, yields both
    /// ways, and records what it is posted without running it. Public APIs only, so it holds under trimming and
    /// NativeAOT; if a runtime posted something else, yields would only be treated as ordinary posts.
    /// </summary>
    private sealed class YieldProbe : SynchronizationContext
    {
        private SendOrPostCallback? _posted;

        public override void Post(SendOrPostCallback d, object? state) => _posted = d;

        public static (SendOrPostCallback? Await, SendOrPostCallback? OnCompleted) Find()
        {
            SynchronizationContext? previous = Current;
            var probe = new YieldProbe();
            try
            {
                SetSynchronizationContext(probe);
                // Returns at its await, whose continuation is posted to the probe and never run: the probe's task stays
                // pending and is collected with the probe.
                _ = AwaitYield();
                SendOrPostCallback? awaitPath = probe._posted;
                probe._posted = null;
                Task.Yield().GetAwaiter().OnCompleted(static () => { });
                return (awaitPath, probe._posted);
            }
            catch (Exception)
            {
                return (null, null); // yields are then ordinary posts
            }
            finally
            {
                SetSynchronizationContext(previous);
            }
        }

        private static async Task AwaitYield() => await Task.Yield();
    }

    /// <summary>
    /// The queued callback for <paramref name="d"/>: installs this context, calls <c>d(state)</c>, removes it. Awaiters
    /// post one static delegate per awaiter type with the continuation as the state, so a one-entry cache (replaced
    /// when another delegate comes along) makes their posts allocation-free; other callers pay one small object.
    /// </summary>
    private PostedRunner RunnerFor(SendOrPostCallback d)
    {
        PostedRunner? cached = Volatile.Read(ref _lastRunner);
        if (cached is not null && ReferenceEquals(cached.Callback, d))
        {
            return cached;
        }
        var runner = new PostedRunner(this, d);
        Volatile.Write(ref _lastRunner, runner);
        return runner;
    }

    private PostedRunner? _lastRunner;

    /// <summary>
    /// A queued Post: its <see cref="Run"/> is the entry's callback (an <c>Action&lt;object?&gt;</c>), and the post's
    /// state is the entry's state. Shutdown finds it as the callback's target and runs it in both modes (a dropped
    /// continuation would leave its awaiting code waiting forever).
    /// </summary>
    internal sealed class PostedRunner : IShutdownAware, ICallbackWrapper
    {
        private readonly WorkerPoolSynchronizationContext _context;
        public readonly SendOrPostCallback Callback;
        public readonly Action<object?> Run;

        public PostedRunner(WorkerPoolSynchronizationContext context, SendOrPostCallback callback)
        {
            _context = context;
            Callback = callback;
            Run = Invoke;
        }

        object? IShutdownAware.QueuedCallback => Run;

        object? ICallbackWrapper.WrappedCallback => Callback;

        ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

        private void Invoke(object? state)
        {
            SetSynchronizationContext(_context);
            try
            {
                Callback(state);
            }
            finally
            {
                SetSynchronizationContext(null);
            }
        }
    }

    /// <summary>
    /// Runs <paramref name="d"/> and returns when it has finished. On one of this pool's threads (for a lane's context, in an item of the lane) it runs inline (waiting
    /// for another worker could deadlock a small pool); on any other thread it is queued and the caller blocks until it
    /// has run. An exception thrown by <paramref name="d"/> is rethrown to the caller with its original stack.
    /// </summary>
    /// <remarks>
    /// Like <see cref="Post"/>, never refused because of shutdown: during the drain it is queued to the pool; after the
    /// pool has stopped it runs inline on the calling thread (with this context installed), as the base
    /// <see cref="SynchronizationContext"/> does, except for a capped lane's context: there it goes where the lane's
    /// posts go after the stop, holding one of the lane's slots, so that a serial lane stays exclusive and in order
    /// through shutdown, and the caller blocks until it has run.
    /// </remarks>
    /// <exception cref="ArgumentNullException"><paramref name="d"/> is null.</exception>
    public override void Send(SendOrPostCallback d, object? state)
    {
        ArgumentNullException.ThrowIfNull(d);
        if (_bridge.IsOwnThread || (_bridge.HasStopped && (_bridge.Lane?.Cap ?? int.MaxValue) == int.MaxValue))
        {
            SynchronizationContext? previous = Current;
            SetSynchronizationContext(this);
            try
            {
                d(state);
            }
            finally
            {
                SetSynchronizationContext(previous);
            }
            return;
        }
        var sent = new SentCallback(this, d, state);
        _bridge.EnqueueContinuation(new WorkItemEntry(sent, WorkItemEntry.WorkItemMarker, null), preferLocal: false);
        // A worker of this pool gets here for a lane's context from outside that lane: it blocks like any other wait,
        // so the pool is told (a blocking region), or the callback could wait for the worker it holds. Elsewhere the
        // region does nothing.
        using (BlockingRegion.Enter())
        {
            sent.WaitUntilDone();
        }
        sent.Failure?.Throw();
    }

    /// <summary>Returns this instance: the context holds no per-operation state.</summary>
    public override SynchronizationContext CreateCopy() => this;

    /// <inheritdoc/>
    public override bool Equals(object? obj) => obj is WorkerPoolSynchronizationContext other && other._bridge == _bridge;

    /// <inheritdoc/>
    public override int GetHashCode() => _bridge.GetHashCode();

    /// <summary>A queued Send: the caller blocks until it has run (shutdown runs it in both modes, as a Post).</summary>
    private sealed class SentCallback(WorkerPoolSynchronizationContext context, SendOrPostCallback callback, object? state) : IWorkItem, IShutdownAware, ICallbackWrapper
    {
        object? IShutdownAware.QueuedCallback => null; // queued as an IWorkItem

        object? ICallbackWrapper.WrappedCallback => callback;

        ShutdownOutcome IShutdownAware.OnCancelPending() => ShutdownOutcome.Run;

        private readonly object _lock = new(); // Monitor.Wait/Pulse need a monitor, not a System.Threading.Lock
        private bool _done; // under _lock
        public ExceptionDispatchInfo? Failure; // written before _done is set, read after it is seen

        public void WaitUntilDone()
        {
            lock (_lock)
            {
                while (!_done)
                {
                    Monitor.Wait(_lock);
                }
            }
        }

        public void Execute()
        {
            SetSynchronizationContext(context);
            try
            {
                callback(state);
            }
            catch (Exception exception)
            {
                Failure = ExceptionDispatchInfo.Capture(exception); // reported to the caller, not to the pool's policy
            }
            finally
            {
                SetSynchronizationContext(null);
                lock (_lock)
                {
                    _done = true;
                    Monitor.PulseAll(_lock);
                }
            }
        }
    }
}
