using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Primitives;
using Spindle.Threading;

using Spindle.Polling;

namespace Spindle.Polling;

/// <summary>
/// The pool's own I/O driver on Linux: one edge-triggered epoll instance and a poller thread that turns readiness
/// events into wake-ups of the registered sockets' waiters, whose continuations then run on the pool. Nothing passes
/// through the built-in thread pool or the runtime's own socket engine.
/// </summary>
/// <remarks>
/// <para>Why a dedicated poller thread, not workers that wait on epoll instead of their futex when they park (Tokio's
/// model): the poller costs one mostly-blocked thread per pool that uses sockets, and leaves the workers' parking
/// protocol (LIFO futex parking, the wake rules, the stall monitor) exactly as it is. Folding the driver into parking saves
/// that hop (the poller's wake of a parked worker: a few microseconds per event at the median when the pool is lightly
/// loaded, README "Sockets") at the price of an <c>epoll_wait</c> in every park and of busy workers polling the
/// driver; it is left for later, and the seam is this class.</para>
/// <para>State. <see cref="_sockets"/> maps a registration's token (never reused, so a late event for a closed socket
/// finds nothing) to its socket: written by registering and unregistering threads, read by the poller.
/// <see cref="_stopping"/> is written once by <see cref="Stop"/>, then the event fd wakes the poller, which closes the
/// epoll and event descriptors on its way out (it alone uses them after that point; registration checks
/// <see cref="_stopping"/> under <see cref="_lock"/>, which <see cref="Stop"/> also takes). The close sets
/// <see cref="_descriptorsClosed"/> under the lock, and <see cref="Stop"/> writes the event fd under it only while that
/// is false, so the wake-up never goes to a descriptor number the process has reused since.</para>
/// </remarks>
internal sealed unsafe class EpollDriver
{
    private const int MaxEvents = 256;
    private const ulong WakeToken = 0;

    private readonly string _poolName;
    private readonly string _threadName;
    private readonly int _epoll;
    private readonly int _eventFd;
    private readonly int _eventSize;
    private readonly int _dataOffset;
    private readonly Lock _lock = new();
    private readonly ConcurrentDictionary<ulong, IPolledSocket> _sockets = new();
    private long _nextToken;
    private Thread? _poller;
    private ThreadStarts _starts = null!; // set by Create
    private bool _stopping;
    private bool _descriptorsClosed;

    private EpollDriver(string poolName, string threadName, int epoll, int eventFd)
    {
        _poolName = poolName;
        _threadName = threadName;
        _epoll = epoll;
        _eventFd = eventFd;
        // struct epoll_event { uint32_t events; uint64_t data; } is packed on x64 (12 bytes) and naturally aligned on arm64 (16).
        bool packed = RuntimeInformation.ProcessArchitecture == Architecture.X64;
        _eventSize = packed ? 12 : 16;
        _dataOffset = packed ? 4 : 8;
    }

    /// <summary>Whether this platform gets the driver: Linux on x64 or arm64. Elsewhere sockets use the runtime's engine (see <see cref="IO.PoolSocket"/>).</summary>
    public static bool IsSupported =>
        OperatingSystem.IsLinux() && RuntimeInformation.ProcessArchitecture is Architecture.X64 or Architecture.Arm64;

    /// <summary>
    /// Creates the epoll instance and its wake-up event; the poller thread, named <paramref name="threadName"/>, starts with
    /// the first registration.
    /// </summary>
    /// <exception cref="System.Net.Sockets.SocketException">The kernel refused a descriptor (the process is out of them).</exception>
    public static EpollDriver Create(string poolName, string threadName, ThreadStarts starts)
    {
        Debug.Assert(IsSupported);
        int epoll = LinuxIo.EpollCreate1(LinuxIo.EpollCloexec);
        if (epoll < 0)
        {
            throw LinuxIo.Error(Marshal.GetLastPInvokeError());
        }
        int eventFd = LinuxIo.EventFd(0, LinuxIo.EfdCloexec | LinuxIo.EfdNonblock);
        if (eventFd < 0)
        {
            int errno = Marshal.GetLastPInvokeError();
            LinuxIo.Close(epoll);
            throw LinuxIo.Error(errno);
        }
        var driver = new EpollDriver(poolName, threadName, epoll, eventFd) { _starts = starts };
        int added = driver.Control(LinuxIo.EpollCtlAdd, eventFd, LinuxIo.EpollIn, WakeToken);
        if (added != 0)
        {
            LinuxIo.Close(eventFd);
            LinuxIo.Close(epoll);
            throw LinuxIo.Error(added);
        }
        return driver;
    }

