using System;

namespace Spindle.AspNetCore;

/// <summary>
/// Options of Kestrel's Spindle transport (<c>UseSpindle</c>): the pool its sockets complete on, and the buffer limits
/// of each connection's pipes, which are Kestrel's back-pressure between the network and the application.
/// </summary>
public sealed class SpindleTransportOptions
{
    /// <summary>The name of the pool <c>UseSpindle()</c> registers when it is not given one: <c>"kestrel"</c>.</summary>
    public const string DefaultPoolName = "kestrel";

    private long? _maxReadBufferSize = 1024 * 1024;
    private long? _maxWriteBufferSize = 64 * 1024;
    private int _backlog = 512;
    private string _poolName = DefaultPoolName;

    /// <summary>
    /// The name of the <see cref="WorkerPool"/> (registered with <c>AddWorkerPool</c>) whose threads run the
    /// connections' socket completions and pipe callbacks. <c>UseSpindle</c> sets it.
    /// </summary>
    /// <exception cref="ArgumentException">The value is null, empty or white space.</exception>
    public string PoolName
    {
        get => _poolName;
        set
        {
            ArgumentException.ThrowIfNullOrWhiteSpace(value);
            _poolName = value;
        }
    }

    /// <summary>
    /// How many received bytes a connection holds before it stops reading from the socket until the application has
    /// consumed half of them; <see langword="null"/> for no limit. 1 MiB, as Kestrel's sockets transport.
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException">The value is below 1.</exception>
    public long? MaxReadBufferSize
    {
        get => _maxReadBufferSize;
        set => _maxReadBufferSize = ValidateLimit(value);
    }

    /// <summary>
    /// How many response bytes a connection holds, not yet sent, before the application's flushes wait until half of
    /// them are sent; <see langword="null"/> for no limit. 64 KiB, as Kestrel's sockets transport.
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException">The value is below 1.</exception>
    public long? MaxWriteBufferSize
    {
        get => _maxWriteBufferSize;
        set => _maxWriteBufferSize = ValidateLimit(value);
    }

    /// <summary>The listen backlog of each bound endpoint: 512.</summary>
    /// <exception cref="ArgumentOutOfRangeException">The value is below 1.</exception>
    public int Backlog
    {
        get => _backlog;
        set
        {
            ArgumentOutOfRangeException.ThrowIfLessThan(value, 1);
            _backlog = value;
        }
    }

    /// <summary>Whether accepted connections disable Nagle's algorithm (<c>TCP_NODELAY</c>): <see langword="true"/>.</summary>
    public bool NoDelay { get; set; } = true;

    /// <summary>
    /// Whether the transport binds elsewhere than on Linux x64 and arm64, where the pool's sockets have no epoll driver of
    /// their own and complete through the runtime's socket engine (and so through the built-in thread pool):
    /// <see langword="false"/>, so that Kestrel's own sockets transport binds there instead.
    /// </summary>
    public bool BindWithoutPoolDriver { get; set; }

    /// <summary>A pool given to <c>UseSpindle</c> itself (not resolved by name), or <see langword="null"/>.</summary>
    internal WorkerPool? OwnPool { get; set; }

    private static long? ValidateLimit(long? value)
    {
        if (value is long limit)
        {
            ArgumentOutOfRangeException.ThrowIfLessThan(limit, 1);
        }
        return value;
    }
}
