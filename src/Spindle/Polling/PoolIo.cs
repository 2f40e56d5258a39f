using System;
using System.Collections.Generic;
using System.IO.Pipelines;
using System.Threading;
using Spindle.Scheduling;
using Spindle.Threading;

namespace Spindle.Polling;

/// <summary>
/// A pool's sockets: its I/O driver (created by the first <see cref="IO.PoolSocket"/>, never once shutdown has begun),
/// the sockets on the runtime's engine, and its pipe scheduler. Shutdown fails pending operations when it begins, so
/// that a silent peer cannot hold the drain, and the driver stops with the pool.
/// </summary>
/// <remarks>
/// State under <see cref="_lock"/>: the driver (read without the lock once created) and the set of runtime-engine
/// sockets. Shutdown's begin is read from the scheduler under the lock, so a socket either registers before shutdown
/// begins (and is failed by <see cref="OnShutdownStarted"/>) or is refused.
/// </remarks>
internal sealed class PoolIo
{
    private readonly Lock _lock = new();
    private readonly string _poolName;
    private readonly string _pollerName;
    private readonly Scheduler _scheduler;
    private readonly ThreadStarts _starts;
    private readonly HashSet<IPolledSocket> _runtimeEngineSockets = [];
    private EpollDriver? _driver;
    private PipeScheduler? _pipeScheduler;

    /// <summary>Sockets of the pool <paramref name="poolName"/>; its poller thread is <c>{threadNamePrefix} io</c>.</summary>
    public PoolIo(string poolName, string threadNamePrefix, Scheduler scheduler, ThreadStarts starts)
    {
        _poolName = poolName;
        _pollerName = $"{threadNamePrefix} io";
        _scheduler = scheduler;
        _starts = starts;
    }

    /// <summary>The exception for a socket call on a pool whose shutdown has begun.</summary>
    public static ObjectDisposedException ShutDownError(string poolName) =>
        new("Spindle.WorkerPool", $"The worker pool '{poolName}' is shut down or shutting down: its sockets complete no more operations.");

    /// <summary>Tests: sockets of this pool use the runtime's engine even where the driver exists (set before the first socket).</summary>
    public bool UseRuntimeEngine { get; set; }

    /// <summary>The pool's pipe scheduler once made (see <see cref="PublishPipeScheduler"/>), else null.</summary>
    public PipeScheduler? PipeScheduler => Volatile.Read(ref _pipeScheduler);

    /// <summary>Publishes <paramref name="made"/> as the pool's pipe scheduler unless another was first; returns the one kept.</summary>
    public PipeScheduler PublishPipeScheduler(PipeScheduler made) =>
        Interlocked.CompareExchange(ref _pipeScheduler, made, null) ?? made;

    /// <summary>The pool's I/O driver, created on first use; null where sockets use the runtime's engine instead.</summary>
    /// <exception cref="System.ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public EpollDriver? Driver()
    {
        if (_scheduler.IsShutdownStarted)
        {
            throw ShutDownError(_poolName);
        }
        if (!EpollDriver.IsSupported || UseRuntimeEngine)
        {
            return null;
        }
        EpollDriver? driver = Volatile.Read(ref _driver);
        if (driver is not null)
        {
            return driver;
        }
        lock (_lock)
        {
            if (_scheduler.IsShutdownStarted)
            {
                throw ShutDownError(_poolName);
            }
            return _driver ??= EpollDriver.Create(_poolName, _pollerName, _starts);
        }
    }

    /// <summary>A socket on the runtime's engine: tracked until disposed, so that shutdown can fail its pending operations.</summary>
    /// <exception cref="System.ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public void TrackRuntimeEngineSocket(IPolledSocket socket)
    {
        lock (_lock)
        {
            if (_scheduler.IsShutdownStarted)
            {
                throw ShutDownError(_poolName);
            }
            _runtimeEngineSockets.Add(socket);
        }
    }

    public void ForgetRuntimeEngineSocket(IPolledSocket socket)
    {
        lock (_lock)
        {
            _runtimeEngineSockets.Remove(socket);
        }
    }

    /// <summary>Shutdown has begun: pending socket operations complete with <see cref="System.ObjectDisposedException"/>.</summary>
    public void OnShutdownStarted()
    {
        EpollDriver? driver;
        IPolledSocket[] runtimeEngine;
        lock (_lock)
        {
            driver = _driver;
            runtimeEngine = [.. _runtimeEngineSockets];
        }
        driver?.OnShutdownStarted();
        foreach (IPolledSocket socket in runtimeEngine)
        {
            socket.CloseForShutdown();
        }
    }

    /// <summary>The pool has stopped: the driver's poller exits and its descriptors close.</summary>
    public void OnStopped()
    {
        EpollDriver? driver;
        lock (_lock)
        {
            driver = _driver;
        }
        driver?.Stop();
    }
}
