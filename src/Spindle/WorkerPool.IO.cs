using System.Threading;
using Spindle.IO;

namespace Spindle;

public sealed partial class WorkerPool
{
    // The I/O driver: created by the first PoolSocket (under _ioLock, never after shutdown has begun), told when shutdown
    // begins (pending socket operations fail then, so that a silent peer cannot hold the drain) and stopped with the pool.
    private readonly Lock _ioLock = new();
    private EpollDriver? _io;

    // Sockets on the runtime's engine (no driver here): shutdown fails their pending operations too. Under _ioLock.
    private readonly System.Collections.Generic.HashSet<PoolSocket> _runtimeEngineSockets = [];

    private WorkerPoolPipeScheduler? _pipeScheduler;

    /// <summary>
    /// A <see cref="System.IO.Pipelines.PipeScheduler"/> that runs pipe callbacks on this pool (see
    /// <see cref="WorkerPoolPipeScheduler"/>): the reader and writer scheduler for pipes whose code should resume here.
    /// </summary>
    public WorkerPoolPipeScheduler PipeScheduler =>
        Volatile.Read(ref _pipeScheduler) ?? Interlocked.CompareExchange(ref _pipeScheduler, new WorkerPoolPipeScheduler(this), null) ?? _pipeScheduler!;

    /// <summary>Tests: sockets of this pool use the runtime's engine even where the driver exists (set before the first socket).</summary>
    internal bool SocketsUseRuntimeEngine { get; set; }

    /// <summary>The pool's I/O driver, created on first use; null where sockets use the runtime's engine instead.</summary>
    /// <exception cref="System.ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    internal EpollDriver? IoDriver()
    {
        if (IsShutdownStarted)
        {
            throw PoolSocket.PoolShutDown(Name);
        }
        if (!EpollDriver.IsSupported || SocketsUseRuntimeEngine)
        {
            return null;
        }
        EpollDriver? driver = Volatile.Read(ref _io);
        if (driver is not null)
        {
            return driver;
        }
        lock (_ioLock)
        {
            if (IsShutdownStarted)
            {
                throw PoolSocket.PoolShutDown(Name);
            }
            return _io ??= EpollDriver.Create(Name, _threads.Starts);
        }
    }

    /// <summary>A socket on the runtime's engine: tracked until disposed, so that shutdown can fail its pending operations.</summary>
    /// <exception cref="System.ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    internal void TrackRuntimeEngineSocket(PoolSocket socket)
    {
        lock (_ioLock)
        {
            if (IsShutdownStarted)
            {
                throw PoolSocket.PoolShutDown(Name);
            }
            _runtimeEngineSockets.Add(socket);
        }
    }

    internal void ForgetRuntimeEngineSocket(PoolSocket socket)
    {
        lock (_ioLock)
        {
            _runtimeEngineSockets.Remove(socket);
        }
    }

    /// <summary>Shutdown has begun: pending socket operations complete with <see cref="System.ObjectDisposedException"/>.</summary>
    private void OnIoShutdownStarted()
    {
        EpollDriver? driver;
        PoolSocket[] runtimeEngine;
        lock (_ioLock)
        {
            driver = _io;
            runtimeEngine = [.. _runtimeEngineSockets];
        }
        driver?.OnShutdownStarted();
        foreach (PoolSocket socket in runtimeEngine)
        {
            socket.CloseForShutdown();
        }
    }

    /// <summary>The pool has stopped: the driver's poller exits and its descriptors close.</summary>
    internal void OnIoStopped()
    {
        EpollDriver? driver;
        lock (_ioLock)
        {
            driver = _io;
        }
        driver?.Stop();
    }
}
