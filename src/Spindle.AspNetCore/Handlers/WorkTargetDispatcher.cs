using System;
using System.Globalization;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Http;

namespace Spindle.AspNetCore.Handlers;

/// <summary>
/// The request delegate of an endpoint that runs on a pool or lane: queues the endpoint's own delegate there as an
/// <see cref="EndpointWorkItem"/>, or answers 503 with <c>Retry-After</c> when the target refuses it (full, or
/// shutting down) or a cancelling shutdown of the target drops it before it started.
/// </summary>
internal sealed class WorkTargetDispatcher
{
    private readonly RequestDelegate _inner;
    private readonly IServiceProvider _services;
    private readonly Func<IServiceProvider, WorkTarget> _resolve;
    private readonly string _retryAfter;
    private WorkTarget? _target;

    public WorkTargetDispatcher(RequestDelegate inner, IServiceProvider services, Func<IServiceProvider, WorkTarget> resolve, int retryAfterSeconds)
    {
        _inner = inner;
        _services = services;
        _resolve = resolve;
        _retryAfter = retryAfterSeconds.ToString(CultureInfo.InvariantCulture);
    }

    /// <summary>The target, resolved at the first request (racing first requests resolve the same singleton).</summary>
    private WorkTarget Target => _target ??= _resolve(_services);

    public Task InvokeAsync(HttpContext context)
    {
        var item = new EndpointWorkItem(_inner, context, Target, _retryAfter);
        bool queued;
        try
        {
            queued = Target.TryQueueUserWorkItem(item, preferLocal: false);
        }
        catch (ObjectDisposedException)
        {
            queued = false; // the pool or lane is shutting down: the same answer as a full lane
        }
        if (!queued)
        {
            if (!context.Response.HasStarted)
            {
                context.Response.StatusCode = StatusCodes.Status503ServiceUnavailable;
                context.Response.Headers.RetryAfter = _retryAfter;
            }
            return Task.CompletedTask;
        }
        return item.Completion;
    }
}
