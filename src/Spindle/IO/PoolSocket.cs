using System.Buffers;
using System.Diagnostics;
using System;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Queues;
using Spindle.Scheduling;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle.IO;

/// <summary>
/// A TCP socket whose asynchronous operations complete on a <see cref="WorkerPool"/>: on Linux through the pool's own
/// epoll driver (no thread of the built-in <see cref="ThreadPool"/> is involved, so a starved built-in pool cannot
/// delay it), elsewhere through the runtime's socket engine, resuming on the pool.
/// </summary>
/// <remarks>
/// <para>Operations: <see cref="ConnectAsync(EndPoint, CancellationToken)"/>, <see cref="AcceptAsync"/>,
/// <see cref="ReceiveAsync"/>, <see cref="SendAsync(ReadOnlyMemory{byte}, CancellationToken)"/> and
/// <see cref="SendAsync(System.Buffers.ReadOnlySequence{byte}, CancellationToken)"/> (a gather); one receive (or accept) and one send may be pending at a time
/// (they may overlap each other). In steady state an operation allocates nothing: one that cannot complete at once waits
/// on a reusable source owned by the socket, and the async methods use pooled state machines.</para>
/// <para>Completion: the code after an <c>await</c> of an operation that had to wait runs on a worker of the pool (the
/// poller thread never runs user code). An operation that completes at once completes on the calling thread.</para>
/// <para>Faults: a reset or refused connection throws <see cref="SocketException"/>; an orderly close by the peer makes
/// <see cref="ReceiveAsync"/> return 0. <see cref="Dispose"/> during a pending operation, and the pool's shutdown (from
/// the moment it begins), complete pending operations with <see cref="ObjectDisposedException"/>; cancellation with
/// <see cref="OperationCanceledException"/>, after which the socket stays usable (a cancelled send may have sent part
/// of its buffer).</para>
/// <para>The <see cref="Socket"/> is exposed for options and endpoints; do not call its own send, receive or async
/// methods while this wrapper owns it (they would compete for the same readiness).</para>
/// </remarks>
public sealed partial class PoolSocket : IDisposable, IPolledSocket
{
    // Brings an awaiting method back to the pool: shutdown runs it in both modes (see ContinuationCallback).
    private static readonly Action<object?> s_resume = new ContinuationCallback(static continuation => ((Action)continuation!)()).Run;

    private readonly WorkerPool _pool;
    private readonly Scheduler _scheduler;
    private readonly Socket _socket;
    private readonly SafeSocketHandle _handle;
    private readonly EpollDriver? _driver;
    private readonly ReadinessWaiter? _read;
    private readonly ReadinessWaiter? _write;
    private readonly DirectionGate _readGate = new();
    private readonly DirectionGate _writeGate = new();
    private readonly ReceiveOperation? _receive;
    private readonly SendOperation? _send;
    private readonly AcceptOperation? _accept;
    private readonly ConnectOperation? _connect;
    private readonly ulong _token;
    private readonly int _fd;
    private readonly CancellationTokenSource? _runtimeEngineClose; // without the driver: cancelled at dispose and shutdown
    private int _disposed;

    /// <summary>Creates a TCP socket of <paramref name="addressFamily"/> whose operations complete on <paramref name="pool"/>.</summary>
    /// <exception cref="ArgumentNullException"><paramref name="pool"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="addressFamily"/> is neither IPv4 nor IPv6.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    /// <exception cref="SocketException">The operating system refused the socket.</exception>
    public PoolSocket(WorkerPool pool, AddressFamily addressFamily = AddressFamily.InterNetwork)
        : this(pool, CreateTcp(pool, addressFamily), ownsValidated: true)
    {
    }

