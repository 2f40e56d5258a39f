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
/// The HTTP scenarios' load generator: keep-alive HTTP/1.1 connections, each driven by a dedicated thread with blocking
/// socket calls (so neither pool under test, nor the built-in pool, runs any of it), sending one GET and reading its
/// whole response (a <c>Content-Length</c> body, or a chunked one without trailers) before the next: a closed loop, as
/// wrk's connections without pipelining.
/// </summary>
internal sealed class HttpLoadGenerator : IDisposable
{
    /// <summary>Latencies kept per connection and phase (the first ones; enough for a p99 over 64 connections).</summary>
    private const int LatencySlots = 4_096;

    private readonly Connection[] _connections;

    public HttpLoadGenerator(EndPoint server, string path, int connections)
    {
        byte[] request = Encoding.ASCII.GetBytes($"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        _connections = new Connection[connections];
        for (int i = 0; i < connections; i++)
        {
            _connections[i] = new Connection(server, request);
        }
    }

    /// <summary>
    /// Every connection loops for <paramref name="duration"/>; returns the requests answered and their latencies
    /// (microseconds, sorted). Throws if a connection fails.
    /// </summary>
    public (long Requests, double[] Latencies) RunFor(TimeSpan duration)
    {
        long deadline = Stopwatch.GetTimestamp() + Pacer.Ticks(duration);
        RunAll(connection => connection.LoopUntil(deadline, int.MaxValue, answerBy: false));
        long requests = 0;
        foreach (Connection connection in _connections)
        {
            if (connection.Failure is Exception failure)
            {
                throw new InvalidOperationException("A load generator connection failed.", failure);
            }
            requests += connection.Completed;
        }
        return (requests, SortedLatencies(extraStalls: 0, stalledMicroseconds: 0));
    }

    /// <summary>
    /// Every connection sends <paramref name="perConnection"/> requests, one after the other, until
    /// <paramref name="deadline"/> (a <see cref="Stopwatch"/> timestamp): returns the latencies (a request not answered by
    /// the deadline counts as what it had waited, from <paramref name="triggered"/>) and how many requests failed (not
    /// answered by the deadline, a connection error, or a status other than 200).
    /// </summary>
    public (double[] Latencies, int Failed) RunCount(int perConnection, long triggered, long deadline)
    {
        RunAll(connection => connection.LoopUntil(deadline, perConnection, answerBy: true));
        int failed = 0;
        foreach (Connection connection in _connections)
        {
            failed += perConnection - (int)connection.Completed;
        }
        return (SortedLatencies(failed, Pacer.ToMicroseconds(deadline - triggered)), failed);
    }

    public void Dispose()
    {
        foreach (Connection connection in _connections)
        {
            connection.Dispose();
        }
    }

    private void RunAll(Action<Connection> loop)
    {
        var threads = new Thread[_connections.Length];
        for (int i = 0; i < threads.Length; i++)
        {
            Connection connection = _connections[i];
            connection.Reset();
            threads[i] = new Thread(() => loop(connection)) { IsBackground = true, Name = "http load" };
            threads[i].Start();
        }
        foreach (Thread thread in threads)
        {
            if (!thread.Join(Waits.Stuck))
            {
                throw new TimeoutException("A load generator connection did not finish.");
            }
        }
    }

    private double[] SortedLatencies(int extraStalls, double stalledMicroseconds)
    {
        var all = new List<double>();
        foreach (Connection connection in _connections)
        {
            for (int i = 0; i < Math.Min(connection.Completed, LatencySlots); i++)
            {
                all.Add(Pacer.ToMicroseconds(connection.Latencies[i]));
            }
        }
        for (int i = 0; i < extraStalls; i++)
        {
            all.Add(stalledMicroseconds);
        }
        double[] sorted = [.. all];
        Array.Sort(sorted);
        return sorted;
    }

    /// <summary>One keep-alive connection and its figures, written by its thread only.</summary>
    private sealed class Connection : IDisposable
    {
        private static readonly byte[] s_headerEnd = "\r\n\r\n"u8.ToArray();
        private static readonly byte[] s_contentLength = "\r\nContent-Length: "u8.ToArray();
        private static readonly byte[] s_ok = "HTTP/1.1 200 "u8.ToArray();
        private static readonly byte[] s_chunked = "\r\nTransfer-Encoding: chunked"u8.ToArray();
        private static readonly byte[] s_lineEnd = "\r\n"u8.ToArray();

        private readonly Socket _socket;
        private readonly byte[] _request;
        private readonly byte[] _buffer = new byte[64 * 1024];
        private bool _broken;

        public Connection(EndPoint server, byte[] request)
        {
            _request = request;
            _socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
            _socket.Connect(server);
        }

        public readonly long[] Latencies = new long[LatencySlots];
        public long Completed;
        public Exception? Failure;

        public void Reset()
        {
            Completed = 0;
            Failure = null;
        }

        /// <summary>
        /// Requests until <paramref name="deadline"/> or <paramref name="limit"/> of them; a failure ends the loop. With
        /// <paramref name="answerBy"/>, a response must arrive by the deadline (a request still waiting then ends the
        /// loop, and leaves the connection out of step, unusable); without, the deadline stops the sending of new
        /// requests only, and the one in flight is answered first.
        /// </summary>
        public void LoopUntil(long deadline, int limit, bool answerBy)
        {
            try
            {
                while (!_broken && Completed < limit)
                {
                    long now = Stopwatch.GetTimestamp();
                    if (now >= deadline)
                    {
                        return;
                    }
                    _socket.ReceiveTimeout = answerBy ? Math.Max(1, (int)Pacer.ToMilliseconds(deadline - now)) : (int)Waits.Stuck.TotalMilliseconds;
                    RoundTrip();
                    long latency = Stopwatch.GetTimestamp() - now;
                    if (Completed < LatencySlots)
                    {
                        Latencies[Completed] = latency;
                    }
                    Completed++;
                }
            }
            catch (SocketException e) when (answerBy && e.SocketErrorCode == SocketError.TimedOut)
            {
                _broken = true; // the deadline passed with a response outstanding: the connection is out of step now
            }
            catch (Exception e)
            {
                _broken = true;
                Failure = e;
            }
        }

        private void RoundTrip()
        {
            _socket.Send(_request);
            int received = 0;
            int headerEnd;
            while ((headerEnd = _buffer.AsSpan(0, received).IndexOf(s_headerEnd)) < 0)
            {
                received += Receive(received);
            }
            ReadOnlySpan<byte> head = _buffer.AsSpan(0, headerEnd);
            if (!head.StartsWith(s_ok))
            {
                throw new InvalidOperationException($"The server answered {Encoding.ASCII.GetString(head[..Math.Min(head.Length, 40)])}.");
            }
            int total;
            int at = head.IndexOf(s_contentLength);
            if (at >= 0 && Utf8Parser.TryParse(head[(at + s_contentLength.Length)..], out int length, out _))
            {
                total = headerEnd + s_headerEnd.Length + length;
            }
            else if (head.IndexOf(s_chunked) >= 0)
            {
                total = ReceiveChunks(headerEnd + s_headerEnd.Length, ref received);
            }
            else
            {
                throw new InvalidOperationException("The response has neither a Content-Length nor a chunked body.");
            }
            while (received < total)
            {
                received += Receive(received);
            }
            if (received != total)
            {
                throw new InvalidOperationException("The server sent more than one response.");
            }
        }

        /// <summary>
        /// Reads a chunked body that starts at <paramref name="at"/> up to its last chunk (size 0, no trailers): returns
        /// where the response ends, with <paramref name="received"/> counting what has been read so far.
        /// </summary>
        private int ReceiveChunks(int at, ref int received)
        {
            while (true)
            {
                int lineEnd;
                while ((lineEnd = _buffer.AsSpan(at, received - at).IndexOf(s_lineEnd)) < 0)
                {
                    received += Receive(received);
                }
                if (!Utf8Parser.TryParse(_buffer.AsSpan(at, lineEnd), out int size, out _, 'x') || size < 0)
                {
                    throw new InvalidOperationException("The response has a malformed chunk size.");
                }
                at += lineEnd + s_lineEnd.Length;
                if (size == 0)
                {
                    return at + s_lineEnd.Length; // the empty line that ends a body without trailers
                }
                at += size + s_lineEnd.Length;
                while (received < at)
                {
                    received += Receive(received);
                }
            }
        }

        private int Receive(int offset)
        {
            int received = _socket.Receive(_buffer, offset, _buffer.Length - offset, SocketFlags.None);
            return received > 0 ? received : throw new InvalidOperationException("The server closed the connection.");
        }

        public void Dispose() => _socket.Dispose();
    }
}
