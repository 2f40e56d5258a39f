using System;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// A <see cref="BackgroundService"/> whose work runs on a worker pool or one of its lanes: register it with
/// <see cref="WorkerPoolBuilderExtensions.AddBackgroundService{TService}(IWorkerPoolBuilder, string?)"/>, and write the
/// work in <see cref="ExecuteOnTargetAsync"/>.
/// </summary>
/// <remarks>
/// <see cref="BackgroundService"/> starts <c>ExecuteAsync</c> with <see cref="Task.Run(Func{Task})"/> (on the
/// built-in pool, since .NET 10). This class's <c>ExecuteAsync</c> starts <see cref="ExecuteOnTargetAsync"/> instead as
/// a task of the target's <see cref="WorkTarget.TaskScheduler"/>: it runs on the pool (or lane), and every await in it
/// without <c>ConfigureAwait(false)</c> comes back there, since an await captures the current task scheduler. Starting,
/// stopping and the host's handling of an exception are <see cref="BackgroundService"/>'s.
/// </remarks>
public abstract class WorkerPoolBackgroundService : BackgroundService
{
    private Func<WorkTarget>? _target;

    /// <summary>The pool or lane the service runs on.</summary>
    /// <exception cref="InvalidOperationException">The service was not registered with <c>AddBackgroundService</c>.</exception>
    public WorkTarget Target => (_target ?? throw new InvalidOperationException(
        $"{GetType().Name} has no pool to run on: register it with AddWorkerPool(...).AddBackgroundService<{GetType().Name}>().")).Invoke();

    /// <summary>Set by the registration: resolves the pool or lane when the service starts.</summary>
    internal void RunOn(Func<WorkTarget> target) => _target = target;

    /// <summary>The service's work, run on <see cref="Target"/>; it should end when <paramref name="stoppingToken"/> is cancelled.</summary>
    /// <param name="stoppingToken">Cancelled when the host stops the service.</param>
    /// <returns>The work's task.</returns>
    protected abstract Task ExecuteOnTargetAsync(CancellationToken stoppingToken);

    /// <inheritdoc/>
    protected sealed override Task ExecuteAsync(CancellationToken stoppingToken) =>
        Task.Factory.StartNew(() => ExecuteOnTargetAsync(stoppingToken), CancellationToken.None, TaskCreationOptions.DenyChildAttach,
            Target.TaskScheduler).Unwrap();
}