    /// <summary>
    /// Takes ownership of <paramref name="socket"/> (a TCP stream socket, connected, listening or neither): it is made
    /// non-blocking and registered with <paramref name="pool"/>'s driver, and disposed with this wrapper.
    /// </summary>
    /// <exception cref="ArgumentNullException"><paramref name="pool"/> or <paramref name="socket"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="socket"/> is not a stream socket.</exception>
    /// <exception cref="ObjectDisposedException"><paramref name="socket"/> is disposed, or the pool is shutting down.</exception>
    public PoolSocket(WorkerPool pool, Socket socket)
        : this(pool, Validate(pool, socket), ownsValidated: true)
    {
    }

    private PoolSocket(WorkerPool pool, Socket socket, bool ownsValidated)
    {
        System.Diagnostics.Debug.Assert(ownsValidated, "the socket is validated and owned from here on");
        _pool = pool;
        _scheduler = pool.SchedulerCore;
        _socket = socket;
        _handle = socket.SafeHandle;
        try
        {
            socket.Blocking = false;
            _driver = pool.Io.Driver();
            if (_driver is not null)
            {
                Func<Exception> closed = ClosedError;
                _read = new ReadinessWaiter(_scheduler, closed);
                _write = new ReadinessWaiter(_scheduler, closed);
                _receive = new ReceiveOperation(this, _read, _readGate, pool);
                _accept = new AcceptOperation(this, _read, _readGate, pool);
                _send = new SendOperation(this, _write, _writeGate, pool);
                _connect = new ConnectOperation(this, _write, _writeGate, pool);
                _fd = (int)_handle.DangerousGetHandle();
                _token = _driver.Register(this, _fd);
            }
            else
            {
                _runtimeEngineClose = new CancellationTokenSource();
                pool.Io.TrackRuntimeEngineSocket(this);
            }
        }
        catch
        {
            socket.Dispose();
            throw;
        }
    }

    /// <summary>The pool the operations complete on.</summary>
    public WorkerPool Pool => _pool;

    /// <summary>The underlying socket, for options, binding, listening and endpoints (see the remarks).</summary>
    public Socket Socket => _socket;

    /// <summary>Whether this socket's readiness comes from the pool's own driver (Linux on x64 and arm64) rather than the runtime's socket engine.</summary>
    public bool UsesPoolDriver => _driver is not null;

    /// <summary>Binds the socket to <paramref name="localEndPoint"/> (<see cref="Socket.Bind"/>).</summary>
    public void Bind(EndPoint localEndPoint) => _socket.Bind(localEndPoint);

    /// <summary>Starts listening for connections (<see cref="Socket.Listen(int)"/>).</summary>
    public void Listen(int backlog = 512) => _socket.Listen(backlog);

    /// <summary>Connects to <paramref name="remoteEndPoint"/> (an <see cref="IPEndPoint"/>, or a <see cref="DnsEndPoint"/>, whose addresses are tried in turn).</summary>
    /// <exception cref="ArgumentNullException"><paramref name="remoteEndPoint"/> is null.</exception>
    /// <exception cref="ArgumentException"><paramref name="remoteEndPoint"/> is neither an IP nor a DNS endpoint.</exception>
    /// <exception cref="ObjectDisposedException">The socket is disposed or the pool is shutting down.</exception>
    /// <exception cref="SocketException">The connection failed (refused, unreachable, timed out).</exception>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> fired first.</exception>
    public ValueTask ConnectAsync(EndPoint remoteEndPoint, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(remoteEndPoint);
        ThrowIfDisposed();
        return remoteEndPoint switch
        {
            IPEndPoint ip => ConnectCoreAsync(ip, cancellationToken),
            DnsEndPoint dns => IPAddress.TryParse(dns.Host, out IPAddress? literal)
                ? ConnectCoreAsync(new IPEndPoint(literal, dns.Port), cancellationToken)
                : ConnectDnsAsync(dns.Host, dns.Port, cancellationToken),
            _ => throw new ArgumentException($"Only IPEndPoint and DnsEndPoint are supported, not {remoteEndPoint.GetType().Name}.", nameof(remoteEndPoint)),
        };
    }

