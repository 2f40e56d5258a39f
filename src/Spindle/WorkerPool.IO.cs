using System.Threading;
using Spindle.IO;

namespace Spindle;

public sealed partial class WorkerPool
{
    // The I/O driver: created by the first PoolSocket (under _ioLock, never after shutdown has begun), told when shutdown
    // begins (pending socket operations fail then, so that a silent peer cannot hold the drain) and stopped with the pool.
    private readonly Lock _ioLock = new();
    private EpollDriver? _io;

    /// <summary>The pool's I/O driver, created on first use; null where sockets use the runtime's engine instead.</summary>
    /// <exception cref="System.ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    internal EpollDriver? IoDriver()
    {
        if (IsShutdownStarted)
        {
            throw PoolSocket.PoolShutDown(Name);
        }
        if (!EpollDriver.IsSupported)
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
            return _io ??= EpollDriver.Create(Name);
        }
    }

    /// <summary>Shutdown has begun: pending socket operations complete with <see cref="System.ObjectDisposedException"/>.</summary>
    private void OnIoShutdownStarted()
    {
        EpollDriver? driver;
        lock (_ioLock)
        {
            driver = _io;
        }
        driver?.OnShutdownStarted();
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
