using System;
using System.Net.Sockets;
using System.Runtime.InteropServices;

namespace Spindle.Primitives;

/// <summary>
/// The Linux system calls the pool's I/O driver uses, through source-generated P/Invoke (no runtime marshalling
/// stubs, so NativeAOT- and trim-safe). Constants are Linux's (the same on x64 and arm64, the two architectures the
/// driver runs on; see <see cref="Polling.EpollDriver.IsSupported"/>).
/// </summary>
internal static unsafe partial class LinuxIo
{
    private const string Libc = "libc";

    public const int EpollCloexec = 0x80000;
    public const int EpollCtlAdd = 1;
    public const int EpollCtlDel = 2;
    public const uint EpollIn = 0x001;
    public const uint EpollOut = 0x004;
    public const uint EpollErr = 0x008;
    public const uint EpollHup = 0x010;
    public const uint EpollRdHup = 0x2000;
    public const uint EpollEt = 1u << 31;
    public const int EfdCloexec = 0x80000;
    public const int EfdNonblock = 0x800;
    public const int SockNonblock = 0x800;
    public const int SockCloexec = 0x80000;
    public const int MsgNoSignal = 0x4000;

    public const int EIntr = 4;
    public const int EAgain = 11;
    public const int EInProgress = 115;

    /// <summary><c>prctl</c>'s option that sets the calling thread's timer slack, in nanoseconds.</summary>
    public const int PrSetTimerSlack = 29;

    /// <summary><c>open</c>'s flags for a read-only descriptor that children do not inherit (O_RDONLY | O_CLOEXEC).</summary>
    public const int OpenReadOnlyCloexec = 0x80000;

    /// <summary><c>clock_gettime</c>'s clock of the process's CPU time (CLOCK_PROCESS_CPUTIME_ID).</summary>
    public const int ClockProcessCpuTime = 2;

    [LibraryImport(Libc, EntryPoint = "open")]
    public static partial int Open(byte* path, int flags);

    [LibraryImport(Libc, EntryPoint = "pread")]
    public static partial nint PRead(int fd, void* buffer, nint count, long offset);

    /// <summary><c>clock_gettime</c>; <paramref name="timespec"/> is two 64-bit words, seconds then nanoseconds.</summary>
    [LibraryImport(Libc, EntryPoint = "clock_gettime")]
    public static partial int ClockGetTime(int clock, long* timespec);

    /// <summary><c>gettid</c>: the calling thread's id to the kernel (glibc 2.30 and later, musl 1.2.2 and later).</summary>
    [LibraryImport(Libc, EntryPoint = "gettid")]
    public static partial int GetTid();

    [LibraryImport(Libc, EntryPoint = "prctl")]
    public static partial int Prctl(int option, nuint arg2, nuint arg3, nuint arg4, nuint arg5);

    [LibraryImport(Libc, EntryPoint = "epoll_create1", SetLastError = true)]
    public static partial int EpollCreate1(int flags);

    [LibraryImport(Libc, EntryPoint = "epoll_ctl", SetLastError = true)]
    public static partial int EpollCtl(int epfd, int op, int fd, byte* ev);

    [LibraryImport(Libc, EntryPoint = "epoll_wait", SetLastError = true)]
    public static partial int EpollWait(int epfd, byte* events, int maxEvents, int timeout);

    [LibraryImport(Libc, EntryPoint = "eventfd", SetLastError = true)]
    public static partial int EventFd(uint initialValue, int flags);

    [LibraryImport(Libc, EntryPoint = "read", SetLastError = true)]
    public static partial nint Read(int fd, void* buffer, nint count);

    [LibraryImport(Libc, EntryPoint = "write", SetLastError = true)]
    public static partial nint Write(int fd, void* buffer, nint count);

    [LibraryImport(Libc, EntryPoint = "close", SetLastError = true)]
    public static partial int Close(int fd);

    /// <summary><c>opendir</c>: a directory stream, or null.</summary>
    [LibraryImport(Libc, EntryPoint = "opendir")]
    public static partial nint OpenDir(byte* path);

    /// <summary><c>readdir</c>: the next <c>struct dirent</c>, or null at the end (see <see cref="DirentNameOffset"/>).</summary>
    [LibraryImport(Libc, EntryPoint = "readdir")]
    public static partial byte* ReadDir(nint directory);