    /// <summary>Connects to <paramref name="host"/>:<paramref name="port"/>, trying its addresses in turn.</summary>
    /// <exception cref="ArgumentException"><paramref name="host"/> is null or empty.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="port"/> is not a valid port.</exception>
    public ValueTask ConnectAsync(string host, int port, CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(host);
        ArgumentOutOfRangeException.ThrowIfLessThan(port, IPEndPoint.MinPort);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(port, IPEndPoint.MaxPort);
        ThrowIfDisposed();
        return IPAddress.TryParse(host, out IPAddress? literal)
            ? ConnectCoreAsync(new IPEndPoint(literal, port), cancellationToken)
            : ConnectDnsAsync(host, port, cancellationToken);
    }

    /// <summary>Accepts the next connection of a listening socket, as a <see cref="PoolSocket"/> on the same pool.</summary>
    /// <exception cref="InvalidOperationException">Another accept or receive is pending.</exception>
    /// <exception cref="ObjectDisposedException">The socket is disposed or the pool is shutting down.</exception>
    /// <exception cref="SocketException">The socket is not listening, or the accept failed.</exception>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> fired first.</exception>
    public ValueTask<PoolSocket> AcceptAsync(CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        cancellationToken.ThrowIfCancellationRequested();
        Enter(_readGate, "accept or receive");
        return _driver is null ? FallbackAcceptAsync(cancellationToken) : _accept!.Start(cancellationToken);
    }

    /// <summary>
    /// Receives into <paramref name="buffer"/>: the number of bytes received, at least one, or 0 once the peer has shut
    /// down its side (and at once for an empty buffer).
    /// </summary>
    /// <exception cref="InvalidOperationException">Another receive or accept is pending.</exception>
    /// <exception cref="ObjectDisposedException">The socket is disposed or the pool is shutting down.</exception>
    /// <exception cref="SocketException">The connection was reset or failed.</exception>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> fired first.</exception>
    public ValueTask<int> ReceiveAsync(Memory<byte> buffer, CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        cancellationToken.ThrowIfCancellationRequested();
        Enter(_readGate, "receive or accept");
        if (_driver is null)
        {
            return FallbackReceiveAsync(buffer, cancellationToken);
        }
        _receive!.Buffer = buffer;
        return _receive.Start(cancellationToken);
    }

