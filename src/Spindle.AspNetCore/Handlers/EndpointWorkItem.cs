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
/// <see cref="Completion"/> completes synchronously on the thread that completes the delegate's task (a worker of the
/// target, for a delegate whose awaits resume there), so the rest of the request does not hop to the built-in thread
/// pool, as a completion with asynchronous continuations would. It completes exactly once: the delegate's task
/// completes once, and a synchronous throw completes it instead of a task.
/// </remarks>
internal sealed class EndpointWorkItem : IWorkItem
{
    private static readonly ContextCallback s_start = static state => ((EndpointWorkItem)state!).Start();
    private static readonly Action<Task, object?> s_complete = static (task, state) => ((EndpointWorkItem)state!).Complete(task);

    private readonly RequestDelegate _inner;
    private readonly HttpContext _context;
    private readonly WorkTarget _target;
    private readonly ExecutionContext? _executionContext;
    private readonly TaskCompletionSource _completion = new();

    public EndpointWorkItem(RequestDelegate inner, HttpContext context, WorkTarget target)
    {
        _inner = inner;
        _context = context;
        _target = target;
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
            _completion.SetException(e);
            return;
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

    private void Complete(Task task)
    {
        Debug.Assert(task.IsCompleted, "called for a completed task");
        bool set = task.Status switch
        {
            TaskStatus.RanToCompletion => _completion.TrySetResult(),
            TaskStatus.Canceled => _completion.TrySetCanceled(),
            _ => _completion.TrySetException(task.Exception!.InnerExceptions),
        };
        Debug.Assert(set, "the delegate's task completes the request once");
    }
}
