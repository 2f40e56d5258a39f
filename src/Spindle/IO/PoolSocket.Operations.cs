using System.Buffers;
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

/// <summary>The operations of a socket on the pool's driver: what each retries when readiness arrives.</summary>
public sealed partial class PoolSocket
{
    /// <summary>The poller: a readiness event for this socket.</summary>
    void IPolledSocket.OnReadiness(uint events)
    {
        if ((events & (LinuxIo.EpollIn | LinuxIo.EpollRdHup | LinuxIo.EpollErr | LinuxIo.EpollHup)) != 0)
        {
            if ((events & (LinuxIo.EpollRdHup | LinuxIo.EpollErr | LinuxIo.EpollHup)) != 0)
            {
                _read!.MarkHungUp(); // before the signal: see SocketOperation's remarks on a call that waits first
            }
            _read!.Signal();
        }
        if ((events & (LinuxIo.EpollOut | LinuxIo.EpollErr | LinuxIo.EpollHup)) != 0)
        {
            _write!.Signal();
        }
    }

    internal Exception ClosedError() =>
        Volatile.Read(ref _disposed) != 0 ? new ObjectDisposedException(GetType().FullName) : PoolIo.ShutDownError(_pool.Name);

    private void ThrowIfDisposed()
    {
        ObjectDisposedException.ThrowIf(Volatile.Read(ref _disposed) != 0, this);
        if (_pool.IsShutdownStarted || _read is { IsClosed: true })
        {
            throw PoolIo.ShutDownError(_pool.Name);
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
        private bool _emptied;

        /// <summary>
        /// A stream socket's receive that got fewer bytes than asked for took all there was: the next receive on a
        /// request-response connection would fail with <c>EAGAIN</c> until the peer sends again. Not an end of stream
        /// (0 bytes, which every later receive reads at once) or an empty buffer.
        /// </summary>
        protected override bool LastAttemptEmptied => _emptied;

        protected override bool TryOnce(out int result, out int errno)
        {
            nint received = Socket.TryTransfer(send: false, Buffer.Span, out errno);
            result = (int)Math.Max(received, 0);
            _emptied = received > 0 && received < Buffer.Length;
            return received >= 0;
        }

        protected override void Forget() => Buffer = default; // keep no caller memory alive
    }

    /// <summary>
    /// Sends a sequence whole: one <c>send</c> for a single segment, a gather <c>sendmsg</c> of up to
    /// <see cref="LinuxIo.MaxGatherBuffers"/> segments otherwise, resuming after a partial send where it stopped.
    /// </summary>
    private sealed class SendOperation(PoolSocket socket, ReadinessWaiter waiter, DirectionGate gate, WorkerPool pool)
        : SocketOperation<int>(socket, waiter, gate, pool)
    {
        public ReadOnlySequence<byte> Buffers;
        private long _sent;
        private MemoryHandle[]? _pins; // a gather's pins, made at the socket's first multi-segment send

        protected override bool TryOnce(out int result, out int errno)
        {
            errno = 0;
            long length = Buffers.Length;
            while (_sent < length)
            {
                ReadOnlySequence<byte> rest = _sent == 0 ? Buffers : Buffers.Slice(_sent);
                nint count = rest.IsSingleSegment
                    ? Socket.TryTransfer(send: true, MemoryMarshal.AsMemory(rest.First).Span, out errno)
                    : Socket.TryGather(rest, _pins ??= new MemoryHandle[LinuxIo.MaxGatherBuffers], out errno);
                if (count < 0)
                {
                    result = 0;
                    return false; // a wait keeps the progress; an error, a cancellation or a close ends in Forget
                }
                _sent += count;
            }
            result = (int)length;
            return true;
        }

        /// <summary>
        /// Ended: a send cancelled or failed part-way must not leave its progress to the next send, which would skip
        /// that many of its own bytes (or, being shorter, report itself sent with nothing sent).
        /// </summary>
        protected override void Forget()
        {
            _sent = 0;
            Buffers = default;
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

        protected override void Forget()
        {
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
                return true;
            }
            if (errno is LinuxIo.EInProgress or LinuxIo.EAlready)
            {
                errno = LinuxIo.EAgain; // in progress: wait for writability, then ask again
            }
            return false;
        }

        protected override void Forget() => Address = null;
    }
}