    /// <summary>Sends all of <paramref name="buffer"/>; returns its length once every byte has been handed to the kernel.</summary>
    /// <exception cref="InvalidOperationException">Another send is pending.</exception>
    /// <exception cref="ObjectDisposedException">The socket is disposed or the pool is shutting down.</exception>
    /// <exception cref="SocketException">The connection was reset or shut down.</exception>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> fired first (part of the buffer may have been sent).</exception>
    public ValueTask<int> SendAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default) =>
        SendCoreAsync(new ReadOnlySequence<byte>(buffer), cancellationToken);

    /// <summary>
    /// Sends all of <paramref name="buffers"/>, several segments to a system call where the platform allows (a gather
    /// <c>sendmsg</c> of up to 16 on the pool's driver); returns the length once every byte has been handed to the kernel.
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="buffers"/> is longer than <see cref="int.MaxValue"/> bytes.</exception>
    /// <exception cref="InvalidOperationException">Another send is pending.</exception>
    /// <exception cref="ObjectDisposedException">The socket is disposed or the pool is shutting down.</exception>
    /// <exception cref="SocketException">The connection was reset or shut down.</exception>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> fired first (part of the buffers may have been sent).</exception>
    public ValueTask<int> SendAsync(ReadOnlySequence<byte> buffers, CancellationToken cancellationToken = default)
    {
        if (buffers.Length > int.MaxValue)
        {
            throw new ArgumentOutOfRangeException(nameof(buffers), buffers.Length, "A send takes at most int.MaxValue bytes; send a longer sequence in slices.");
        }
        return SendCoreAsync(buffers, cancellationToken);
    }

    /// <summary>Both sends: one segment or several, at most <see cref="int.MaxValue"/> bytes.</summary>
    private ValueTask<int> SendCoreAsync(in ReadOnlySequence<byte> buffers, CancellationToken cancellationToken)
    {
        ThrowIfDisposed();
        cancellationToken.ThrowIfCancellationRequested();
        Enter(_writeGate, "send or connect");
        if (_driver is null)
        {
            return FallbackSendAsync(buffers, cancellationToken);
        }
        _send!.Buffers = buffers;
        return _send.Start(cancellationToken);
    }

    /// <summary>A <see cref="Stream"/> over this socket (reads and writes are its receives and sends); disposing the stream disposes the socket when <paramref name="ownsSocket"/>.</summary>
    public PoolSocketStream GetStream(bool ownsSocket = true)
    {
        ThrowIfDisposed();
        return new PoolSocketStream(this, ownsSocket);
    }

    /// <summary>Closes the socket. Pending operations complete with <see cref="ObjectDisposedException"/>. Idempotent.</summary>
    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }
        _read?.Close();
        _write?.Close();
        if (_driver is not null)
        {
            // epoll removes a registration by descriptor number. The descriptor is held open around the removal: if the
            // Socket was disposed directly rather than through this object, its number may already belong to another
            // socket, whose registration a removal by number would delete; the kernel dropped this one from the set
            // when the descriptor closed, so there is nothing of ours left to remove.
            bool held = TryHoldHandle();
            try
            {
                _driver.Unregister(_token, _fd, removeFromSet: held);
            }
            finally
            {
                ReleaseHandle(held);
            }
        }
        if (_runtimeEngineClose is not null)
        {
            _pool.Io.ForgetRuntimeEngineSocket(this);
            _runtimeEngineClose.Cancel();
        }
        _socket.Dispose();
    }

    /// <summary>The pool begins to shut down: pending and later operations fail with <see cref="ObjectDisposedException"/>.</summary>
    void IPolledSocket.CloseForShutdown()
    {
        _read?.Close();
        _write?.Close();
        _runtimeEngineClose?.Cancel();
    }

    /// <summary>The exception for a failed call's <c>errno</c>: the socket's closing if that is why, the network error otherwise.</summary>
    internal Exception ErrorFor(int errno) =>
        Volatile.Read(ref _disposed) != 0 || _read is { IsClosed: true } ? ClosedError() : LinuxIo.Error(errno);

    private async ValueTask ConnectDnsAsync(string host, int port, CancellationToken cancellationToken)
    {
        IPAddress[] addresses = await Dns.GetHostAddressesAsync(host, _socket.AddressFamily, cancellationToken).ConfigureAwait(false);
        if (addresses.Length == 0)
        {
            throw new SocketException((int)SocketError.HostNotFound);
        }
        SocketException? last = null;
        foreach (IPAddress address in addresses)
        {
            try
            {
                await ConnectCoreAsync(new IPEndPoint(address, port), cancellationToken).ConfigureAwait(false);
                return;
            }
            catch (SocketException e)
            {
                last = e;
            }
        }
        throw last!;
    }

    private ValueTask ConnectCoreAsync(IPEndPoint remote, CancellationToken cancellationToken)
    {
        cancellationToken.ThrowIfCancellationRequested();
        if (_driver is null)
        {
            return FallbackConnectAsync(remote, cancellationToken);
        }
        byte[] address = SocketAddressFor(remote, _socket.AddressFamily);
        Enter(_writeGate, "send or connect");
        _connect!.Address = address;
        return _connect.StartWithoutResult(cancellationToken);
    }

    /// <summary>One <c>recv</c> or <c>send</c> (without SIGPIPE): the byte count, or -1 with <paramref name="errno"/>.</summary>
    internal unsafe nint TryTransfer(bool send, Span<byte> buffer, out int errno)
    {
        bool added = AcquireHandle();
        try
        {
            fixed (byte* pointer = buffer)
            {
                nint result = send
                    ? LinuxIo.Send(_fd, pointer, buffer.Length, LinuxIo.MsgNoSignal)
                    : LinuxIo.Recv(_fd, pointer, buffer.Length, 0);
                errno = result < 0 ? Marshal.GetLastPInvokeError() : 0;
                return result;
            }
        }
        finally
        {
            ReleaseHandle(added);
        }
    }

    /// <summary>
    /// One gather <c>sendmsg</c> (without SIGPIPE) of the first <see cref="LinuxIo.MaxGatherBuffers"/> segments of
    /// <paramref name="buffers"/>, each pinned for the call only: the byte count, or -1 with <paramref name="errno"/>.
    /// </summary>
    internal unsafe nint TryGather(in ReadOnlySequence<byte> buffers, MemoryHandle[] pins, out int errno)
    {
        Debug.Assert(pins.Length >= LinuxIo.MaxGatherBuffers);
        LinuxIo.IoVector* vectors = stackalloc LinuxIo.IoVector[LinuxIo.MaxGatherBuffers];
        int count = 0;
        try
        {
            foreach (ReadOnlyMemory<byte> segment in buffers)
            {
                if (segment.IsEmpty)
                {
                    continue;
                }
                pins[count] = segment.Pin();
                vectors[count].Base = pins[count].Pointer;
                vectors[count].Length = (nuint)segment.Length;
                if (++count == LinuxIo.MaxGatherBuffers)
                {
                    break;
                }
            }
            LinuxIo.MessageHeader message = default;
            message.Vectors = vectors;
            message.VectorCount = (nuint)count;
            bool added = AcquireHandle();
            try
            {
                nint result = LinuxIo.SendMessage(_fd, &message, LinuxIo.MsgNoSignal);
                errno = result < 0 ? Marshal.GetLastPInvokeError() : 0;
                return result;
            }
            finally
            {
                ReleaseHandle(added);
            }
        }
        finally
        {
            for (int i = 0; i < count; i++)
            {
                pins[i].Dispose();
                pins[i] = default;
            }
        }
    }

    internal unsafe int TryAccept(out int errno)
    {
        bool added = AcquireHandle();
        try
        {
            int fd = LinuxIo.Accept4(_fd, null, null, LinuxIo.SockNonblock | LinuxIo.SockCloexec);
            errno = fd < 0 ? Marshal.GetLastPInvokeError() : 0;
            return fd;
        }
        finally
        {
            ReleaseHandle(added);
        }
    }

    /// <summary>One connect call: 0 when connected, otherwise its <c>errno</c> (<c>EINPROGRESS</c> at first, <c>EISCONN</c> once done).</summary>
    internal unsafe int TryConnect(byte[] address)
    {
        bool added = AcquireHandle();
        try
        {
            fixed (byte* pointer = address)
            {
                return LinuxIo.Connect(_fd, pointer, address.Length) == 0 ? 0 : Marshal.GetLastPInvokeError();
            }
        }
        finally
        {
            ReleaseHandle(added);
        }
    }

    /// <summary>
    /// Holds the descriptor open for one system call (a <see cref="Dispose"/> meanwhile closes it after the call, so the
    /// number is never reused under it). Throws the closed error when the socket is already closed.
    /// </summary>
    private bool AcquireHandle() => TryHoldHandle() ? true : throw ClosedError();

    /// <summary>Like <see cref="AcquireHandle"/>, but answers false instead of throwing when the descriptor is closed.</summary>
    private bool TryHoldHandle()
    {
        bool added = false;
        try
        {
            _handle.DangerousAddRef(ref added);
        }
        catch (ObjectDisposedException)
        {
            return false;
        }
        return added;
    }

    private void ReleaseHandle(bool added)
    {
        if (added)
        {
            _handle.DangerousRelease();
        }
    }

    internal PoolSocket Adopt(int fd)
    {
        Socket accepted;
        try
        {
            accepted = new Socket(new SafeSocketHandle(fd, ownsHandle: true));
        }
        catch
        {
            LinuxIo.Close(fd);
            throw;
        }
        return new PoolSocket(_pool, accepted, ownsValidated: true);
    }
}
