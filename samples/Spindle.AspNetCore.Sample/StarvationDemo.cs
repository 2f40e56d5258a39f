using System;
using System.Diagnostics;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;

namespace Spindle.AspNetCore.Sample;

/// <summary>
/// Opens a keep-alive connection, blocks the built-in thread pool with 2,000 items, and times requests on that
/// connection and on a new one; plain blocking sockets on this thread, so the client itself needs no pool.
/// </summary>
internal static class StarvationDemo
{
    public static void Run(WebApplication app)
    {
        string address = app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.First();
        var server = new IPEndPoint(IPAddress.Loopback, new Uri(address).Port);
        using Socket open = Connect(server);
        Console.WriteLine($"GET /              {Get(open, "/")} (warm-up)");
        Console.WriteLine($"GET /admin/health  {Get(open, "/admin/health")} (warm-up)");

        // Never disposed: the blocked items that have not started yet when it is set still wait on it.
        var gate = new ManualResetEventSlim();
        for (int i = 0; i < 2_000; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(static g => ((ManualResetEventSlim)g!).Wait(), gate);
        }
        Thread.Sleep(100);
        Console.WriteLine("The built-in thread pool now holds 2,000 blocked items.");
        for (int i = 0; i < 3; i++)
        {
            Console.WriteLine($"GET /              {Get(open, "/")} (the open keep-alive connection)");
        }
        Console.WriteLine($"GET /admin/health  {Get(open, "/admin/health")} (the open keep-alive connection)");
        using (Socket fresh = Connect(server))
        {
            Console.WriteLine($"GET /              {Get(fresh, "/")} (a new connection: Kestrel starts it on the built-in pool)");
        }
        gate.Set();
        Console.WriteLine("Released the built-in thread pool.");
    }

    private static Socket Connect(IPEndPoint server)
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true, ReceiveTimeout = 3_000 };
        socket.Connect(server);
        return socket;
    }

    /// <summary>One request; the time to its whole answer, or why there was none within 3 s.</summary>
    private static string Get(Socket socket, string path)
    {
        long start = Stopwatch.GetTimestamp();
        try
        {
            socket.Send(Encoding.ASCII.GetBytes($"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
            var buffer = new byte[4_096];
            int received = 0;
            string text;
            // The answers are chunked (no Content-Length): read up to the last, empty chunk.
            while (!(text = Encoding.ASCII.GetString(buffer, 0, received)).EndsWith("\r\n0\r\n\r\n", StringComparison.Ordinal))
            {
                int count = socket.Receive(buffer, received, buffer.Length - received, SocketFlags.None);
                if (count == 0)
                {
                    return "the server closed the connection";
                }
                received += count;
            }
            string chunks = text[(text.IndexOf("\r\n\r\n", StringComparison.Ordinal) + 4)..];
            string body = chunks.Split("\r\n")[1].Trim();
            return $"{Stopwatch.GetElapsedTime(start).TotalMilliseconds,8:F2} ms  {body}";
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.TimedOut)
        {
            return $"no answer in {Stopwatch.GetElapsedTime(start).TotalSeconds:F1} s";
        }
    }
}