    /// <summary>Registers <paramref name="socket"/>'s descriptor for edge-triggered read and write readiness. Returns its token.</summary>
    /// <exception cref="ObjectDisposedException">The driver has stopped (the pool is shutting down).</exception>
    /// <exception cref="System.Net.Sockets.SocketException">epoll refused the descriptor.</exception>
    public ulong Register(IPolledSocket socket, int fd)
    {
        ulong token = (ulong)Interlocked.Increment(ref _nextToken);
        lock (_lock)
        {
            if (_stopping)
            {
                throw PoolIo.ShutDownError(_poolName);
            }
            _sockets[token] = socket;
            int error = Control(LinuxIo.EpollCtlAdd, fd, LinuxIo.EpollIn | LinuxIo.EpollOut | LinuxIo.EpollRdHup | LinuxIo.EpollEt, token);
            if (error != 0)
            {
                _sockets.TryRemove(token, out _);
                throw LinuxIo.Error(error);
            }
            if (_poller is null)
            {
                var poller = new Thread(static state => ((EpollDriver)state!).Poll())
                {
                    IsBackground = true,
                    Name = _threadName,
                };
                try
                {
                    _starts.Start(poller, PoolThreadKind.IO, this); // counts a refusal
                }
                catch (Exception)
                {
                    // The OS refused the poller: undo this registration, so that the caller's failure leaves nothing
                    // behind, and let the next registration try again.
                    _sockets.TryRemove(token, out _);
                    Control(LinuxIo.EpollCtlDel, fd, 0, 0);
                    throw;
                }
                _poller = poller;
            }
        }
        return token;
    }

    /// <summary>
    /// Removes a registration. Late events for it find nothing. <paramref name="removeFromSet"/>: the caller holds the
    /// descriptor open, so <paramref name="fd"/> is still this registration's and is removed from the epoll set; false
    /// when the descriptor has closed already (the kernel removed it, and the number may belong to another socket now).
    /// </summary>
    public void Unregister(ulong token, int fd, bool removeFromSet)
    {
        if (_sockets.TryRemove(token, out _) && removeFromSet)
        {
            lock (_lock)
            {
                if (!_stopping)
                {
                    Control(LinuxIo.EpollCtlDel, fd, 0, token); // a descriptor already closed is gone from the set anyway
                }
            }
        }
    }

    /// <summary>The pool is shutting down: fails every pending operation and refuses new ones (<see cref="IPolledSocket.CloseForShutdown"/>).</summary>
    public void OnShutdownStarted()
    {
        foreach (IPolledSocket socket in _sockets.Values)
        {
            socket.CloseForShutdown();
        }
    }

    /// <summary>The pool has stopped: the poller exits and closes the epoll and event descriptors.</summary>
    public void Stop()
    {
        lock (_lock)
        {
            if (_stopping)
            {
                return;
            }
            _stopping = true;
            if (_poller is null)
            {
                CloseDescriptorsLocked();
                return;
            }
        }
        OnShutdownStarted(); // sockets registered during the drain
        lock (_lock)
        {
            // The poller may have seen the flag on an unrelated wake-up and closed the descriptors already; a write to
            // the closed event fd's number could land in a descriptor opened since, so it is made only while they are
            // open (the poller closes them under this lock).
            if (!_descriptorsClosed)
            {
                ulong one = 1;
                LinuxIo.Write(_eventFd, &one, sizeof(ulong));
            }
        }
    }

    private int Control(int operation, int fd, uint events, ulong token)
    {
        byte* ev = stackalloc byte[16];
        Unsafe.WriteUnaligned(ev, events);
        Unsafe.WriteUnaligned(ev + _dataOffset, token);
        return LinuxIo.EpollCtl(_epoll, operation, fd, ev) == 0 ? 0 : Marshal.GetLastPInvokeError();
    }

    private void Poll()
    {
        byte* events = (byte*)NativeMemory.Alloc((nuint)(MaxEvents * _eventSize));
        try
        {
            while (true)
            {
                int count = LinuxIo.EpollWait(_epoll, events, MaxEvents, -1);
                if (count < 0)
                {
                    int errno = Marshal.GetLastPInvokeError();
                    if (errno == LinuxIo.EIntr)
                    {
                        continue;
                    }
                    // Only a broken descriptor gets here (EBADF, EINVAL): never crash the process for it. Every pending
                    // and later operation fails with ObjectDisposedException instead, as after a shutdown.
                    Debug.Fail($"epoll_wait failed for pool '{_poolName}' (errno {errno}).");
                    lock (_lock)
                    {
                        _stopping = true;
                    }
                    OnShutdownStarted();
                    break;
                }
                for (int i = 0; i < count; i++)
                {
                    byte* ev = events + i * _eventSize;
                    uint flags = Unsafe.ReadUnaligned<uint>(ev);
                    ulong token = Unsafe.ReadUnaligned<ulong>(ev + _dataOffset);
                    if (token == WakeToken)
                    {
                        ulong value;
                        LinuxIo.Read(_eventFd, &value, sizeof(ulong));
                        continue;
                    }
                    if (_sockets.TryGetValue(token, out IPolledSocket? socket))
                    {
                        socket.OnReadiness(flags);
                    }
                }
                if (Volatile.Read(ref _stopping))
                {
                    break;
                }
            }
        }
        finally
        {
            NativeMemory.Free(events);
            lock (_lock)
            {
                CloseDescriptorsLocked();
            }
        }
    }

    private void CloseDescriptorsLocked()
    {
        _descriptorsClosed = true;
        LinuxIo.Close(_eventFd);
        LinuxIo.Close(_epoll);
    }
}
