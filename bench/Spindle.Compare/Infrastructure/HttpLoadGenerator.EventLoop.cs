using System;
using System.Diagnostics;
using System.Net.Sockets;
using System.Runtime.InteropServices;

namespace Spindle.Compare.Infrastructure;

internal sealed partial class HttpLoadGenerator
{
    /// <summary>
    /// One event-loop thread's connections (Linux): non-blocking sockets in an epoll instance of the loop's own,
    /// level-triggered for input. A run sends a request on each connection, then waits for readiness; each ready
    /// connection gets one receive call, and a whole response sends the next request at once. A connection leaves the
    /// epoll instance when it fails or falls out of step (a response still outstanding at an answer-by deadline), so
    /// that a late response cannot keep the loop waking; it is not used again.
    /// </summary>
    private sealed unsafe partial class EventLoop : IDisposable
    {
        private const int EpollCtlAdd = 1;
        private const int EpollCtlDel = 2;
        private const uint EpollIn = 0x001;
        private const int EpollCloexec = 0x80000;
        private const int Eintr = 4;

        // struct epoll_event { uint32_t events; uint64_t data; } is packed on x64 (12 bytes) and naturally aligned on arm64 (16).
        private static readonly int s_eventSize = RuntimeInformation.ProcessArchitecture == Architecture.X64 ? 12 : 16;
        private static readonly int s_dataOffset = RuntimeInformation.ProcessArchitecture == Architecture.X64 ? 4 : 8;

        private readonly Connection[] _connections;
        private readonly bool[] _inFlight;
        private readonly byte[] _events;
        private int _epoll;

        public EventLoop(Connection[] connections)
        {
            _connections = connections;
            _inFlight = new bool[connections.Length];
            _events = new byte[connections.Length * s_eventSize];
            _epoll = EpollCreate1(EpollCloexec);
            if (_epoll < 0)
            {
                throw new SocketException(Marshal.GetLastPInvokeError());
            }
            for (int i = 0; i < connections.Length; i++)
            {
                connections[i].Socket.Blocking = false;
                int result = Control(EpollCtlAdd, connections[i], EpollIn, (ulong)i);
                if (result != 0)
                {
                    throw new SocketException(result);
                }
            }
        }

        public static bool IsSupported =>
            OperatingSystem.IsLinux() && RuntimeInformation.ProcessArchitecture is Architecture.X64 or Architecture.Arm64;

        /// <summary>Drives this loop's connections for one run (see <see cref="RunAll"/>); failures are kept on the connections.</summary>
        public void Run(long deadline, int limit, bool answerBy)
        {
            int active = 0;
            long now = Stopwatch.GetTimestamp();
            for (int i = 0; i < _connections.Length; i++)
            {
                _inFlight[i] = false;
                if (!_connections[i].Broken && limit > 0 && now < deadline && TrySend(i, now))
                {
                    active++;
                }
            }
            long stuckTicks = Pacer.Ticks(Waits.Stuck);
            long lastProgress = now;
            while (active > 0)
            {
                now = Stopwatch.GetTimestamp();
                int timeout;
                if (answerBy)
                {
                    if (now >= deadline)
                    {
                        break;
                    }
                    timeout = (int)Math.Ceiling(Pacer.ToMilliseconds(deadline - now));
                }
                else if (now - lastProgress >= stuckTicks)
                {
                    FailInFlight(new TimeoutException($"No response for {Waits.Stuck.TotalSeconds:F0} s."), ref active);
                    break;
                }
                else
                {
                    timeout = (int)Math.Ceiling(Pacer.ToMilliseconds(lastProgress + stuckTicks - now));
                }
                int ready;
                fixed (byte* events = _events)
                {
                    ready = EpollWait(_epoll, events, _connections.Length, Math.Max(1, timeout));
                }
                if (ready < 0)
                {
                    int errno = Marshal.GetLastPInvokeError();
                    if (errno == Eintr)
                    {
                        continue;
                    }
                    FailInFlight(new SocketException(errno), ref active);
                    break;
                }
                for (int e = 0; e < ready; e++)
                {
                    int i = (int)BitConverter.ToUInt64(_events, e * s_eventSize + s_dataOffset);
                    if (!_inFlight[i])
                    {
                        Leave(i); // input on a connection with nothing outstanding: the server broke the exchange
                        _connections[i].Fail(new InvalidOperationException("The server sent data no request asked for."));
                        continue;
                    }
                    try
                    {
                        long at = Stopwatch.GetTimestamp();
                        if (!_connections[i].ReceiveSome(at))
                        {
                            continue;
                        }
                        lastProgress = at;
                        _inFlight[i] = false;
                        active--;
                        if (_connections[i].Completed < limit && at < deadline && TrySend(i, at))
                        {
                            active++;
                        }
                    }
                    catch (Exception failure)
                    {
                        _inFlight[i] = false;
                        active--;
                        Leave(i);
                        _connections[i].Fail(failure);
                    }
                }
            }
            for (int i = 0; i < _connections.Length; i++)
            {
                if (_inFlight[i])
                {
                    _inFlight[i] = false;
                    Leave(i);
                    _connections[i].MarkOutOfStep();
                }
            }
        }

        public void Dispose()
        {
            if (_epoll >= 0)
            {
                _ = Close(_epoll);
                _epoll = -1;
            }
        }

        private bool TrySend(int i, long now)
        {
            try
            {
                _connections[i].Send(now);
                _inFlight[i] = true;
                return true;
            }
            catch (Exception failure)
            {
                Leave(i);
                _connections[i].Fail(failure);
                return false;
            }
        }

        private void FailInFlight(Exception failure, ref int active)
        {
            for (int i = 0; i < _connections.Length; i++)
            {
                if (_inFlight[i])
                {
                    _inFlight[i] = false;
                    active--;
                    Leave(i);
                    _connections[i].Fail(failure);
                }
            }
        }

        private void Leave(int i) => _ = Control(EpollCtlDel, _connections[i], 0, 0);

        /// <summary>epoll_ctl for a connection's descriptor: 0, or the errno.</summary>
        private int Control(int operation, Connection connection, uint events, ulong data)
        {
            byte* ev = stackalloc byte[16];
            *(uint*)ev = events;
            *(ulong*)(ev + s_dataOffset) = data;
            return EpollCtl(_epoll, operation, (int)connection.Socket.Handle, ev) == 0 ? 0 : Marshal.GetLastPInvokeError();
        }

        [LibraryImport("libc", EntryPoint = "epoll_create1", SetLastError = true)]
        private static partial int EpollCreate1(int flags);

        [LibraryImport("libc", EntryPoint = "epoll_ctl", SetLastError = true)]
        private static partial int EpollCtl(int epfd, int op, int fd, byte* ev);

        [LibraryImport("libc", EntryPoint = "epoll_wait", SetLastError = true)]
        private static partial int EpollWait(int epfd, byte* events, int maxEvents, int timeout);

        [LibraryImport("libc", EntryPoint = "close", SetLastError = true)]
        private static partial int Close(int fd);
    }
}
