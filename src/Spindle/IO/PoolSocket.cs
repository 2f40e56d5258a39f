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

namespace Spindle.IO;

/// <summary>
/// A TCP socket whose asynchronous operations complete on a <see cref="WorkerPool"/>: on Linux through the pool's own
/// epoll driver (no thread of the built-in <see cref="ThreadPool"/> is involved, so a starved built-in pool cannot
/// delay it), elsewhere through the runtime's socket engine, resuming on the pool.
/// </summary>
/// <remarks>
/// <para>Operations: <see cref="ConnectAsync(EndPoint, CancellationToken)"/>, <see cref="AcceptAsync"/>,
/// <see cref="ReceiveAsync"/>, <see cref="SendAsync"/>; one receive (or accept) and one send may be pending at a time
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
public sealed class PoolSocket : IDisposable
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
            _driver = pool.IoDriver();
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
                pool.TrackRuntimeEngineSocket(this);
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
    public ValueTask<int> SendAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        cancellationToken.ThrowIfCancellationRequested();
        Enter(_writeGate, "send or connect");
        if (_driver is null)
        {
            return FallbackSendAsync(buffer, cancellationToken);
        }
        _send!.Buffer = buffer;
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
            _pool.ForgetRuntimeEngineSocket(this);
            _runtimeEngineClose.Cancel();
        }
        _socket.Dispose();
    }

    /// <summary>The pool begins to shut down: pending and later operations fail with <see cref="ObjectDisposedException"/>.</summary>
    internal void CloseForShutdown()
    {
        _read?.Close();
        _write?.Close();
        _runtimeEngineClose?.Cancel();
    }

    /// <summary>The poller: a readiness event for this socket.</summary>
    internal void OnReadiness(uint events)
    {
        if ((events & (LinuxIo.EpollIn | LinuxIo.EpollRdHup | LinuxIo.EpollErr | LinuxIo.EpollHup)) != 0)
        {
            _read!.Signal();
        }
        if ((events & (LinuxIo.EpollOut | LinuxIo.EpollErr | LinuxIo.EpollHup)) != 0)
        {
            _write!.Signal();
        }
    }

    internal static ObjectDisposedException PoolShutDown(string poolName) =>
        new(typeof(WorkerPool).FullName, $"The worker pool '{poolName}' is shut down or shutting down: its sockets complete no more operations.");

    internal Exception ClosedError() =>
        Volatile.Read(ref _disposed) != 0 ? new ObjectDisposedException(GetType().FullName) : PoolShutDown(_pool.Name);

    private void ThrowIfDisposed()
    {
        ObjectDisposedException.ThrowIf(Volatile.Read(ref _disposed) != 0, this);
        if (_pool.IsShutdownStarted || _read is { IsClosed: true })
        {
            throw PoolShutDown(_pool.Name);
        }
    }

    private static void Enter(DirectionGate gate, string what)
    {
        if (!gate.TryEnter())
        {
            throw new InvalidOperationException($"Another {what} is already pending on this socket; a PoolSocket runs one at a time in each direction.");
        }
    }

    private static Socket CreateTcp(WorkerPool pool, AddressFamily addressFamily)
    {
        ArgumentNullException.ThrowIfNull(pool);
        if (addressFamily is not (AddressFamily.InterNetwork or AddressFamily.InterNetworkV6))
        {
            throw new ArgumentOutOfRangeException(nameof(addressFamily), addressFamily, "A PoolSocket is a TCP socket over IPv4 or IPv6.");
        }
        return new Socket(addressFamily, SocketType.Stream, ProtocolType.Tcp);
    }

    private static Socket Validate(WorkerPool pool, Socket socket)
    {
        ArgumentNullException.ThrowIfNull(pool);
        ArgumentNullException.ThrowIfNull(socket);
        ObjectDisposedException.ThrowIf(socket.SafeHandle.IsClosed, socket);
        if (socket.SocketType != SocketType.Stream)
        {
            throw new ArgumentException($"A PoolSocket needs a stream socket, not {socket.SocketType}.", nameof(socket));
        }
        return socket;
    }

    // ---- the driver's paths: one reusable operation per kind (see SocketOperation) ----

    private sealed class ReceiveOperation(PoolSocket socket, ReadinessWaiter waiter, DirectionGate gate, WorkerPool pool)
        : SocketOperation<int>(socket, waiter, gate, pool)
    {
        public Memory<byte> Buffer;

        protected override bool TryOnce(out int result, out int errno)
        {
            nint received = Socket.TryTransfer(send: false, Buffer.Span, out errno);
            result = (int)Math.Max(received, 0);
            if (received < 0)
            {
                return false;
            }
            Buffer = default; // keep no caller memory alive
            return true;
        }
    }

    private sealed class SendOperation(PoolSocket socket, ReadinessWaiter waiter, DirectionGate gate, WorkerPool pool)
        : SocketOperation<int>(socket, waiter, gate, pool)
    {
        public ReadOnlyMemory<byte> Buffer;
        private int _sent;

        protected override bool TryOnce(out int result, out int errno)
        {
            errno = 0;
            while (_sent < Buffer.Length)
            {
                nint count = Socket.TryTransfer(send: true, MemoryMarshal.AsMemory(Buffer).Span[_sent..], out errno);
                if (count < 0)
                {
                    result = 0;
                    if (errno != LinuxIo.EAgain && errno != LinuxIo.EIntr)
                    {
                        _sent = 0;
                        Buffer = default;
                    }
                    return false;
                }
                _sent += (int)count;
            }
            result = _sent;
            _sent = 0;
            Buffer = default;
            return true;
        }
    }

    private sealed class AcceptOperation(PoolSocket socket, ReadinessWaiter waiter, DirectionGate gate, WorkerPool pool)
        : SocketOperation<PoolSocket>(socket, waiter, gate, pool)
    {
        protected override bool TryOnce(out PoolSocket result, out int errno)
        {
            int fd = Socket.TryAccept(out errno);
            if (fd < 0)
            {
                result = null!;
                if (errno == LinuxIo.EConnAborted)
                {
                    errno = LinuxIo.EIntr; // the peer gave up before it was taken: take the next at once
                }
                return false;
            }
            result = Socket.Adopt(fd);
            return true;
        }
    }

    private sealed class ConnectOperation(PoolSocket socket, ReadinessWaiter waiter, DirectionGate gate, WorkerPool pool)
        : SocketOperation<bool>(socket, waiter, gate, pool)
    {
        public byte[]? Address;

        protected override bool TryOnce(out bool result, out int errno)
        {
            errno = Socket.TryConnect(Address!);
            result = errno is 0 or LinuxIo.EIsConn;
            if (result)
            {
                Address = null;
                return true;
            }
            if (errno is LinuxIo.EInProgress or LinuxIo.EAlready)
            {
                errno = LinuxIo.EAgain; // in progress: wait for writability, then ask again
            }
            return false;
        }
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

    /// <summary>Linux's <c>sockaddr_in</c> or <c>sockaddr_in6</c> for <paramref name="remote"/> (an IPv4 address on an IPv6 socket is mapped).</summary>
    private static byte[] SocketAddressFor(IPEndPoint remote, AddressFamily socketFamily)
    {
        IPAddress address = remote.Address;
        if (socketFamily == AddressFamily.InterNetworkV6 && address.AddressFamily == AddressFamily.InterNetwork)
        {
            address = address.MapToIPv6();
        }
        if (address.AddressFamily != socketFamily)
        {
            throw new ArgumentException($"An {address.AddressFamily} address cannot be reached from an {socketFamily} socket.", nameof(remote));
        }
        bool v6 = address.AddressFamily == AddressFamily.InterNetworkV6;
        var bytes = new byte[v6 ? 28 : 16];
        BitConverter.TryWriteBytes(bytes.AsSpan(0, 2), (ushort)(v6 ? 10 : 2)); // AF_INET6 / AF_INET, host order
        bytes[2] = (byte)(remote.Port >> 8);
        bytes[3] = (byte)remote.Port;
        if (v6)
        {
            address.TryWriteBytes(bytes.AsSpan(8, 16), out _);
            uint scope = (uint)address.ScopeId;
            BitConverter.TryWriteBytes(bytes.AsSpan(24, 4), scope);
        }
        else
        {
            address.TryWriteBytes(bytes.AsSpan(4, 4), out _);
        }
        return bytes;
    }

    // ---- elsewhere: the runtime's socket engine, then a hop to the pool ----

    private ValueTask<int> FallbackReceiveAsync(Memory<byte> buffer, CancellationToken cancellationToken) =>
        OnRuntimeEngineAsync(static (state, token) => state.Socket.ReceiveAsync(state.Buffer, SocketFlags.None, token),
            (Socket: _socket, Buffer: buffer), _readGate, cancellationToken);

    private ValueTask<int> FallbackSendAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken) =>
        OnRuntimeEngineAsync(static (state, token) => SendAllAsync(state.Socket, state.Buffer, token),
            (Socket: _socket, Buffer: buffer), _writeGate, cancellationToken);

    private ValueTask<PoolSocket> FallbackAcceptAsync(CancellationToken cancellationToken) =>
        OnRuntimeEngineAsync(static async (owner, token) =>
            new PoolSocket(owner._pool, await owner._socket.AcceptAsync(token).ConfigureAwait(false), ownsValidated: true),
            this, _readGate, cancellationToken);

    private async ValueTask FallbackConnectAsync(IPEndPoint remote, CancellationToken cancellationToken)
    {
        Enter(_writeGate, "send or connect");
        await OnRuntimeEngineAsync(static async (state, token) =>
        {
            await state.Socket.ConnectAsync(state.Remote, token).ConfigureAwait(false);
            return true;
        }, (Socket: _socket, Remote: remote), _writeGate, cancellationToken).ConfigureAwait(false);
    }

    private static async ValueTask<int> SendAllAsync(Socket socket, ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken)
    {
        int sent = 0;
        while (sent < buffer.Length)
        {
            sent += await socket.SendAsync(buffer[sent..], SocketFlags.None, cancellationToken).ConfigureAwait(false);
        }
        return sent;
    }

    /// <summary>
    /// Without the driver: runs one of the runtime's socket operations (the caller has entered <paramref name="gate"/>;
    /// this leaves it), then resumes on the pool. The socket's disposal and the pool's shutdown cancel it and surface as
    /// <see cref="ObjectDisposedException"/>; the caller's token, as an <see cref="OperationCanceledException"/> of that token.
    /// </summary>
    private async ValueTask<T> OnRuntimeEngineAsync<T, TState>(Func<TState, CancellationToken, ValueTask<T>> operation, TState state,
        DirectionGate gate, CancellationToken cancellationToken)
    {
        CancellationToken callerToken = cancellationToken;
        CancellationTokenSource? linked = LinkClose(ref cancellationToken);
        try
        {
            T result = await operation(state, cancellationToken).ConfigureAwait(false);
            await new PoolHop(_pool, _scheduler);
            return result;
        }
        catch (OperationCanceledException) when (callerToken.IsCancellationRequested)
        {
            throw new OperationCanceledException(callerToken);
        }
        catch (Exception e) when (IsClosedUnder(e))
        {
            throw ClosedError();
        }
        finally
        {
            linked?.Dispose();
            gate.Exit();
        }
    }

    /// <summary>
    /// Without the driver: makes <paramref name="cancellationToken"/> also fire when the socket is disposed or the pool
    /// shuts down (a linked source, allocated only when the caller's token can fire too).
    /// </summary>
    private CancellationTokenSource? LinkClose(ref CancellationToken cancellationToken)
    {
        if (!cancellationToken.CanBeCanceled)
        {
            cancellationToken = _runtimeEngineClose!.Token;
            return null;
        }
        CancellationTokenSource linked = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken, _runtimeEngineClose!.Token);
        cancellationToken = linked.Token;
        return linked;
    }

    /// <summary>Whether <paramref name="failure"/> came from the socket's closing (dispose or shutdown), not from the caller's token or the network.</summary>
    private bool IsClosedUnder(Exception failure) =>
        _runtimeEngineClose!.IsCancellationRequested
        && failure is OperationCanceledException or ObjectDisposedException or SocketException { SocketErrorCode: SocketError.OperationAborted };

    /// <summary>Resumes the awaiting method on the pool, unless it already runs there.</summary>
    private readonly struct PoolHop(WorkerPool pool, Scheduler scheduler) : ICriticalNotifyCompletion
    {
        public PoolHop GetAwaiter() => this;

        public bool IsCompleted => WorkerPool.Current == pool;

        public void GetResult()
        {
        }

        public void OnCompleted(Action continuation) => UnsafeOnCompleted(continuation);

        public void UnsafeOnCompleted(Action continuation) =>
            scheduler.EnqueueContinuation(new WorkItemEntry(s_resume, continuation, null), preferLocal: false);
    }
}