    [LibraryImport(Libc, EntryPoint = "closedir")]
    public static partial int CloseDir(nint directory);

    /// <summary>
    /// Where <c>d_name</c> starts in a <c>struct dirent</c> on 64-bit Linux, glibc and musl alike: after <c>d_ino</c> and
    /// <c>d_off</c> (8 bytes each), <c>d_reclen</c> (2) and <c>d_type</c> (1).
    /// </summary>
    public const int DirentNameOffset = 19;

    [LibraryImport(Libc, EntryPoint = "recv", SetLastError = true)]
    public static partial nint Recv(int fd, byte* buffer, nint length, int flags);

    [LibraryImport(Libc, EntryPoint = "send", SetLastError = true)]
    public static partial nint Send(int fd, byte* buffer, nint length, int flags);

    [LibraryImport(Libc, EntryPoint = "sendmsg", SetLastError = true)]
    public static partial nint SendMessage(int fd, MessageHeader* message, int flags);

    /// <summary>Most buffers one <c>sendmsg</c> of the driver gathers (Linux allows 1,024: <c>IOV_MAX</c>).</summary>
    public const int MaxGatherBuffers = 16;

    /// <summary><c>struct iovec</c>: one buffer of a gather.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct IoVector
    {
        public void* Base;
        public nuint Length;
    }

    /// <summary>
    /// <c>struct msghdr</c> on 64-bit Linux, the driver's (musl's <c>int</c> count and padding read the same on x64 and
    /// arm64, both little-endian): no address (a connected socket), the buffers, no ancillary data.
    /// </summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct MessageHeader
    {
        public void* Name;
        public uint NameLength;
        public IoVector* Vectors;
        public nuint VectorCount;
        public void* Control;
        public nuint ControlLength;
        public int Flags;
    }

    [LibraryImport(Libc, EntryPoint = "accept4", SetLastError = true)]
    public static partial int Accept4(int fd, void* address, void* addressLength, int flags);

    [LibraryImport(Libc, EntryPoint = "connect", SetLastError = true)]
    public static partial int Connect(int fd, byte* address, int addressLength);

    public const int EIsConn = 106;
    public const int EAlready = 114;
    public const int EConnAborted = 103;

    /// <summary>The <see cref="SocketError"/> for a Linux <c>errno</c> of a socket call (the common ones; others map to <see cref="SocketError.SocketError"/>).</summary>
    public static SocketError ToSocketError(int errno) => errno switch
    {
        9 => SocketError.OperationAborted,        // EBADF: closed under the call
        13 => SocketError.AccessDenied,           // EACCES
        32 => SocketError.Shutdown,               // EPIPE
        98 => SocketError.AddressAlreadyInUse,    // EADDRINUSE
        99 => SocketError.AddressNotAvailable,    // EADDRNOTAVAIL
        100 => SocketError.NetworkDown,           // ENETDOWN
        101 => SocketError.NetworkUnreachable,    // ENETUNREACH
        103 => SocketError.ConnectionAborted,     // ECONNABORTED
        104 => SocketError.ConnectionReset,       // ECONNRESET
        105 => SocketError.NoBufferSpaceAvailable, // ENOBUFS
        106 => SocketError.IsConnected,           // EISCONN
        107 => SocketError.NotConnected,          // ENOTCONN
        110 => SocketError.TimedOut,              // ETIMEDOUT
        111 => SocketError.ConnectionRefused,     // ECONNREFUSED
        113 => SocketError.HostUnreachable,       // EHOSTUNREACH
        114 => SocketError.AlreadyInProgress,     // EALREADY
        EInProgress => SocketError.InProgress,
        EAgain => SocketError.WouldBlock,
        EIntr => SocketError.Interrupted,
        22 => SocketError.InvalidArgument,        // EINVAL
        24 => SocketError.TooManyOpenSockets,     // EMFILE
        88 => SocketError.NotSocket,              // ENOTSOCK
        _ => SocketError.SocketError,
    };

    /// <summary>A <see cref="SocketException"/> for a failed call's <c>errno</c>.</summary>
    public static SocketException Error(int errno) => new((int)ToSocketError(errno));
}
