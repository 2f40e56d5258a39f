using System;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>
/// The HTTP scenarios' load generator against a loopback server of the test's own (a thread per connection, answering
/// each request with a fixed response): every request is answered and counted, a response that arrives in pieces is
/// framed whole (Content-Length and chunked), an answer-by deadline counts the unanswered requests as failed, and a
/// status other than 200 fails the run.
/// </summary>
public sealed class HttpLoadGeneratorTests
{
    private const string Plain = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!";
    private const string Chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nd\r\nHello, World!\r\n0\r\n\r\n";

    [Theory]
    [InlineData(Plain, false)]
    [InlineData(Plain, true)]
    [InlineData(Chunked, false)]
    [InlineData(Chunked, true)]
    public void EveryRequest_IsAnsweredAndCounted(string response, bool inPieces)
    {
        using var server = new LoopbackServer(response, inPieces);
        using var load = new HttpLoadGenerator(server.EndPoint, "/plaintext", connections: 5);
        long start = Stopwatch.GetTimestamp();
        (LatencyHistogram latencies, int failed) = load.RunCount(perConnection: 20, start, start + Pacer.Ticks(TimeSpan.FromSeconds(60)));
        Assert.Equal(0, failed);
        Assert.Equal(100, latencies.Count);
        Assert.Equal(100, server.Requests);
        Assert.True(latencies.MinMicroseconds > 0, $"A latency of {latencies.MinMicroseconds} us.");
        // However many requests the timed run gets through (tens of thousands on a fast machine), each one's latency counts.
        (long requests, double seconds, LatencyHistogram timed) = load.RunFor(TimeSpan.FromMilliseconds(200));
        Assert.True(requests > 0, "No request was answered in 200 ms.");
        Assert.InRange(seconds, 0.2, 60);
        Assert.Equal(requests, timed.Count);
        Assert.Equal(100 + requests, server.Requests);
    }

    [Fact]
    public void RequestsUnansweredByTheDeadline_CountAsFailed_WithTheWaitAsTheirLatency()
    {
        using var server = new LoopbackServer(Plain, inPieces: false, answerAtMost: 3);
        using var load = new HttpLoadGenerator(server.EndPoint, "/plaintext", connections: 2);
        long start = Stopwatch.GetTimestamp();
        (LatencyHistogram latencies, int failed) = load.RunCount(perConnection: 5, start, start + Pacer.Ticks(TimeSpan.FromMilliseconds(300)));
        // Each connection gets at most three answers in all, so at least 2 of its 5 requests fail.
        Assert.InRange(failed, 4, 10);
        Assert.Equal(10, latencies.Count);
        Assert.True(latencies.MaxMicroseconds >= 290_000, $"A failed request counted {latencies.MaxMicroseconds} us, not the 300 ms it waited.");
        Assert.True(latencies.Percentile(100) >= 290_000, $"The slowest request read back as {latencies.Percentile(100)} us.");
    }

    [Fact]
    public void AStatusOtherThan200_FailsTheRun()
    {
        using var server = new LoopbackServer("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", inPieces: false);
        using var load = new HttpLoadGenerator(server.EndPoint, "/plaintext", connections: 2);
        var failure = Assert.Throws<InvalidOperationException>(() => load.RunFor(TimeSpan.FromMilliseconds(100)));
        Assert.Contains("503", failure.InnerException?.Message);
    }

    /// <summary>Accepts connections and answers each request (a header block) with the response, whole or a byte at a time.</summary>
    private sealed class LoopbackServer : IDisposable
    {
        private readonly Socket _listener = new(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        private readonly byte[] _response;
        private readonly bool _inPieces;
        private readonly int _answerAtMost;
        private int _requests;

        public LoopbackServer(string response, bool inPieces, int answerAtMost = int.MaxValue)
        {
            _response = Encoding.ASCII.GetBytes(response);
            _inPieces = inPieces;
            _answerAtMost = answerAtMost;
            _listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            _listener.Listen(64);
            new Thread(Accept) { IsBackground = true, Name = "test server" }.Start();
        }

        public EndPoint EndPoint => _listener.LocalEndPoint!;

        public int Requests => Volatile.Read(ref _requests);

        public void Dispose() => _listener.Dispose();

        private void Accept()
        {
            try
            {
                while (true)
                {
                    Socket connection = _listener.Accept();
                    connection.NoDelay = true;
                    new Thread(() => Serve(connection)) { IsBackground = true, Name = "test connection" }.Start();
                }
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException)
            {
                // the test is over
            }
        }

        private void Serve(Socket connection)
        {
            using (connection)
            {
                var buffer = new byte[4096];
                int held = 0;
                int answered = 0;
                try
                {
                    while (true)
                    {
                        int read = connection.Receive(buffer, held, buffer.Length - held, SocketFlags.None);
                        if (read == 0)
                        {
                            return;
                        }
                        held += read;
                        int end;
                        while ((end = buffer.AsSpan(0, held).IndexOf("\r\n\r\n"u8)) >= 0)
                        {
                            buffer.AsSpan(end + 4, held - end - 4).CopyTo(buffer);
                            held -= end + 4;
                            if (answered++ >= _answerAtMost)
                            {
                                continue;
                            }
                            Interlocked.Increment(ref _requests);
                            if (_inPieces)
                            {
                                for (int i = 0; i < _response.Length; i++)
                                {
                                    connection.Send(_response, i, 1, SocketFlags.None);
                                }
                            }
                            else
                            {
                                connection.Send(_response);
                            }
                        }
                    }
                }
                catch (SocketException)
                {
                    // the generator closed its end
                }
            }
        }
    }
}
