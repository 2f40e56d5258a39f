using System;
using System.Buffers.Text;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// The HTTP scenarios' load generator: keep-alive HTTP/1.1 connections, one GET in flight on each (no pipelining), the
/// next sent as soon as the whole response (a <c>Content-Length</c> body, or a chunked one without trailers) has
/// arrived: a closed loop, as wrk's connections. On Linux (x64, arm64) it is built as wrk is: a few event-loop threads
/// (<see cref="LoopCount"/>), each owning a share of the connections, non-blocking sockets and an epoll instance of its
/// own (<c>HttpLoadGenerator.EventLoop.cs</c>); elsewhere each connection is a thread with blocking socket calls. Either
/// way neither pool under test, nor the built-in pool, runs any of it, and it allocates nothing in a run: every
/// request's latency is counted in its connection's <see cref="LatencyHistogram"/>, and a run's histograms are merged
/// into one the generator keeps, so that a measurement of the process's allocations around a run sees none of the
/// generator's.
/// </summary>
internal sealed partial class HttpLoadGenerator : IDisposable
{
    private readonly Connection[] _connections;
    private readonly EventLoop[]? _loops;
    private readonly LatencyHistogram _merged = new();

    public HttpLoadGenerator(EndPoint server, string path, int connections)
    {
        byte[] request = Encoding.ASCII.GetBytes($"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        _connections = new Connection[connections];
        try
        {
            for (int i = 0; i < connections; i++)
            {
                _connections[i] = new Connection(server, request);
            }
            if (EventLoop.IsSupported)
            {
                int loops = Math.Min(LoopCount, connections);
                _loops = new EventLoop[loops];
                for (int i = 0; i < loops; i++)
                {
                    // Connection c goes to loop c % loops: the shares differ by one at most.
                    var share = new List<Connection>();
                    for (int c = i; c < connections; c += loops)
                    {
                        share.Add(_connections[c]);
                    }
                    _loops[i] = new EventLoop([.. share]);
                }
            }
        }
        catch
        {
            Dispose();
            throw;
        }
    }

    /// <summary>
    /// The event-loop threads on Linux: wrk's default of two below 12 cores, then one per four cores (at most eight), so
    /// that the generator does not take the cores the server is measured on.
    /// </summary>
    public static int LoopCount => Math.Clamp(Environment.ProcessorCount / 4, 2, 8);

    /// <summary>
    /// Every connection loops for <paramref name="duration"/>; returns the requests answered, the seconds from the start
    /// until the last answer (the latencies' merging excluded), and every answered request's latency. The histogram is the
    /// generator's own, valid until its next run. Throws if a connection fails.
    /// </summary>
    public (long Requests, double Seconds, LatencyHistogram Latencies) RunFor(TimeSpan duration)
    {
        long start = Stopwatch.GetTimestamp();
        RunAll(start + Pacer.Ticks(duration), int.MaxValue, answerBy: false);
        double seconds = (Stopwatch.GetTimestamp() - start) / (double)Stopwatch.Frequency;
        long requests = 0;
        foreach (Connection connection in _connections)
        {
            if (connection.Failure is Exception failure)
            {
                throw new InvalidOperationException("A load generator connection failed.", failure);
            }
            requests += connection.Completed;
        }
        return (requests, seconds, MergedLatencies(stalls: 0, stalledTicks: 0));
    }

    /// <summary>
    /// Every connection sends <paramref name="perConnection"/> requests, one after the other, until
    /// <paramref name="deadline"/> (a <see cref="Stopwatch"/> timestamp): returns the latencies (a request not answered by
    /// the deadline counts as what it had waited, from <paramref name="triggered"/>) and how many requests failed (not
    /// answered by the deadline, a connection error, or a status other than 200). The histogram is the generator's own,
    /// valid until its next run.
    /// </summary>
    public (LatencyHistogram Latencies, int Failed) RunCount(int perConnection, long triggered, long deadline)
    {
        RunAll(deadline, perConnection, answerBy: true);
        int failed = 0;
        foreach (Connection connection in _connections)
        {
            failed += perConnection - (int)connection.Completed;
        }
        return (MergedLatencies(failed, deadline - triggered), failed);
    }

    public void Dispose()
    {
        if (_loops is not null)
        {
            foreach (EventLoop? loop in _loops)
            {
                loop?.Dispose();
            }
        }
        foreach (Connection? connection in _connections)
        {
            connection?.Dispose();
        }
    }

    /// <summary>
    /// Runs every connection until <paramref name="deadline"/> or <paramref name="limit"/> requests each. With
    /// <paramref name="answerBy"/>, a response must arrive by the deadline (a request still waiting then ends the
    /// connection's loop and leaves it out of step, unusable); without, the deadline stops the sending of new requests
    /// only, and the one in flight is answered first.
    /// </summary>
    private void RunAll(long deadline, int limit, bool answerBy)
    {
        foreach (Connection connection in _connections)
        {
            connection.Reset();
        }
        Thread[] threads;
        if (_loops is { } loops)
        {
            threads = new Thread[loops.Length];
            for (int i = 0; i < threads.Length; i++)
            {
                EventLoop loop = loops[i];
                threads[i] = new Thread(() => loop.Run(deadline, limit, answerBy)) { IsBackground = true, Name = "http load" };
            }
        }
        else
        {
            threads = new Thread[_connections.Length];
            for (int i = 0; i < threads.Length; i++)
            {
                Connection connection = _connections[i];
                threads[i] = new Thread(() => connection.LoopBlocking(deadline, limit, answerBy)) { IsBackground = true, Name = "http load" };
            }
        }
        foreach (Thread thread in threads)
        {
            thread.Start();
        }
        foreach (Thread thread in threads)
        {
            if (!thread.Join(Waits.Stuck + Waits.Stuck))
            {
                throw new TimeoutException("A load generator thread did not finish.");
            }
        }
    }

    private LatencyHistogram MergedLatencies(int stalls, long stalledTicks)
    {
        _merged.Clear();
        foreach (Connection connection in _connections)
        {
            _merged.Add(connection.Latencies);
        }
        _merged.Record(stalledTicks, stalls);
        return _merged;
    }

    /// <summary>
    /// The length of the first whole response in <paramref name="data"/>, or -1 while more must arrive. Throws for a
    /// status other than 200 or a response it cannot frame.
    /// </summary>
    private static int ResponseLength(ReadOnlySpan<byte> data)
    {
        int headerEnd = data.IndexOf(s_headerEnd);
        if (headerEnd < 0)
        {
            return -1;
        }
        ReadOnlySpan<byte> head = data[..headerEnd];
        if (!head.StartsWith(s_ok))
        {
            throw new InvalidOperationException($"The server answered {Encoding.ASCII.GetString(head[..Math.Min(head.Length, 40)])}.");
        }
        int bodyStart = headerEnd + s_headerEnd.Length;
        int at = head.IndexOf(s_contentLength);
        if (at >= 0 && Utf8Parser.TryParse(head[(at + s_contentLength.Length)..], out int length, out _))
        {
            return data.Length >= bodyStart + length ? bodyStart + length : -1;
        }
        if (head.IndexOf(s_chunked) >= 0)
        {
            return ChunkedEnd(data, bodyStart);
        }
        throw new InvalidOperationException("The response has neither a Content-Length nor a chunked body.");
    }

    /// <summary>
    /// Where a chunked body that starts at <paramref name="at"/> ends (its last chunk, size 0, without trailers), or -1
    /// while more must arrive.
    /// </summary>
    private static int ChunkedEnd(ReadOnlySpan<byte> data, int at)
    {
        while (true)
        {
            int lineEnd = data[at..].IndexOf(s_lineEnd);
            if (lineEnd < 0)
            {
                return -1;
            }
            if (!Utf8Parser.TryParse(data.Slice(at, lineEnd), out int size, out _, 'x') || size < 0)
            {
                throw new InvalidOperationException("The response has a malformed chunk size.");
            }
            at += lineEnd + s_lineEnd.Length;
            if (size == 0)
            {
                at += s_lineEnd.Length; // the empty line that ends a body without trailers
                return data.Length >= at ? at : -1;
            }
            at += size + s_lineEnd.Length;
            if (data.Length < at)
            {
                return -1;
            }
        }
    }

    private static readonly byte[] s_headerEnd = "\r\n\r\n"u8.ToArray();
    private static readonly byte[] s_contentLength = "\r\nContent-Length: "u8.ToArray();
    private static readonly byte[] s_ok = "HTTP/1.1 200 "u8.ToArray();
    private static readonly byte[] s_chunked = "\r\nTransfer-Encoding: chunked"u8.ToArray();
    private static readonly byte[] s_lineEnd = "\r\n"u8.ToArray();

    /// <summary>
    /// One keep-alive connection and its figures, written by the one thread that drives it in a run (its event loop's,
    /// or its own).
    /// </summary>
    private sealed class Connection : IDisposable
    {
        private readonly byte[] _request;
        private readonly byte[] _buffer = new byte[64 * 1024];
        private int _received;
        private long _sentAt;

        public Connection(EndPoint server, byte[] request)
        {
            _request = request;
            Socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
            try
            {
                Socket.Connect(server);
            }
            catch
            {
                Socket.Dispose();
                throw;
            }
        }

        public Socket Socket { get; }

        public readonly LatencyHistogram Latencies = new();
        public long Completed;
        public Exception? Failure;

        /// <summary>A response was outstanding when a run's answer-by deadline passed: the connection is out of step.</summary>
        public bool Broken { get; private set; }

        public void Reset()
        {
            Completed = 0;
            Failure = null;
            Latencies.Clear();
        }

        public void Fail(Exception failure)
        {
            Broken = true;
            Failure = failure;
        }

        public void MarkOutOfStep() => Broken = true;

        /// <summary>Sends the next request (a non-blocking socket takes it whole: nothing else is in flight on it).</summary>
        public void Send(long now)
        {
            _sentAt = now;
            _received = 0;
            int sent = Socket.Send(_request, SocketFlags.None, out SocketError error);
            if (error != SocketError.Success || sent != _request.Length)
            {
                throw new InvalidOperationException($"Sending a request failed ({error}, {sent} of {_request.Length} bytes).");
            }
        }

        /// <summary>
        /// Reads what has arrived (one receive call); true, with the latency recorded, when the response is whole. A
        /// non-blocking socket with nothing to read returns false.
        /// </summary>
        public bool ReceiveSome(long now)
        {
            int received = Socket.Receive(_buffer.AsSpan(_received), SocketFlags.None, out SocketError error);
            if (error == SocketError.WouldBlock)
            {
                return false;
            }
            if (error != SocketError.Success)
            {
                throw new SocketException((int)error);
            }
            if (received == 0)
            {
                throw new InvalidOperationException("The server closed the connection.");
            }
            _received += received;
            int total = ResponseLength(_buffer.AsSpan(0, _received));
            if (total < 0)
            {
                if (_received == _buffer.Length)
                {
                    throw new InvalidOperationException($"A response is longer than {_buffer.Length} bytes.");
                }
                return false;
            }
            if (total != _received)
            {
                throw new InvalidOperationException("The server sent more than one response.");
            }
            Latencies.Record(now - _sentAt);
            Completed++;
            return true;
        }

        /// <summary>The loop of a connection with a thread of its own and a blocking socket.</summary>
        public void LoopBlocking(long deadline, int limit, bool answerBy)
        {
            try
            {
                while (!Broken && Completed < limit)
                {
                    long now = Stopwatch.GetTimestamp();
                    if (now >= deadline)
                    {
                        return;
                    }
                    Socket.ReceiveTimeout = answerBy ? Math.Max(1, (int)Pacer.ToMilliseconds(deadline - now)) : (int)Waits.Stuck.TotalMilliseconds;
                    Send(now);
                    while (!ReceiveSome(Stopwatch.GetTimestamp()))
                    {
                    }
                }
            }
            catch (SocketException e) when (answerBy && e.SocketErrorCode == SocketError.TimedOut)
            {
                MarkOutOfStep();
            }
            catch (Exception e)
            {
                Fail(e);
            }
        }

        public void Dispose() => Socket.Dispose();
    }
}
