using System;
using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;
using Spindle.AspNetCore.Transport;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>Tests that take the process's descriptor limit away for a moment: run alone, never beside another test.</summary>
[CollectionDefinition(nameof(RunsAloneWithTheDescriptorLimit), DisableParallelization = true)]
public sealed class RunsAloneWithTheDescriptorLimit
{
}

/// <summary>
/// The transport when the application or the kernel fails it: a ConnectionClosed callback that throws is logged, not
/// left to the pool's exception policy; an accept that fails (out of descriptors) is retried, not thrown at Kestrel,
/// whose accept loop would end for good.
/// </summary>
[Collection(nameof(RunsAloneWithTheDescriptorLimit))]
public sealed class TransportFailureTests
{
    [Fact]
    public async Task AConnectionClosedCallbackThatThrows_IsLogged_NotLeftToThePool()
    {
        var fired = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var escaped = new TaskCompletionSource<Exception>(TaskCreationOptions.RunContinuationsAsynchronously);
        var logged = new RecordingLoggerProvider();
        await using TestServer server = await TestServer.StartAsync(
            builder =>
            {
                // Report, not the default FailProcess, so that an escape is seen rather than ending the test run.
                builder.WebHost.UseSpindle(static pool => pool.ExceptionPolicy = UnhandledExceptionPolicy.Report);
                builder.Logging.AddProvider(logged);
            },
            static app => app.MapGet("/", static () => "hello"),
            listen: options => options.Listen(IPAddress.Loopback, 0, listen => listen.Use(next => async connection =>
            {
                connection.ConnectionClosed.Register(() =>
                {
                    fired.TrySetResult();
                    throw new InvalidOperationException("a ConnectionClosed callback failed");
                });
                await next(connection);
            })));
        WorkerPool pool = server.App.Services.GetRequiredKeyedService<WorkerPool>(SpindleTransportOptions.DefaultPoolName);
        pool.UnhandledException += (_, e) => escaped.TrySetResult(e.Exception);

        using (var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
        {
            await client.ConnectAsync(new IPEndPoint(IPAddress.Loopback, server.Address.Port)).WaitAsync(TestServer.Generous);
            await client.SendAsync("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"u8.ToArray());
            byte[] buffer = new byte[4096];
            Assert.True(await client.ReceiveAsync(buffer, SocketFlags.None).WaitAsync(TestServer.Generous) > 0, "no answer");
            client.Shutdown(SocketShutdown.Send); // the peer's FIN ends the receive loop, which fires ConnectionClosed
        }
        await fired.Task.WaitAsync(TestServer.Generous);
        Assert.True(SpinWait.SpinUntil(() => logged.Contains("ConnectionClosed token threw"), TestServer.Generous),
            "the callback's failure was not logged");
        Assert.False(escaped.Task.IsCompleted, $"the callback's exception reached the pool: {(escaped.Task.IsCompleted ? escaped.Task.Result : null)}");
    }

    [Fact]
    public async Task AnAcceptThatFailsForWantOfDescriptors_IsRetried_AndTheConnectionServedAfterwards()
    {
        Assert.True(OperatingSystem.IsLinux(), "the transport's own driver, and this test's descriptor limit, are Linux's");
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "accept", MinThreads = 2, MaxThreads = 2 });
        for (int i = 0; i < 8; i++)
        {
            // Every thread the test needs is started before the limit: a thread start needs descriptors too.
            await pool.Run(static () => Thread.Sleep(1)).WaitAsync(TestServer.Generous);
        }
        using ITimer warm = pool.TimeProvider.CreateTimer(static _ => { }, null, TimeSpan.FromHours(1), Timeout.InfiniteTimeSpan);
        var logged = new RecordingLoggerProvider();
        using var loggerFactory = new LoggerFactory([logged]);
        var factory = new SpindleTransportFactory(Options.Create(new SpindleTransportOptions { OwnPool = pool }),
            new ServiceCollection().BuildServiceProvider(), loggerFactory, hasPoolDriver: true);
        IConnectionListener listener = await factory.BindAsync(new IPEndPoint(IPAddress.Loopback, 0));
        try
        {
            Task<ConnectionContext?> accept = listener.AcceptAsync().AsTask();
            using var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp); // its descriptor, before the limit
            Assert.Equal(0, Native.GetRLimit(Native.RlimitNoFile, out Native.RLimit saved));
            var none = new Native.RLimit { Current = 0, Max = saved.Max };
            Assert.Equal(0, Native.SetRLimit(Native.RlimitNoFile, ref none));
            try
            {
                client.Connect(listener.EndPoint); // into the backlog; the listener's accept fails for want of a descriptor
                // Spin (a blocking wait may need a descriptor): only until the failure is logged, so the limit is short.
                SpinWait.SpinUntil(() => logged.Contains("Accepting a connection failed") || accept.IsCompleted, TimeSpan.FromSeconds(10));
            }
            finally
            {
                Assert.Equal(0, Native.SetRLimit(Native.RlimitNoFile, ref saved));
            }
            Assert.False(accept.IsFaulted, $"AcceptAsync threw: {accept.Exception?.InnerException}");
            Assert.True(logged.Contains("Accepting a connection failed"), "the accept did not fail: the test shows nothing");
            ConnectionContext? connection = await accept.WaitAsync(TestServer.Generous); // retried once descriptors are back
            Assert.NotNull(connection);
            await connection.DisposeAsync();
        }
        finally
        {
            await listener.UnbindAsync();
            await listener.DisposeAsync();
        }
    }

    private sealed class RecordingLoggerProvider : ILoggerProvider
    {
        private readonly ConcurrentQueue<string> _messages = new();

        public bool Contains(string text)
        {
            foreach (string message in _messages)
            {
                if (message.Contains(text, StringComparison.Ordinal))
                {
                    return true;
                }
            }
            return false;
        }

        public ILogger CreateLogger(string categoryName) => new Recorder(_messages);

        public void Dispose()
        {
        }

        private sealed class Recorder(ConcurrentQueue<string> messages) : ILogger
        {
            public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

            public bool IsEnabled(LogLevel logLevel) => true;

            public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
                messages.Enqueue(formatter(state, exception));
        }
    }

    private static class Native
    {
        public const int RlimitNoFile = 7;

        [StructLayout(LayoutKind.Sequential)]
        public struct RLimit
        {
            public ulong Current;
            public ulong Max;
        }

        [DllImport("libc", EntryPoint = "getrlimit", SetLastError = true)]
        public static extern int GetRLimit(int resource, out RLimit limit);

        [DllImport("libc", EntryPoint = "setrlimit", SetLastError = true)]
        public static extern int SetRLimit(int resource, ref RLimit limit);
    }
}
