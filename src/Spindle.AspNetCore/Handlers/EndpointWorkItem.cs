using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Http;

namespace Spindle.AspNetCore.Handlers;

/// <summary>
/// One request's endpoint delegate, queued to a pool or lane: runs it under the request's execution context with the
/// target's synchronization context, and completes <see cref="Completion"/> as its task does.
/// </summary>
/// <remarks>
/// <para>Where the completion happens decides where the rest of the request runs, and whether it stays off the
/// built-in thread pool. The runtime runs a task's awaiters inline when it completes, except in two cases, where it
/// queues them to the built-in thread pool: a synchronization context other than the base one is installed on the
/// completing thread (an async endpoint's continuations run with the target's), and the task completes while its
/// awaiter is registering (between the awaiter's completion check and its registration). The second is likely when
/// the target starts the endpoint at once on another core, while the caller is still on its way to its <c>await</c>.
/// So the completion is not made on the target's thread: it is queued back to the caller's pool (the Spindle pool
/// that ran the routing, with Spindle's transport), as a continuation, and made there without a synchronization
/// context. By then the caller has registered, unless it was descheduled for the whole run of the endpoint. A caller
/// that is not on a Spindle pool (Kestrel's own transport) is on the built-in pool already: the completion is made
/// where the endpoint ends.</para>
/// <para><see cref="Completion"/> completes exactly once: the delegate's task completes once, and a synchronous throw
/// completes it instead of a task. An item that a cancelling shutdown of its pool or lane drops never starts; the pool
/// calls <see cref="OnCancelled"/> instead, which answers the request 503 with <c>Retry-After</c>, as for a refused
/// one, and completes <see cref="Completion"/> the same way.</para>
/// </remarks>
internal sealed class EndpointWorkItem : ICancellableWorkItem
{
    private static readonly ContextCallback s_start = static state => ((EndpointWorkItem)state!).Start();
    private static readonly Action<Task, object?> s_complete = static (task, state) => ((EndpointWorkItem)state!).Complete(task);
    private static readonly Action<EndpointWorkItem> s_completeOnOrigin = static item => item.CompleteNow();

    private readonly RequestDelegate _inner;
    private readonly string _retryAfter;
    private readonly HttpContext _context;
    private readonly WorkTarget _target;
    private readonly WorkerPool? _origin;
    private readonly ExecutionContext? _executionContext;
    private readonly TaskCompletionSource _completion = new();
    private Task? _finished;

    public EndpointWorkItem(RequestDelegate inner, HttpContext context, WorkTarget target, string retryAfter)
    {
        _retryAfter = retryAfter;
        _inner = inner;
        _context = context;
        _target = target;
        _origin = WorkerPool.Current;
        _executionContext = ExecutionContext.Capture();
    }

    /// <summary>Completes as the endpoint's delegate does.</summary>
    public Task Completion => _completion.Task;

    public void Execute()
    {
        if (_executionContext is null)
        {
            Start();
        }
        else
        {
            ExecutionContext.Run(_executionContext, s_start, this);
        }
    }

    /// <summary>
    /// The pool or lane dropped the item before it started (a cancelling shutdown): the request is answered 503, as when
    /// the target refuses it. The request waits for <see cref="Completion"/> meanwhile, so nothing else touches it.
    /// </summary>
    public void OnCancelled()
    {
        if (!_context.Response.HasStarted)
        {
            _context.Response.StatusCode = StatusCodes.Status503ServiceUnavailable;
            _context.Response.Headers.RetryAfter = _retryAfter;
        }
        Complete(Task.CompletedTask);
    }

    private void Start()
    {
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(_target.SynchronizationContext);
        Task task;
        try
        {
            task = _inner(_context);
        }
        catch (Exception e)
        {
            task = Task.FromException(e);
        }
        finally
        {
            SynchronizationContext.SetSynchronizationContext(previous);
        }
        if (task.IsCompleted)
        {
            Complete(task);
        }
        else
        {
            task.ContinueWith(s_complete, this, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
        }
    }

    /// <summary>The delegate's task has completed: completes <see cref="Completion"/> on the caller's pool (see the remarks).</summary>
    private void Complete(Task task)
    {
        Debug.Assert(task.IsCompleted, "called for a completed task");
        Debug.Assert(_finished is null, "the delegate's task completes once");
        _finished = task;
        if (_origin is null)
        {
            CompleteNow();
        }
        else
        {
            // Never refused, and run even while the pool stops (after its stop, on the built-in pool): not lost.
            _origin.UnsafeQueueContinuation(s_completeOnOrigin, this, preferLocal: false);
        }
    }

    private void CompleteNow()
    {
        Task task = _finished!;
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(null);
        try
        {
            bool set = task.Status switch
            {
                TaskStatus.RanToCompletion => _completion.TrySetResult(),
                TaskStatus.Canceled => _completion.TrySetCanceled(),
                _ => _completion.TrySetException(task.Exception!.InnerExceptions),
            };
            Debug.Assert(set, "the delegate's task completes the request once");
        }
        finally
        {
            SynchronizationContext.SetSynchronizationContext(previous);
        }
    }
}
